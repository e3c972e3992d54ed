"""The cliff suite's machinery: the matrix, the JSON it writes, the heatmap, the summary and floors.

Nothing here asserts a speed: the floors are benchmark results, recorded in
``benchmarks/cliffs/``; these tests check that the instrument measures what it says.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import polymm
from polymm.tools import cliffs
from polymm.tools.cli import main


def test_matrix_covers_the_issue():
    groups = {c.group for c in cliffs.CASES}
    assert {"square", "batched", "broadcast", "matvec", "deep-k", "outer", "views"} <= groups
    names = [c.name for c in cliffs.CASES]
    assert len(names) == len(set(names)), "case names are how results are compared: they must be unique"
    covered = {d for c in cliffs.CASES for d in c.dtypes}
    assert covered == {str(d) for d in polymm.backend.CONTRACT_DTYPES} | {"bfloat16"}
    squares = sorted(c.x1[0] for c in cliffs.CASES if c.group == "square")
    assert squares[0] <= 32 and squares[-1] >= 4096 and any(n % 2 for n in squares)
    deep = [c for c in cliffs.CASES if c.group == "deep-k"]
    assert all(c.x1[-1] >= 256 * max(c.x1[-2], c.x2[-1]) for c in deep)
    assert {c.layout for c in cliffs.CASES} >= {"transposed", "fortran", "negative", "step"}
    tc = [c for c in cliffs.CASES if c.group == "tensor-core"]
    assert all(c.gpu_only for c in tc) and {"float16", "int8", "float64"} <= {d for c in tc for d in c.dtypes}


def test_the_gpu_grid_crosses_every_class_with_every_dtype_and_mode():
    """Issue 30: no dtype timed on a subset chosen by hand: every class of the grid runs every
    contract dtype (bfloat16 too) and float32 in every reduced precision mode, GPU backends only."""
    grid = [c for c in cliffs.CASES if c.name.startswith("grid-")]
    assert all(c.gpu_only for c in grid)
    every = {str(d) for d in polymm.backend.CONTRACT_DTYPES} | {"bfloat16"}
    for name, *_ in cliffs.GRID_CLASSES:
        cells = {(d, c.precision) for c in grid if c.name.endswith(f"-{name}") for d in c.dtypes}
        assert {d for d, mode in cells if mode == "default"} == every, name
        assert {("float32", mode) for mode in cliffs.GRID_MODES} <= cells, name
    classes = {c.group for c in grid}
    assert {"square", "tall-wide", "deep-k", "batched", "broadcast", "matvec", "outer", "views"} <= classes
    views = {c.layout for c in grid if c.group == "views"}
    assert views == {"at", "bt", "transposed", "fortran", "negative", "step"}
    odd = [c.x1[0] for c in grid if c.name.endswith("square-odd")]
    assert all(n % 8 and n % 16 for n in odd)
    for case in grid:  # the fast dtypes' cells are larger: at ten times the rate, as long a call
        if "-fast-" in case.name or case.precision != "default":
            slow = next(c for c in grid if c.name == "grid-" + case.name.split("-", 2)[2])
            assert case.multiply_adds() >= slow.multiply_adds()


def test_a_transposed_first_operand_is_a_layout():
    case = cliffs.Case("x", "views", (3, 4), (4, 5), "at")
    assert case.operand_layouts == ("transposed", "c")


def test_gpu_only_cases_skip_host_backends():
    cells = cliffs.run(["cpu"], cases="tc-square-1024,square-32", dtypes=["float16", "float32"])
    assert [(c.case, c.dtype) for c in cells] == [("square-32", "float32")]


@pytest.mark.parametrize("case", cliffs.CASES, ids=[c.name for c in cliffs.CASES])
def test_layouts_give_the_named_shape(case):
    rng = np.random.default_rng(0)
    small = tuple(min(s, 5) for s in case.x1), tuple(min(s, 5) for s in case.x2)
    for shape, layout in zip(small, case.operand_layouts):
        base = cliffs.random_array(rng, cliffs._base_shape(shape, layout), "float32")
        view = cliffs._view(np, base, layout)
        assert view.shape == shape
        if layout in ("transposed", "negative", "step") and len(shape) > 1 and min(shape[-2:]) > 1:
            assert not view.flags.c_contiguous
    if case.layout == "bt":
        assert case.operand_layouts == ("c", "transposed")


def test_multiply_adds():
    by_name = {c.name: c for c in cliffs.CASES}
    assert by_name["square-64"].multiply_adds() == 64**3
    assert by_name["gemv-4096"].multiply_adds() == 4096 * 4096
    assert by_name["gevm-4096"].multiply_adds() == 4096 * 4096
    assert by_name["broadcast-1000x32"].multiply_adds() == 1000 * 32**3
    assert by_name["broadcast-64x64x32"].multiply_adds() == 64 * 64 * 32**3


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_suite_command_writes_json_and_heatmap(backend, tmp_path):
    if not any(i.name == backend and i.available for i in polymm.backends()):
        pytest.skip(f"backend {backend} unavailable here")
    out, png = tmp_path / "cells.json", tmp_path / "cells.png"
    code = main(
        [
            "bench",
            "--suite",
            "cliffs",
            "--backend",
            backend,
            "--cases",
            "square-32,gevm-*,negative-*",
            "--dtype",
            "float32,float64",
            "--budget",
            "0.02",
            "--json",
            str(out),
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    document = json.loads(out.read_text())
    assert set(document) >= {"cells", "summary", "machine", "date", "command"}
    cells = document["cells"]
    assert {(c["case"], c["dtype"]) for c in cells} == {
        (n, d) for n in ("square-32", "gevm-4096", "negative-1024") for d in ("float32", "float64")
    }
    for cell in cells:
        assert set(cell) >= {"backend", "case", "dtype", "shape", "ratio", "gflops", "ref_gflops"}
        assert cell["correct"] and cell["ratio"] > 0 and cell["gflops"] > 0 and cell["ref_gflops"] > 0
        assert cell["gflops"] / cell["ref_gflops"] == pytest.approx(cell["ref_seconds"] / cell["seconds"])
        # the program's ratio: what our calls add to the reference's next ones counts against us
        assert cell["ref_added"] >= 0 and cell["ref_seconds"] <= cell["ref_seconds_alone"]
        assert cell["ratio"] == pytest.approx(cell["ref_seconds"] / (cell["seconds"] + cell["ref_added"]))
        # both timings: interleaved call by call (the ratio the floors judge) and each side alone
        assert cell["timing"] == "interleaved" and cell["ratio_alone"] > 0
        assert cell["ratio_alone"] == pytest.approx(cell["ref_seconds_alone"] / cell["seconds_alone"])
    summary = document["summary"][backend]
    assert summary["worst"] == min(c["ratio"] for c in cells)
    assert summary["worst_case"] in {f"{c['case']} {c['dtype']}" for c in cells}
    assert min(c["ratio"] for c in cells) <= summary["geomean"] <= max(c["ratio"] for c in cells)
    assert summary["alone"]["worst"] == min(c["ratio_alone"] for c in cells)
    assert png.stat().st_size > 10_000
    if backend == "opencl" and _importable("pyclblast"):  # CLBlast's column, where it is installed
        square = next(c for c in cells if c["case"] == "square-32" and c["dtype"] == "float32")
        assert square["clblast_ratio"] > 0


def _importable(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


class _WrongBackend(polymm.Backend):
    """Adds one to every result: the suite must mark its cells wrong and fail the run."""

    algorithms = ("auto",)

    def matmul(self, a, b, out, algorithm):
        np.matmul(a, b, out=out)
        out += 1


def test_a_stopped_run_keeps_the_cells_it_measured(tmp_path, monkeypatch):
    """``--json FILE`` is rewritten after every cell (marked ``partial``): a long GPU grid stopped by
    a time limit keeps what it measured; the finished run's file has no such mark."""
    out = tmp_path / "cells.json"
    real_run = cliffs.run
    seen = []

    def run(*args, on_cell=None, **kwargs):
        def spy(cell):
            on_cell(cell)
            seen.append(json.loads(out.read_text()))

        return real_run(*args, on_cell=spy, **kwargs)

    monkeypatch.setattr(cliffs, "run", run)
    argv = ["bench", "--suite", "cliffs", "--backend", "cpu", "--cases", "square-32,square-64"]
    assert main([*argv, "--dtype", "float32", "--budget", "0.02", "--json", str(out)]) == 0
    assert [len(d["cells"]) for d in seen] == [1, 2]
    assert all(d["partial"].startswith(f"{len(d['cells'])} cells so far") for d in seen)
    final = json.loads(out.read_text())
    assert "partial" not in final and len(final["cells"]) == 2


def test_merged_parts_are_whole_only_when_a_later_part_measured_what_a_stopped_one_missed(tmp_path):
    """``scripts/cliffs_merge.py``: a part stopped after one of its two cells leaves the merge
    partial, naming the cell; a third part that measured it makes the merge whole, dated when
    it was."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "cliffs_merge", Path(__file__).parents[1] / "scripts" / "cliffs_merge.py"
    )
    merging = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(merging)
    out = tmp_path / "all.json"
    argv = ["bench", "--suite", "cliffs", "--backend", "cpu", "--dtype", "float32", "--budget", "0.02", "--json"]
    assert main([*argv, str(out), "--cases", "square-32,square-64"]) == 0
    whole = json.loads(out.read_text())
    command = (
        "polymm bench --suite cliffs --backend cpu --dtype float32 --cases "  # in-process runs record pytest's argv
    )
    stopped = dict(
        whole,
        command=command + "square-32,square-64",
        cells=whole["cells"][:1],
        partial="1 cells so far: the run had not ended when this was written",
    )
    assert main([*argv, str(out), "--cases", "square-64"]) == 0
    later = json.loads(out.read_text())
    later.update(date="2099-01-01T00:00:00+00:00", command=command + "square-64")
    cut = merging.merge([stopped])
    assert cut["partial"].startswith("1 cells of the parts' selections never measured: square-64 float32")
    merged = merging.merge([cut, later])
    assert "partial" not in merged and len(merged["cells"]) == 2
    assert merged["date"] == later["date"] and [p.get("partial") for p in merged["parts"]] == [stopped["partial"], None]


def test_grid_floors_apply_issue_30s_rules_dtype_by_dtype():
    """``scripts/grid_floors.py``: only cells whose reference takes 50 us count; a float dtype
    misses on its worst cell and its geometric mean, squares (plain, not their views) on their
    own floor, an integer dtype on its every-cell floor; a precision mode is a group of its own."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "grid_floors", Path(__file__).parents[1] / "scripts" / "grid_floors.py"
    )
    grid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grid)

    def cell(case, dtype, ratio, n=64, layout="c", ref=1e-3, precision="default"):
        shape = f"({n}, {n}) @ ({n}, {n})"
        return dict(
            case=case, dtype=dtype, ratio=ratio, shape=shape, layout=layout, ref_seconds=ref, precision=precision
        )

    cells = [
        cell("tiny", "float32", 0.1, ref=10e-6),  # under 50 us of the reference: not counted
        cell("square-4096", "float32", 0.9, n=4096),
        cell("grid-view-at", "float32", 0.9, n=4096, layout="at"),
        cell("grid-wide", "float32", 1.3),
        cell("grid-tf32-wide", "float32", 0.7, precision="tf32"),
        cell("grid-outer", "int64", 1.1),
        cell("grid-outer", "int8", 2.5),
    ]
    rows = {r["group"]: r for r in grid.floors(cells)}
    assert rows["float32"]["cells"] == 3 and rows["float32"]["worst"] == 0.9
    assert rows["float32"]["misses"] == ["square-4096 0.90 < 0.95"]  # the geomean (1.03) holds; the view is no square
    assert rows["float32 tf32"]["misses"] == ["worst 0.70 < 0.8 (grid-tf32-wide)", "geomean 0.70 < 1.0"]
    assert rows["int64"]["misses"] == ["worst 1.10 < 1.2 (grid-outer)"] and rows["int8"]["misses"] == []


def test_wrong_answers_fail_the_run(tmp_path):
    polymm.register_backend("cliffs-wrong", _WrongBackend, replace=True)
    out = tmp_path / "wrong.json"
    code = main(
        [
            "bench",
            "--suite",
            "cliffs",
            "--backend",
            "cliffs-wrong",
            "--cases",
            "square-32",
            "--dtype",
            "float32",
            "--budget",
            "0.01",
            "--json",
            str(out),
        ]
    )
    assert code == 1
    (cell,) = json.loads(out.read_text())["cells"]
    assert not cell["correct"] and "elements off" in cell["error"]


def _cell(case, dtype, ratio, ref_seconds):
    return cliffs.Cell(
        "cpu",
        case,
        "square",
        dtype,
        "",
        "c",
        ratio,
        1.0,
        1.0 / ratio,
        1e-3,
        ref_seconds,
        "numpy.matmul",
        False,
        1.0,
        1.0,
        3,
        True,
    )


def test_cells_of_one_shape_and_dtype_share_their_random_operands(monkeypatch):
    """Drawing the operands is kept once per (shape, dtype, side) within a run: the GPU grid's
    classes share their sizes, and drawing large float operands took longer than timing a cell."""
    drawn = []
    real = cliffs.random_array

    def counting(rng, shape, dtype):
        drawn.append((tuple(shape), np.dtype(dtype).str))
        return real(rng, shape, dtype)

    monkeypatch.setattr(cliffs, "random_array", counting)
    cells = cliffs.run(["cpu"], cases="square-1024,transposed-1024", dtypes=["float32"], budget=0.02)
    assert len(cells) == 2 and all(c.correct for c in cells)
    assert drawn == [((1024, 1024), "<f4")] * 2  # once per side, not once per side and cell
    operands, rng = {}, np.random.default_rng(0)
    first = cliffs._random_operand(rng, (8, 8), np.dtype("float32"), 0, operands)
    assert cliffs._random_operand(rng, (8, 8), np.dtype("float32"), 0, operands) is first
    assert cliffs._random_operand(rng, (8, 8), np.dtype("float32"), 1, operands) is not first
    assert cliffs._random_operand(rng, (8, 8), np.dtype("float64"), 0, operands).dtype == np.float64
    assert cliffs._random_operand(rng, (8, 8), np.dtype("float32"), 0, None) is not first  # no keeping


def test_summary_applies_the_floor_to_slow_enough_float_cells():
    cells = [
        _cell("a", "float32", 2.0, 1e-3),
        _cell("b", "float64", 0.5, 1e-3),
        _cell("c", "float32", 0.1, 1e-6),  # reference too fast: governed by call overhead
        _cell("d", "int8", 0.05, 1e-3),
    ]  # not a float cell
    summary = cliffs.summarise(cells)["cpu"]
    assert summary["worst"] == 0.05 and summary["worst_case"] == "d int8"
    floor = summary["floor"]
    assert floor["cells"] == 2 and floor["worst"] == 0.5 and floor["worst_case"] == "b float64"
    assert floor["geomean"] == pytest.approx(1.0) and floor["holds"] is False


def test_unknown_case_pattern_is_a_clear_error(capsys):
    assert main(["bench", "--suite", "cliffs", "--backend", "cpu", "--cases", "no-such-case"]) == 2
    assert "no cliff-suite case matches" in capsys.readouterr().err


def test_sizes_and_suite_do_not_mix(capsys):
    assert main(["bench", "--suite", "cliffs", "--backend", "cpu", "--sizes", "64"]) == 2
    assert "--cases" in capsys.readouterr().err


def test_the_interleaved_ratio_charges_what_our_calls_add_to_the_references_next(monkeypatch):
    """A user's program pays for both calls: where ours leave threads spinning on the cores the
    reference's next call needs, its slower calls count against us, not for us."""
    from polymm.tools import timing

    ms = 1e-3
    alone = (timing.Timing(1 * ms, 1 * ms, 9), timing.Timing(1 * ms, 1.1 * ms, 9))
    program = (timing.Timing(1 * ms, 1.2 * ms, 9), timing.Timing(2.5 * ms, 3.1 * ms, 9))
    monkeypatch.setattr(cliffs.timing, "interleaved", lambda *a, **k: (alone, 9))
    monkeypatch.setattr(cliffs.timing, "alternating", lambda *a, **k: (program, 9))
    (cell,) = cliffs.run(["cpu"], cases="square-64", dtypes=["float32"], budget=0.02)
    assert cell.correct and cell.ref_added == pytest.approx(2 * ms)  # 3.1 ms after ours, 1.1 alone
    assert cell.ref_seconds == pytest.approx(1 * ms)  # its best call, alone: slowed by us, not slow
    assert cell.ratio == pytest.approx(1 / 3) and cell.ratio_alone == pytest.approx(1.0)


def test_alternating_times_each_call_right_after_one_of_the_other_side():
    """A program calling NumPy and polymm in turn: every timed call follows one of the other side
    (the first one too, after an untimed call), never one of its own."""
    from polymm.tools import timing

    calls = []
    first = (lambda: calls.append("a"), timing.host_clock())
    second = (lambda: calls.append("b"), timing.host_clock())
    (a, b), rounds = timing.alternating(first, second, 0.0, warm=(1.0, 1.0), min_rounds=4)
    assert rounds == 4 and a.samples == b.samples == 4
    assert calls == ["b", "a", "b", "a", "b", "a", "b", "a", "b"]


def test_interleaved_blocks_last_their_seconds_however_slow_the_first_call():
    """Each side's block runs for ``block_seconds`` by the wall clock: a first call slowed by the
    other side's spinning threads (here 20 ms against 1 ms after it) must not make the block a few
    calls long, all of them inside the spin."""
    import time

    from polymm.tools import timing

    calls = {"a": 0, "b": 0}

    def side(name):
        def call():
            time.sleep(0.02 if calls[name] == 0 else 0.001)
            calls[name] += 1

        return call, timing.host_clock()

    (a, b), rounds = timing.interleaved(side("a"), side("b"), 0.0, block_seconds=0.05)
    assert rounds == 2
    # 2 blocks of 50 ms of 1 ms calls a side: counted from the 20 ms first call, 2 samples a block
    assert a.samples >= 40 and b.samples >= 40, (a, b)
    assert a.best < 0.0015 and b.best < 0.0015


def test_shuffled_times_every_call_once_a_round():
    """The CPU A/B scripts' timing: each named call once a round, in a fresh order, at least
    ``min_rounds`` rounds; a call's times are its own."""
    from polymm.tools import timing

    calls = []
    clock = iter(range(1000)).__next__  # a clock that ticks once per reading
    times = timing.shuffled({n: (lambda n=n: calls.append(n)) for n in "abc"}, 0.0, min_rounds=5, clock=clock)
    assert {n: len(t) for n, t in times.items()} == {"a": 5, "b": 5, "c": 5} and all(
        sorted(calls[i : i + 3]) == ["a", "b", "c"] for i in range(0, 15, 3)
    )
    assert all(t == 1 for ts in times.values() for t in ts)
    calls.clear()
    timing.shuffled({"a": lambda: calls.append("a")}, 0.0, min_rounds=2, clock=clock, before=lambda: calls.append("-"))
    assert calls == ["-", "a", "-", "a"]
