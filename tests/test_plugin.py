"""The pytest plugin: a conformance run can only go green when a backend was really tested.

Each case runs pytest in a subprocess (``pytester``) on a tiny project whose conftest
shapes what polymm reports: broken backends, a backend with declared expected failures.
"""

from __future__ import annotations

import re

from polymm.backend import optional_dtypes

pytest_plugins = ["pytester"]

SUITE = "from polymm.testing.test_conformance import test_every_dtype, rng  # noqa: F401\n"

ONLY_BROKEN = """
import polymm
from polymm.registry import BackendInfo
polymm.backends = lambda: [BackendInfo("broken", False, "ImportError: libmine.so not found")]
"""

CPU_AND_BROKEN = """
import polymm
from polymm.registry import BackendInfo
_real = polymm.backends
polymm.backends = lambda: [i for i in _real() if i.name == "cpu"] + [
    BackendInfo("broken", False, "ImportError: libmine.so not found")]
"""

HALF_WRONG = """
import numpy as np
import polymm

class HalfWrong(polymm.Backend):
    algorithms = ("auto",)
    conformance_xfail = {XFAIL}

    def matmul(self, a, b, out, algorithm):
        np.matmul(a, b, out=out, dtype=np.float32 if out.dtype == np.float16 else None)
        if out.dtype == np.float16:
            out[...] += 1  # the known bug

polymm.register_backend("halfwrong", HalfWrong, replace=True)
"""


def _output(result) -> str:
    return "\n".join(result.outlines + result.errlines)


def _run(pytester, conftest, *args):
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", *args)


def test_a_run_that_can_test_no_backend_fails_and_says_why(pytester):
    result = _run(pytester, ONLY_BROKEN)
    assert result.ret != 0
    assert "no polymm backend can be tested" in _output(result)
    assert "broken: ImportError: libmine.so not found" in _output(result)


def test_naming_an_unavailable_backend_fails_with_its_reason(pytester):
    """One clean line, before collection: no traceback, no error per module; a usage error (4)."""
    for workers in ("0", "2"):
        result = _run(pytester, ONLY_BROKEN, "--polymm-backend=broken", "-n", workers)
        assert result.ret == 4, _output(result)
        output = _output(result)
        assert output.count("backend 'broken' is unavailable: ImportError: libmine.so not found") == 1, output
        assert "Traceback" not in output and "pluggy" not in output and "collect" not in output, output


def test_an_all_backends_run_reports_what_it_left_out(pytester):
    result = _run(pytester, CPU_AND_BROKEN, "-k", "float32 or complex64")
    result.assert_outcomes(passed=6)  # cpu: three algorithms, two dtypes
    result.stdout.fnmatch_lines(
        [
            "*polymm conformance suite: testing backend(s) cpu*",
            "*left out (unavailable): ImportError: libmine.so not found*",
            "*polymm backends not tested*",
            "broken: unavailable: ImportError*",
        ]
    )


def test_the_ini_option_names_the_backend(pytester):
    pytester.makeini("[pytest]\npolymm_backend = broken\n")
    result = _run(pytester, ONLY_BROKEN)
    assert result.ret != 0
    assert "backend 'broken' is unavailable" in _output(result)


def test_declared_failures_are_strict_visible_xfails(pytester):
    result = _run(
        pytester,
        HALF_WRONG.replace("{XFAIL}", '{"test_every_dtype[*-float16]": "rounds float16 wrong"}'),
        "--polymm-backend=halfwrong",
        "-rx",
    )
    # the optional dtypes (bfloat16 with ml_dtypes) the test backend does not offer: refused, skipped
    result.assert_outcomes(passed=13, xfailed=1, skipped=len(optional_dtypes()))
    result.stdout.fnmatch_lines(["*XFAIL*float16*declared by backend 'halfwrong': rounds float16 wrong*"])


def test_a_declared_failure_that_passes_fails_the_run(pytester):
    result = _run(
        pytester,
        HALF_WRONG.replace("{XFAIL}", '{"test_every_dtype[*-int8]": "stale declaration"}'),
        "--polymm-backend=halfwrong",
    )
    # float16 really wrong; int8 passes: strict XPASS (optional dtypes it does not offer: skipped)
    result.assert_outcomes(passed=12, failed=2, skipped=len(optional_dtypes()))


def test_unrelated_pytest_runs_load_no_backend(pytester):
    pytester.makeconftest("")
    pytester.makepyfile(
        test_other="""
import sys

def test_nothing_loaded():
    assert not any(m.startswith(("polymm_numba", "polymm_opencl", "pyopencl", "numba")) for m in sys.modules)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=1)


ADAPTER_SUITE = "from polymm.testing.test_adapters import *  # noqa: F401,F403\n"

#: Adapters for TinyArray (examples/polymm-example-backend), each broken in one way.
BROKEN_ADAPTER = """
import pytest
from polymm.arrays import register_array_kind

tiny = pytest.importorskip("polymm_example.tiny")


class Broken(tiny.TinyKind):
    {BODY}


register_array_kind("tiny", Broken, replace=True)
"""


def _broken_adapter(pytester, body):
    pytester.makeconftest(BROKEN_ADAPTER.replace("{BODY}", body))
    pytester.makepyfile(test_suite=ADAPTER_SUITE)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", "--polymm-backend=tiny")


def test_a_tiny_run_of_the_adapter_suite_passes(pytester):
    """The control: the example's adapter passes what the broken ones below fail."""
    result = _broken_adapter(pytester, "pass")
    assert result.ret == 0, _output(result)


def test_an_adapter_whose_assign_does_nothing_fails_the_suite_naming_assign(pytester):
    result = _broken_adapter(pytester, "def assign(self, dst, src):\n        pass")
    assert result.ret == 1
    output = _output(result)
    assert "assign(dst, src) did not copy src into dst" in output
    assert "was not written at all: for this out= the core computes into a temporary and copies it in" in output
    assert "out= aliasing x1 holds wrong values" in output and "copy it in with assign(dst, src)" in output
    assert "K = 0: out= must hold zeros, which the core writes with the adapter's assign(dst, src)" in output


def test_an_adapter_blind_to_aliasing_fails_the_suite_naming_shares_memory(pytester):
    result = _broken_adapter(pytester, "def shares_memory(self, x, y):\n        return False")
    assert result.ret == 1
    output = _output(result)
    assert "shares_memory() is False for views of one array" in output
    assert "shares_memory(out, x1) is False for the very same array" in output


def test_an_adapter_that_takes_views_for_contiguous_fails_the_suite_naming_it(pytester):
    result = _broken_adapter(pytester, "def is_c_contiguous(self, x):\n        return True")
    assert result.ret == 1
    output = _output(result)
    assert "is_c_contiguous() is True for a transposed view" in output
    assert "is_c_contiguous() is True for a transposed out=" in output


BROKEN_BACKEND = """
import numpy as np
import polymm

class Broken(polymm.Backend):
    def matmul(self, a, b, out, algorithm):
        {BODY}

polymm.register_backend("broken", Broken, replace=True)
"""


def test_a_backend_that_returns_its_product_is_told_to_write_out(pytester):
    result = _run(
        pytester, BROKEN_BACKEND.replace("{BODY}", "return np.matmul(a, b)"), "--polymm-backend=broken", "-k", "int32"
    )
    assert result.ret == 1
    output = _output(result)
    assert "backend 'broken': matmul() returned a ndarray instead of None: it must write the product into" in output
    assert "raised inside polymm backend 'broken'" in output  # the note naming the backend


def test_a_backend_that_leaves_out_unwritten_is_told_so(pytester):
    """Results the core allocates are poisoned in the suite, and an untouched one is named as such."""
    result = _run(pytester, BROKEN_BACKEND.replace("{BODY}", "pass"), "--polymm-backend=broken", "-k", "float32")
    assert result.ret == 1
    assert "matmul() left `out` unwritten: all 323 elements of the (1, 17, 19) float32 output" in _output(result)


def test_the_one_line_import_brings_the_whole_suite(pytester):
    """``from polymm.testing.suite import *`` collects what ``--pyargs polymm.testing`` does, test_paths
    and the adapter cases included."""
    pytester.makeconftest("")
    pytester.makepyfile(test_mine="from polymm.testing.suite import *  # noqa: F401,F403\n")
    counts = []
    for args in ((), ("--pyargs", "polymm.testing")):
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-n", "0", "--co", "-q", "--polymm-backend=example", *args
        )
        counts.append(int(re.search(r"(\d+) tests? collected", _output(result)).group(1)))
        assert "test_path_shapes[" in _output(result) and "test_own_out[" in _output(result)
    assert counts[0] == counts[1], counts


def test_declared_patterns_take_test_ids_as_printed():
    """Brackets are literal, so a pattern written from an id picks that dtype only."""
    from polymm.testing.plugin import declared_match

    pattern = "test_every_dtype[*-float16]"
    assert declared_match(pattern, "test_every_dtype[mine-auto-float16]")
    for other in ("test_every_dtype[mine-auto-bfloat16]", "test_every_dtype_batched_odd[mine-auto-float16]"):
        assert not declared_match(pattern, other)
    assert not declared_match(pattern, "test_mixed_dtypes_promote_like_numpy[numpy-mine-float16-float32]")
    assert declared_match("*::test_every_dtype*", "test_conformance.py::test_every_dtype[mine-auto-int8]")
