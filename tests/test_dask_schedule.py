"""The Dask schedule chooser (:mod:`polymm.dask_schedule`) on synthetic placements, ``polymm.dask.explain``,
and every schedule's values and bytes moved on a real 2-process ``LocalCluster``."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from polymm.testing.reference import assert_matches, random_array

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array", reason="Dask is not installed (pip install 'polymm[dask]')")
distributed = pytest.importorskip("distributed")
polymm_dask = pytest.importorskip("polymm.dask")
from polymm import dask_schedule as ds  # noqa: E402

W = ("w0", "w1")


def _blocks(nm, nk, nn, edge=100, itemsize=4):
    return ds.Blocks((edge,) * nm, (edge,) * nk, (edge,) * nn, itemsize, itemsize, itemsize)


def _place(counts, where):
    """{(r, c): frozenset({worker})} for every block of a ``counts`` grid, ``where(r, c)`` naming the worker."""
    return {(r, c): frozenset({where(r, c)}) for r in range(counts[0]) for c in range(counts[1])}


BLOCK = 100 * 100 * 4  # bytes of one 100 x 100 float32 block


# -- the chooser on synthetic placements --------------------------------------------------------------


def test_a_small_x2_is_broadcast_once_per_worker():
    # x1: 8 row blocks, rows 0-3 on w0 and 4-7 on w1; x2 a single block on w0
    blocks = _blocks(8, 1, 1)
    h1 = _place((8, 1), lambda i, k: W[i // 4])
    h2 = {(0, 0): frozenset({"w0"})}
    plan = ds.choose(blocks, W, h1, h2)
    assert plan.schedule == "broadcast"
    assert plan.bytes_moved == BLOCK  # x2 travels once, to w1; x1 never moves
    assert all(plan.assignment[i, 0] == W[i // 4] for i in range(8))
    assert plan.loads == {"w0": blocks.total_flops // 2, "w1": blocks.total_flops // 2}


def test_deep_k_split_where_its_blocks_live_moves_only_a_partial_product():
    blocks = _blocks(1, 8, 1)
    h1 = _place((1, 8), lambda i, k: W[k // 4])
    h2 = _place((8, 1), lambda k, j: W[k // 4])
    plan = ds.choose(blocks, W, h1, h2)
    assert plan.schedule == "split-k"
    assert plan.groups == {"w0": (0, 1, 2, 3), "w1": (4, 5, 6, 7)}
    assert plan.bytes_moved == BLOCK  # one partial C block travels to the sum
    assert plan.candidates["broadcast"] == 8 * BLOCK  # the whole-K panel: half of both operands
    assert plan.candidates["grid"].startswith("not considered")


def test_squares_on_a_2d_layout_get_the_grid():
    # 4 workers as a 2 x 2 grid; A[i, k] on worker (i // 2, k // 2), B[k, j] on worker (k // 2, j // 2)
    workers = ("a", "b", "c", "d")
    blocks = _blocks(4, 4, 4)
    h1 = _place((4, 4), lambda i, k: workers[2 * (i // 2) + k // 2])
    h2 = _place((4, 4), lambda k, j: workers[2 * (k // 2) + j // 2])
    plan = ds.choose(blocks, workers, h1, h2)
    assert plan.schedule == "grid" and plan.grid == (2, 2)
    # each worker lacks 4 of the 8 A blocks of its rows and 4 of the 8 B blocks of its columns
    assert plan.bytes_moved == 4 * 8 * BLOCK
    assert plan.candidates["broadcast"] > plan.bytes_moved
    assert set(plan.loads.values()) == {blocks.total_flops // 4}


def test_unbalanced_placements_are_not_taken():
    # everything on w0: following the data would leave w1 idle
    blocks = _blocks(4, 2, 4)
    h1 = _place((4, 2), lambda i, k: "w0")
    h2 = _place((2, 4), lambda k, j: "w0")
    plan = ds.choose(blocks, W, h1, h2)
    assert plan.schedule == "grid" and max(plan.loads.values()) == blocks.total_flops // 2
    assert "not balanced" in plan.candidates["broadcast"] and "100%" in plan.candidates["broadcast"]
    assert plan.candidates["split-k"] > plan.bytes_moved  # split-k evened out: half of K moves, and partials


def test_split_k_moves_the_fewest_k_blocks_that_even_the_flops_out():
    """A persist that left three of four K blocks on w0: following the data alone would give w0 75%
    of the flops; split-k instead moves the one K block (of A's column and B's row) that evens them.
    With whole-K panels over panel_limit it is the plan (the streamed grid moves as many bytes in
    more, smaller tasks), not Dask's tree."""
    blocks = _blocks(4, 4, 4)
    h1 = _place((4, 4), lambda i, k: "w0" if k < 3 else "w1")
    h2 = _place((4, 4), lambda k, j: "w0" if k < 3 else "w1")
    plan = ds.choose(blocks, W, h1, h2, panel_fits=False)
    assert plan.schedule == "split-k" and "flops stay even" in plan.reason
    assert plan.candidates["grid"] == plan.bytes_moved
    assert sorted(len(ks) for ks in plan.groups.values()) == [2, 2]
    assert set(plan.loads.values()) == {blocks.total_flops // 2}
    assert plan.groups == {"w0": (0, 1), "w1": (2, 3)}
    # K block 2 of A (4 blocks) and of B (4 blocks) to w1; each of the 16 output blocks' other partial
    assert plan.bytes_moved == 8 * BLOCK + 16 * BLOCK


def test_panels_over_the_limit_stream_k_or_leave_split_k():
    blocks = _blocks(1, 8, 1)
    h1 = _place((1, 8), lambda i, k: W[k // 4])
    h2 = _place((8, 1), lambda k, j: W[k // 4])
    assert ds.choose(blocks, W, h1, h2, panel_fits=False).schedule == "split-k"
    blocks = _blocks(4, 4, 4)  # squares on a 2-D layout: the grid, its K panels streamed a block at a time
    h1 = _place((4, 4), lambda i, k: W[i // 2])
    h2 = _place((4, 4), lambda k, j: W[j // 2])
    within, over = (ds.choose(blocks, W, h1, h2, panel_fits=fits) for fits in (True, False))
    assert not within.streamed and over.streamed and "streamed" in over.reason
    assert (over.schedule, over.assignment, over.bytes_moved) == (
        within.schedule,
        within.assignment,
        within.bytes_moved,
    )


def test_unplaced_blocks_count_as_moved_to_every_reader():
    blocks = _blocks(4, 1, 1)
    h1 = _place((4, 1), lambda i, k: W[i // 2])
    plan = ds.choose(blocks, W, h1, {})  # x2 held by nobody yet (a NumPy array in the graph)
    assert plan.schedule == "broadcast" and plan.bytes_moved == 2 * BLOCK


def test_the_cost_model_counts_each_missing_block_once_per_worker():
    blocks = _blocks(2, 2, 2)
    h1 = _place((2, 2), lambda i, k: "w0")
    h2 = _place((2, 2), lambda k, j: "w1")
    everything_on_w0 = {(i, j): "w0" for i in range(2) for j in range(2)}
    moved, loads = ds.cost_assignment(blocks, everything_on_w0, h1, h2)
    assert moved == 4 * BLOCK and loads == {"w0": blocks.total_flops}  # all of B, fetched once
    split = {(i, j): W[j] for i in range(2) for j in range(2)}
    assert ds.cost_assignment(blocks, split, h1, h2)[0] == 4 * BLOCK + 2 * BLOCK  # A to w1; B's column 0 to w0
    groups, finals = {"w0": (0,), "w1": (1,)}, {(i, j): "w0" for i in range(2) for j in range(2)}
    moved, loads = ds.cost_split_k(blocks, groups, finals, h1, h2)
    # w0 fetches B's K row 0, w1 fetches A's K column 1, four partials travel from w1 to w0
    assert moved == 2 * BLOCK + 2 * BLOCK + 4 * BLOCK and loads["w0"] == loads["w1"]


def test_choose_needs_workers():
    with pytest.raises(ValueError, match="zero workers"):
        ds.choose(_blocks(1, 1, 1), (), {}, {})


# -- explain ---------------------------------------------------------------------------------------


def test_explain_without_a_client_says_nothing_moves():
    a, b = da.ones((400, 300), chunks=100), da.ones((300, 200), chunks=100)
    plan = polymm_dask.explain(a, b)
    text = str(plan)
    assert plan.schedule == "panel" and plan.bytes_moved == 0
    assert "(400, 300) @ (300, 200)" in text and "4 x 2 output blocks, 3 along K" in text
    assert "nothing moves" in text and "moves     0 bytes" in text
    assert polymm_dask.explain(a, b, panel_limit=1).schedule == "tree"


def test_explain_on_a_synthetic_cluster():
    a, b = da.ones((800, 100), chunks=100, dtype="float32"), da.ones((100, 100), chunks=100, dtype="float32")
    placement = {"x1": {(i, 0): W[i // 4] for i in range(8)}, "x2": {(0, 0): "w1"}}
    plan = polymm_dask.explain(a, b, workers=W, placement=placement)
    text = str(plan)
    assert plan.schedule == "broadcast" and plan.bytes_moved == BLOCK
    for line in ("workers   2 (w0, w1)", "placement given: x1, x2", "schedule  broadcast", "moves     40 kB (40000"):
        assert line in text, text
    assert "* broadcast" in text and "w0: 50%, w1: 50%" in text
    forced = polymm_dask.explain(a, b, workers=W, placement=placement, schedule="grid")
    assert forced.schedule == "grid" and forced.reason.startswith("asked for") and forced.bytes_moved >= BLOCK


def test_explain_names_a_rechunk_and_says_when_it_is_free():
    a = da.ones((100, 400), chunks=(100, 100))
    b = da.ones((400, 50), chunks=(200, 50))  # a's K chunks split b's: b is split, nothing moves
    assert "split to x1's (2 -> 4; nothing moves)" in str(polymm_dask.explain(a, b))
    c = da.ones((400, 50), chunks=((150, 250), (50,)))
    assert "rechunked along K" in str(polymm_dask.explain(a, c))


def test_errors_speak():
    a, b = da.ones((40, 30), chunks=10), da.ones((30, 20), chunks=10)
    with pytest.raises(ValueError, match="unknown schedule 'sideways'.*auto, panel, tree, broadcast, grid, split-k"):
        polymm_dask.matmul(a, b, schedule="sideways")
    with pytest.raises(ValueError, match="schedule='grid' and reduction='tree' disagree"):
        polymm_dask.matmul(a, b, schedule="grid", reduction="tree")
    with pytest.raises(ValueError, match="unknown reduction 'grid'.*or schedule="):
        polymm_dask.matmul(a, b, reduction="grid")
    with pytest.raises(ValueError, match=r"'broadcast' is for 2-D operands.*\(2, 40, 30\)"):
        polymm_dask.matmul(da.ones((2, 40, 30), chunks=10), b, schedule="broadcast")
    with pytest.raises(ValueError, match="not in workers=.*'w0', 'w1'"):
        polymm_dask.explain(a, b, workers=W, placement={"x1": {(0, 0): "w9"}})
    with pytest.raises(ValueError, match=r"placement of x2 names block\(s\) \[\(5, 0\)\] outside its 3 x 2 blocks"):
        polymm_dask.explain(a, b, workers=W, placement={"x2": {(5, 0): "w0"}})
    one_k = da.ones((40, 30), chunks=(10, 30))
    with pytest.raises(ValueError, match="'split-k' needs K in at least two blocks"):
        polymm_dask.explain(one_k, da.ones((30, 20), chunks=(30, 10)), workers=W, placement={}, schedule="split-k")


# -- on a cluster: values, placement and bytes moved ------------------------------------------------


@pytest.fixture(scope="module")
def client():
    # no work stealing: with loose pins (the default) Dask may move a pinned task to a worker that falls
    # behind, and a test of the estimate's exactness would then depend on the machine's load
    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=50
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        # the client's view of the scheduler (scheduler_info) may predate the workers' registration
        # on a busy machine: a full test run once saw "the cluster has 0 worker(s)" here
        client.wait_for_workers(2, timeout=120)
        yield client


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _persisted(client, x, chunks, layout):
    """``x`` as a Dask array persisted block by block on the worker ``layout(index, counts)`` names."""
    from dask.highlevelgraph import HighLevelGraph

    workers = sorted(client.nthreads())
    assert len(workers) == 2, f"the cluster has {len(workers)} worker(s): {workers}"
    chunks = da.core.normalize_chunks(chunks, x.shape)
    counts = tuple(len(c) for c in chunks)
    name = f"operand-{zlib.crc32(x.tobytes())}-{x.dtype}-{layout.__name__}"
    starts = [np.cumsum((0,) + c[:-1]) for c in chunks]
    graph = {}
    for i, r in enumerate(chunks[0]):
        for j, c in enumerate(chunks[1]):
            block = x[starts[0][i] : starts[0][i] + r, starts[1][j] : starts[1][j] + c]
            graph[(name, i, j)] = client.submit(
                _given, block, key=(name, i, j), workers=[workers[layout((i, j), counts)]], pure=False
            )
    distributed.wait(list(graph.values()))
    return da.Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name, chunks, meta=x[:0, :0])


def _given(block):
    return block


def rows(index, counts):
    """Row-major runs, one per worker (2 workers)."""
    return (index[0] * counts[1] + index[1]) * 2 // (counts[0] * counts[1])


def _received(dask_worker) -> int:
    return sum(entry.get("total", 0) for entry in dask_worker.transfer_incoming_log)


#: (x1 shape, x1 chunks, x2 shape, x2 chunks): a square, tall x square, deep K, a small x2
SHAPES = {
    "square": ((60, 60), 30, (60, 60), 30),
    "tall": ((160, 40), (20, 20), (40, 40), 20),
    "deep-k": ((20, 400), (20, 50), (400, 10), (50, 10)),
    "small-x2": ((160, 30), (20, 30), (30, 6), (30, 6)),
    "x2-split-along-k": ((80, 40), (20, 20), (40, 10), (40, 10)),
}


@pytest.mark.parametrize("case", list(SHAPES))
@pytest.mark.parametrize("schedule", ds.SCHEDULES)
def test_every_schedule_gives_numpys_values(client, case, schedule, rng):
    s1, c1, s2, c2 = SHAPES[case]
    x1, x2 = random_array(rng, s1, "float64"), random_array(rng, s2, "float64")
    a, b = _persisted(client, x1, c1, rows), _persisted(client, x2, c2, rows)
    if schedule == "split-k" and len(a.chunks[1]) < 2:
        with pytest.raises(ValueError, match="split-k"):
            polymm_dask.matmul(a, b, schedule=schedule)
        return
    if schedule == "grid" and len(a.chunks[0]) * len(b.chunks[1]) < 2:
        with pytest.raises(ValueError, match="'grid' does not apply"):
            polymm_dask.matmul(a, b, schedule=schedule)
        return
    lazy = polymm_dask.matmul(a, b, schedule=schedule)
    result = client.compute(lazy).result()
    assert type(result) is np.ndarray and result.shape == lazy.shape
    assert_matches(result, x1, x2)
    np.testing.assert_allclose(result, x1 @ x2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "int8", "complex64", "float32"])
def test_split_k_accumulates_like_one_product(client, dtype, rng):
    if dtype == "float16":  # 4096 ones: a float16 running sum stops at 2048; the partials are summed in float32
        x1, x2 = np.ones((2, 4096), np.float16), np.ones((4096, 3), np.float16)
    elif dtype == "int8":  # wraps like NumPy's
        x1, x2 = np.full((5, 300), 127, np.int8), np.full((300, 4), 127, np.int8)
    else:
        x1, x2 = random_array(rng, (6, 200), dtype), random_array(rng, (200, 5), dtype)
    k = x1.shape[1] // 4
    a, b = _persisted(client, x1, (x1.shape[0], k), rows), _persisted(client, x2, (k, x2.shape[1]), rows)
    lazy = polymm_dask.matmul(a, b, schedule="split-k")
    assert lazy.dtype == x1.dtype and lazy.name.startswith("polymm-matmul-split-k")
    result = client.compute(lazy).result()
    if dtype in ("float16", "int8"):
        np.testing.assert_array_equal(result, np.matmul(x1, x2) if dtype == "int8" else np.full((2, 3), 4096, "f2"))
    else:
        assert_matches(result, x1, x2)


@pytest.mark.parametrize("case", list(SHAPES))
def test_auto_moves_what_explain_says(client, case, rng):
    s1, c1, s2, c2 = SHAPES[case]
    x1, x2 = random_array(rng, s1, "float32"), random_array(rng, s2, "float32")
    a, b = _persisted(client, x1, c1, rows), _persisted(client, x2, c2, rows)
    plan = polymm_dask.explain(a, b)
    assert plan.schedule in ds.PINNED and "x1 persisted, x2 persisted" in plan.placement
    lazy = polymm_dask.matmul(a, b)
    assert lazy.name.startswith(f"polymm-matmul-{plan.schedule}")
    before = sum(client.run(_received).values())
    result = lazy.persist()
    distributed.wait(result)
    moved = sum(client.run(_received).values()) - before
    assert moved == plan.bytes_moved, (moved, str(plan))
    if plan.assignment is not None:  # the pinned tasks ran where the plan put them
        where = {key[1:]: holders[0] for key, holders in client.who_has(result).items()}
        assert where == plan.assignment
    assert_matches(result.compute(), x1, x2)
    del result


def test_a_streamed_schedule_sums_k_where_it_pins_and_moves_what_explain_says(client, rng):
    """Whole K panels over panel_limit: the square's pinned schedule streams K into each output
    block (one task per K block, none holding a panel), runs where the plan pins, moves the bytes
    explain says and gives NumPy's values, for float32 and for float16 (summed in float32)."""
    for dtype in ("float32", "float16"):
        x1, x2 = random_array(rng, (60, 90), dtype), random_array(rng, (90, 60), dtype)
        a, b = _persisted(client, x1, 30, rows), _persisted(client, x2, 30, rows)
        plan = polymm_dask.explain(a, b, panel_limit=1)
        assert plan.schedule in ("broadcast", "grid") and plan.streamed, str(plan)
        lazy = polymm_dask.matmul(a, b, panel_limit=1)
        steps = [name for name in lazy.dask.layers if "-step-" in name]
        assert len(steps) == 1 and len(lazy.dask.layers[steps[0]]) == 2 * 2 * 3  # (i, j, k)
        before = sum(client.run(_received).values())
        result = lazy.persist()
        distributed.wait(result)
        assert sum(client.run(_received).values()) - before == plan.bytes_moved, str(plan)
        where = {key[1:]: holders[0] for key, holders in client.who_has(result).items()}
        assert where == plan.assignment
        got = result.compute()
        assert got.dtype == x1.dtype
        assert_matches(got, x1, x2)
        del result


def test_the_expected_schedules_on_a_row_layout(client, rng):
    chosen = {}
    for case, (s1, c1, s2, c2) in SHAPES.items():
        x1, x2 = random_array(rng, s1, "float32"), random_array(rng, s2, "float32")
        chosen[case] = polymm_dask.explain(_persisted(client, x1, c1, rows), _persisted(client, x2, c2, rows)).schedule
    assert chosen["deep-k"] == "split-k" and chosen["small-x2"] == "broadcast"


def test_operands_not_persisted_are_placed_by_dask(client):
    a, b = da.ones((60, 60), chunks=30), da.ones((60, 60), chunks=30)
    plan = polymm_dask.explain(a, b)
    assert plan.schedule == "panel" and "not persisted" in plan.placement and "Dask places" in plan.reason
    assert isinstance(plan.bytes_moved, int)
    np.testing.assert_allclose(client.compute(polymm_dask.matmul(a, b)).result(), np.full((60, 60), 60.0))


def test_a_split_operand_keeps_the_placement_of_the_blocks_it_is_cut_from():
    # x1's K chunks (100, 100) split x2's single K block: x2's pieces stay on w1, where x2 lives
    a = da.ones((200, 200), chunks=(100, 100), dtype="float32")
    b = da.ones((200, 100), chunks=(200, 100), dtype="float32")
    placement = {"x1": {(0, 0): "w0", (0, 1): "w0", (1, 0): "w1", (1, 1): "w1"}, "x2": {(0, 0): "w1"}}
    plan = polymm_dask.explain(a, b, workers=W, placement=placement)
    assert "split to x1's (1 -> 2; nothing moves)" in plan.rechunk
    assert plan.schedule == "broadcast" and plan.bytes_moved == 2 * BLOCK  # x2 (two pieces) once, to w0
    assert polymm_dask._after_rechunk({(0, 0): "w1"}, (200,), (100, 100), axis=0) == {(0, 0): "w1", (1, 0): "w1"}
    assert polymm_dask._after_rechunk({(0, 0): "w", (0, 1): "v"}, (50, 50), (100,), axis=1) == {}  # merged: nobody


def test_unplaced_deep_k_takes_the_tree():
    a = da.ones((100, 800), chunks=(100, 100), dtype="float32")
    b = da.ones((800, 100), chunks=(100, 100), dtype="float32")
    plan = polymm_dask.explain(a, b, workers=W, placement={})
    assert plan.schedule == "tree" and "not placed yet" in plan.reason
    assert plan.candidates["tree"] < plan.candidates["panel"]


def test_polymm_explain_command_on_dask_chunks():
    import subprocess
    import sys

    def run(*argv):
        done = subprocess.run(
            [sys.executable, "-m", "polymm.tools.cli", "explain", *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    out = run("4096x512", "512x128", "--chunks", "512")
    assert "schedule  broadcast" in out and "moves     262 kB (262144 bytes)" in out and "worker-1" in out
    out = run("8192x8192", "8192x8192", "--chunks", "2048", "--workers", "4")
    assert "schedule  grid" in out and "grid      2 x 2 workers" in out
    out = run("1024x8192", "8192x1024", "--chunks", "1024x1024", "--chunks2", "1024x1024", "--schedule", "split-k")
    assert "schedule  split-k: asked for" in out
    assert "schedule  tree" in run(
        "1024x65536", "65536x1024", "--chunks", "1024x8192", "--chunks2", "8192x1024", "--layout", "none"
    )


def test_a_grid_that_cannot_be_laid_out_says_so():
    a, b = da.ones((10, 400), chunks=(10, 100)), da.ones((400, 10), chunks=(100, 10))
    with pytest.raises(ValueError, match=r"'grid' does not apply to \(10, 400\) @ \(400, 10\) in 1 x 1 output blocks"):
        polymm_dask.explain(a, b, workers=W, placement={}, schedule="grid")
    assert polymm_dask.explain(a, b, workers=W, placement={}, schedule="split-k").schedule == "split-k"


def test_strict_pins_and_bad_pin_names(client, rng):
    x1, x2 = random_array(rng, (80, 40), "float32"), random_array(rng, (40, 40), "float32")
    a, b = _persisted(client, x1, (20, 20), rows), _persisted(client, x2, 20, rows)
    with dask.config.set({"polymm.pin": "strict"}):
        lazy = polymm_dask.matmul(a, b)
    assert {v for v in lazy.__dask_graph__().layers[lazy.name].annotations.values() if isinstance(v, bool)} == {False}
    assert_matches(client.compute(lazy).result(), x1, x2)
    with dask.config.set({"polymm.pin": "sideways"}), pytest.raises(ValueError, match="polymm.pin 'sideways'.*loose"):
        polymm_dask.matmul(a, b)
