"""``polymm fuzz`` and :mod:`polymm.tools.fuzz`: green on correct backends, and it catches, shrinks
and replays the faults of deliberately wrong ones registered at run time."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import polymm
from polymm.tools import cli
from polymm.testing import assert_matches
from polymm.tools import fuzz


def polymm_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "polymm.tools.cli", *args], capture_output=True, text=True, timeout=600
    )


# -- deliberately wrong backends --------------------------------------------------------------


class _NumpyBackend(polymm.Backend):
    algorithms = ("auto",)

    @np.errstate(all="ignore")
    def matmul(self, a, b, out, algorithm):
        acc = np.float32 if out.dtype == np.float16 else out.dtype
        for i in range(out.shape[0]):
            out[i] = np.matmul(a[i].astype(acc), b[i].astype(acc))


class OffByOne(_NumpyBackend):
    """Right except for one element when M >= 9 and N is odd."""

    def matmul(self, a, b, out, algorithm):
        super().matmul(a, b, out, algorithm)
        _, m, n = out.shape
        if m >= 9 and n % 2:
            if out.dtype == np.bool_:
                out[:, -1, -1] = ~out[:, -1, -1]
            else:
                out[:, -1, -1] += 1


class IgnoresStrides(_NumpyBackend):
    """Reads an operand that is not C-contiguous in memory order as if it were (Fortran data scrambled)."""

    def matmul(self, a, b, out, algorithm):
        if not a[0].flags.c_contiguous:
            a = np.ascontiguousarray(a.swapaxes(-1, -2)).reshape(a.shape)
        super().matmul(a, b, out, algorithm)


class RefusesFloat16(_NumpyBackend):
    """Does not compute float16, and says so with the contract's TypeError."""

    def dtypes(self):
        return tuple(d for d in super().dtypes() if d != np.float16)


class RefusesWithValueError(RefusesFloat16):
    """Does not compute float16, but refuses it with the wrong exception type."""

    def check_dtype(self, dtype, operand):
        if dtype not in self.dtypes():
            raise ValueError(f"no {dtype} here")


@pytest.fixture(scope="module", autouse=True)
def wrong_backends():
    for name, factory in (
        ("fuzz-off-by-one", OffByOne),
        ("fuzz-ignores-strides", IgnoresStrides),
        ("fuzz-refuses-f16", RefusesFloat16),
        ("fuzz-refuses-badly", RefusesWithValueError),
    ):
        polymm.register_backend(name, factory, replace=True)


def run_cli(capsys, *args):
    code = cli.main(["fuzz", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- correct backends are green ---------------------------------------------------------------


def test_fuzz_every_available_backend(polymm_backend):
    """About 200 random cases on each backend the suite runs on (every available one in CI)."""
    summary = fuzz.run([polymm_backend], cases=200, seed=20240613, max_failures=3)
    assert summary.cases == 200 and summary.valid and summary.invalid
    assert not summary.failures, "\n\n".join(
        f"case {f.index}: {f.check}: {f.message}\nreplay: {f.replay}\n{f.reproducer}" for f in summary.failures
    )


@pytest.mark.parametrize("backend", ["cpu", "example"])
def test_command_is_green_on_correct_backends(backend):
    proc = polymm_cli("fuzz", "--backend", backend, "--cases", "80", "--seed", "1", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["ok"] and summary["cases"] == 80 and summary["backends"] == [backend]
    assert summary["valid"] + summary["invalid"] == 80 and summary["per_dtype"] and summary["per_kind"]
    assert "no failures" in proc.stderr  # the report goes to stderr with --json


def test_human_report_and_usage_errors():
    proc = polymm_cli("fuzz", "--backend", "example", "--cases", "30", "--dtypes", "int8,float32")
    assert proc.returncode == 0 and "30 cases" in proc.stdout and "no failures" in proc.stdout
    assert "float64" not in proc.stdout.split("by result dtype:")[1].split("\n")[0]
    proc = polymm_cli("fuzz", "--backend", "no-such-backend")
    assert proc.returncode == 2 and "no-such-backend" in proc.stderr
    proc = polymm_cli("fuzz", "--backend", "example", "--dtypes", "object")
    assert proc.returncode == 2 and "not in the contract" in proc.stderr


def test_time_budget_stops_the_run(capsys):
    code, out, _ = run_cli(capsys, "--backend", "example", "--cases", "1000000", "--time-budget", "0.5", "--json")
    summary = json.loads(out)
    assert code == 0 and summary["stopped"] == "time budget" and 0 < summary["cases"] < 1000000


def test_a_refusing_backend_is_green_when_it_refuses_with_a_type_error(capsys):
    code, out, _ = run_cli(
        capsys, "--backend", "fuzz-refuses-f16", "--cases", "150", "--dtypes", "float16,int8", "--json"
    )
    summary = json.loads(out)
    assert code == 0 and summary["refused"] > 0, summary["failures"]


# -- cases are reproducible from (seed, index) ------------------------------------------------


def test_cases_depend_on_seed_and_index_only():
    first = [fuzz.draw_case(5, i, None, ("auto",)) for i in range(300)]
    assert first == [fuzz.draw_case(5, i, None, ("auto",)) for i in range(300)]
    assert fuzz.draw_case(5, 299, None, ("auto",)) == first[299]  # not the 300th draw of one stream
    assert len({c.data_seed for c in first}) == 300 and fuzz.draw_case(6, 0) != first[0]
    kinds = {c.kind for c in first}
    assert "valid" in kinds and len(kinds) > 5
    assert {c.layout1 for c in first} >= {"C", "F", "T", "neg", "bcast", "swap"}
    assert {c.out for c in first} >= {"none", "exact", "strided", "alias1"}


def test_every_drawn_case_builds_and_its_code_runs():
    for i in range(40):
        case = fuzz.draw_case(11, i, ["float32", "int16"], ("auto",))
        assert fuzz.replays(fuzz.case_code(case, "example", ("auto",))) is False, fuzz.case_code(case, "example")


# -- wrong backends are caught, shrunk and replayed -------------------------------------------


def _first_failure(capsys, backend, *extra):
    code, out, err = run_cli(
        capsys, "--backend", backend, "--cases", "200", "--seed", "3", "--max-failures", "1", "--json", *extra
    )
    assert code == 1, err
    summary = json.loads(out)
    assert not summary["ok"] and summary["stopped"] == "max failures"
    failure = summary["failures"][0]
    assert "polymm fuzz --backend " + backend in failure["replay"] and "--case" in failure["replay"]
    assert failure["replays"] is True
    assert failure["replay"] in err and failure["reproducer"].splitlines()[-1] in err
    return failure


def test_a_slightly_wrong_value_is_caught_shrunk_and_replayed(capsys):
    failure = _first_failure(capsys, "fuzz-off-by-one")
    assert failure["check"] == "values"
    small = fuzz.Case(**failure["shrunk_case"])
    assert (small.m, small.k, small.batch1, small.batch2) == (9, 1, (), ())
    assert small.n == 1 and small.layout1 == small.layout2 == "C" and small.out == "none"
    assert small.specials1 == small.specials2 == 0
    with pytest.raises(AssertionError, match="elements? off|wrong elements"):
        exec(failure["reproducer"], {})
    # the original case replays on its own from (seed, index)
    code, out, _ = run_cli(
        capsys, "--backend", "fuzz-off-by-one", "--seed", "3", "--case", str(failure["index"]), "--json"
    )
    assert code == 1 and json.loads(out)["failures"][0]["index"] == failure["index"]


def test_ignored_strides_are_caught_with_a_small_layout_reproducer(capsys):
    failure = _first_failure(capsys, "fuzz-ignores-strides")
    assert failure["check"] == "values"
    small = fuzz.Case(**failure["shrunk_case"])
    assert small.layout1 not in ("C",) and small.batch1 == small.batch2 == ()
    assert small.m <= 3 and small.k <= 3 and small.n <= 2, failure["shrunk"]
    with pytest.raises(AssertionError):
        exec(failure["reproducer"], {})


def test_the_wrong_exception_type_is_caught(capsys):
    failure = _first_failure(capsys, "fuzz-refuses-badly", "--dtypes", "float16,float32")
    assert failure["check"] == "exception" and failure["message"].startswith("ValueError")
    small = fuzz.Case(**failure["shrunk_case"])
    assert small.result_dtype == np.float16 and max(small.m, small.k, small.n) <= 1
    with pytest.raises(ValueError, match="float16"):
        exec(failure["reproducer"], {})


def test_invalid_problems_must_name_what_was_wrong(monkeypatch):
    """A core that raised the right type with a vague message would be caught too."""
    case = next(c for c in (fuzz.draw_case(2, i) for i in range(500)) if c.kind == "contraction")
    original = polymm.matmul

    def vague(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except ValueError:
            raise ValueError("bad shapes") from None

    monkeypatch.setattr(polymm, "matmul", vague)
    outcome = fuzz.check_case(case, "example")
    assert outcome.status == "fail" and outcome.check == "message"


def test_correctly_rounded_float16_subnormals_pass_the_oracle():
    """The fuzzer found the oracle's float16 bound below half the spacing of float16 subnormals
    (2**-25): a correctly rounded subnormal result failed. The bound now allows exactly that."""
    x1 = np.array([[2.0**-12]], np.float16)
    x2 = np.array([[1.5 * 2.0**-12]], np.float16)  # 1.5 * 2**-24: a tie between two subnormals
    assert_matches(polymm.matmul(x1, x2, backend="example"), x1, x2)
    with pytest.raises(AssertionError):
        assert_matches(polymm.matmul(x1, x2, backend="example") + np.float16(2.0**-22), x1, x2)


def test_float16_overflow_to_inf_passes_the_oracle():
    """The fuzzer (cpu, seed 20261125, case 78071) found the oracle calling a correct float16 Inf
    wrong: uint8 @ float16 sums past 65520 round to Inf, while the float64 reference stayed
    finite. Inf of the reference's sign is now expected there, and nowhere else."""
    x1 = np.full((2, 300), 255, np.uint8)
    x2 = np.full((300, 2), 1.0, np.float16)  # 76,500: past float16's largest value
    x2[:, 1] = -1.0
    result = polymm.matmul(x1, x2, backend="example")
    assert np.isposinf(result[:, 0]).all() and np.isneginf(result[:, 1]).all()
    assert_matches(result, x1, x2)
    with pytest.raises(AssertionError):
        assert_matches(-result, x1, x2)  # Inf of the wrong sign
    small = np.full((300, 2), 0.5, np.float16)  # 38,250: finite, so Inf there is wrong
    with pytest.raises(AssertionError):
        assert_matches(np.full((2, 2), np.inf, np.float16), x1, small)


# -- the backend's own arrays as out= ---------------------------------------------------------


def test_own_arrays_are_drawn_as_out_in_every_layout_and_made_with_them():
    drawn = [fuzz.draw_case(7, i) for i in range(600)]
    own = {c.out for c in drawn if c.native and c.kind == "valid"}
    assert own >= {"none", "exact", "strided", "fortran", "reversed", "alias1", "alias2", "aliasboth"}, own
    assert any(c.native and c.kind == "out-readonly" for c in drawn)
    assert not any(c.native and "swap" in (c.layout1, c.layout2) for c in drawn)
    # OwnArrays keeps layouts, aliasing and read-only: the TinyArrays share one copy of the holder's memory
    holder = np.arange(24.0).reshape(4, 6)
    made = fuzz.OwnArrays("tiny", x1=holder[:, ::2].T, out=holder[:, 1::2], holder=holder)
    assert made.kept and made.kind.shares_memory(made.out, made.holder) and not made.kind.is_c_contiguous(made.x1)
    assert np.array_equal(made.to_numpy(made.x1), holder[:, ::2].T)
    holder.flags.writeable = False
    assert not made.kind.writeable(fuzz.OwnArrays("tiny", out=holder).out)


def test_a_tiny_fuzz_run_is_green_and_counts_its_own_out_cases():
    summary = fuzz.run(["tiny"], cases=150, seed=2, max_failures=1)
    assert not summary.failures, summary.failures[0].reproducer
    assert summary.own_out > 10 and summary.own_arrays > summary.own_out


@pytest.fixture
def broken_tiny_adapter():
    """Registers a TinyArray adapter with one method replaced, and the example's own again after."""
    tiny = pytest.importorskip("polymm_example.tiny")
    from polymm.arrays import register_array_kind

    def broken(**methods):
        register_array_kind("tiny", type("Broken", (tiny.TinyKind,), methods), replace=True)

    yield broken
    register_array_kind("tiny", tiny.TinyKind, replace=True)


#: One adapter method broken at a time: what it does instead, the check that catches it, what the message must say.
BROKEN_METHODS = {
    "assign": (
        lambda self, dst, src: None,  # copies nothing
        "out-unwritten",
        ("out= was not written at all: out= is a ", "TinyArray (adapter 'tiny')", "assign(dst, src)"),
    ),
    "shares_memory": (
        lambda self, x, y: False,  # blind to aliasing
        "shares-memory",
        ("adapter 'tiny': shares_memory(out, x", ") is False for an out= that is x", " itself: the core would let"),
    ),
    "writeable": (
        lambda self, x: True,  # blind to read-only arrays
        "no-exception",
        ("no ValueError raised for a read-only TinyArray out= (the adapter's writeable())",),
    ),
}


@pytest.mark.parametrize("method", sorted(BROKEN_METHODS))
def test_the_fuzzer_names_a_broken_adapter_method(broken_tiny_adapter, method):
    replacement, check, named = BROKEN_METHODS[method]
    broken_tiny_adapter(**{method: replacement})
    summary = fuzz.run(["tiny"], cases=400, seed=4, max_failures=40, shrink_failures=1)
    hits = [f for f in summary.failures if f.check == check and "as the backend's arrays" in f.case]
    assert hits, [f"{f.check}: {f.message}" for f in summary.failures]
    assert all(part in hits[0].message for part in named), hits[0].message
