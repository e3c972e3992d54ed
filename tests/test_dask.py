"""``polymm.matmul`` on Dask arrays, computed on a real cluster: two worker processes, separate memory.

Values are checked against the reference oracle; a counting backend registered
on the workers proves that every block product ran through ``polymm.matmul``
there (and none here, and not Dask's own matmul).  The cluster is module-scoped: each
pytest-xdist worker that runs tests of this module starts one (``--dist loadgroup`` would keep
them on one worker, but pytest-xdist 3.8 ignores ``xdist_group`` under pytest 9 here).
"""

from __future__ import annotations

import subprocess
import sys
import zlib

import numpy as np
import pytest

import polymm
from polymm.backend import CONTRACT_DTYPES
from polymm.testing.reference import assert_matches, random_array

da = pytest.importorskip("dask.array", reason="Dask is not installed (pip install 'polymm[dask]')")
distributed = pytest.importorskip("distributed")
polymm_dask = pytest.importorskip("polymm.dask")


def _install_counting_backend():
    """Register backend "counting" in this process: the cpu backend, counting its products and their shapes."""
    import os
    import sys

    import polymm
    from polymm.backend import Backend

    cpu = polymm.get_backend("cpu")

    class Counting(Backend):
        name = "counting"
        array_library = "numpy"
        algorithms = cpu.algorithms
        products: list = []

        def dtypes(self):
            return cpu.dtypes()

        def matmul(self, a, b, out, algorithm):
            precision = sys.modules.get("polymm.precision")  # the mode of this product, where modes exist
            mode = precision.current() if precision is not None else None
            Counting.products.append((tuple(a.shape), tuple(b.shape), algorithm, os.getpid(), mode))
            cpu.matmul(a, b, out, algorithm)

    polymm.register_backend("counting", Counting, replace=True)
    return os.getpid()


def _counted_products(clear=False):
    import polymm

    products = list(polymm.get_backend("counting").products)
    if clear:
        polymm.get_backend("counting").products.clear()
    return products


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=50
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(2, timeout=120)  # registered before the first task (a busy machine is slow)
        pids = client.run(_install_counting_backend)
        assert len(set(pids.values())) == 2, f"expected two worker processes, got {pids}"
        _install_counting_backend()  # the client checks backend names when it builds a graph
        yield client


@pytest.fixture
def counted(client):
    """The block products the workers ran during the test: ``counted()`` -> [(a shape, b shape, algorithm, pid, precision)]."""
    client.run(_counted_products, clear=True)
    _counted_products(clear=True)

    def products():
        assert _counted_products() == [], "a block product ran in the client process"
        return [p for per_worker in client.run(_counted_products).values() for p in per_worker]

    return products


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _dask(x, chunks):
    return da.from_array(x, chunks=chunks)


def _check(client, lazies, x1, x2, dtype=None):
    """The lazy results' metadata, then their values computed on the cluster (together), against the reference."""
    lazies = list(lazies) if isinstance(lazies, (list, tuple)) else [lazies]
    dtype = np.dtype(dtype) if dtype is not None else np.result_type(x1, x2)
    for lazy in lazies:
        assert isinstance(lazy, da.Array)
        assert lazy.dtype == dtype and type(lazy._meta) is np.ndarray
    results = client.gather(client.compute(lazies))
    for lazy, result in zip(lazies, results):
        assert type(result) is np.ndarray and (result.shape, result.dtype) == (lazy.shape, lazy.dtype)
        assert_matches(result, x1, x2, dtype)  # shape, dtype and values against the higher-precision reference
    return results


# -- values ---------------------------------------------------------------------------------------

#: (x1 shape, x1 chunks, x2 shape, x2 chunks): uneven blocks everywhere.
CASES = {
    "square": ((50, 50), (17, 20), (50, 50), (20, 13)),
    "skinny-tall": ((300, 7), (70, 7), (7, 5), (7, 5)),
    "skinny-deep-k": ((5, 900), (5, 200), (900, 4), (200, 3)),
    "wide": ((6, 40), (4, 15), (40, 250), (15, 60)),
    "batched": ((5, 20, 30), (2, 7, 11), (5, 30, 12), (3, 11, 5)),
    "broadcast": ((2, 1, 8, 9), (1, 1, 5, 4), (3, 9, 4), (2, 4, 3)),
    "broadcast-2d": ((4, 3, 10, 9), (3, 2, 4, 4), (9, 6), (5, 4)),
    "vector-matrix": ((30,), (11,), (30, 7), (11, 3)),
    "matrix-vector": ((7, 30), (3, 11), (30,), (11,)),
    "vector-vector": ((30,), (11,), (30,), (11,)),
    "vector-batched": ((9,), (4,), (3, 9, 5), (2, 4, 2)),
}


def _both_reductions(x1, c1, x2, c2, **options):
    a, b = _dask(x1, c1), _dask(x2, c2)
    return [polymm_dask.matmul(a, b, reduction=reduction, **options) for reduction in ("panel", "tree")]


@pytest.mark.parametrize("case", list(CASES))
def test_values_on_the_cluster(client, case, rng):
    s1, c1, s2, c2 = CASES[case]
    x1, x2 = random_array(rng, s1, "float64"), random_array(rng, s2, "float64")
    _check(client, _both_reductions(x1, c1, x2, c2) + [polymm.matmul(_dask(x1, c1), _dask(x2, c2))], x1, x2)


@pytest.mark.parametrize("dtype", [str(d) for d in CONTRACT_DTYPES])
def test_every_contract_dtype(client, dtype, rng):
    x1, x2 = random_array(rng, (9, 13), dtype), random_array(rng, (13, 6), dtype)
    _check(client, _both_reductions(x1, (4, 5), x2, (5, 4)), x1, x2)


def test_mixed_dtypes_promote_by_the_chunks_library(client, rng):
    x1, x2 = random_array(rng, (9, 13), "int16"), random_array(rng, (13, 6), "float32")
    _check(client, polymm.matmul(_dask(x1, (4, 5)), _dask(x2, (5, 4))), x1, x2, np.result_type(x1, x2))


def test_float16_accumulates_in_float32_across_k_blocks(client):
    # 4096 ones: a float16 running sum stops at 2048; the tree sums partial products in float32.
    x1, x2 = np.ones((2, 4096), np.float16), np.ones((4096, 3), np.float16)
    for reduction in ("panel", "tree"):
        lazy = polymm_dask.matmul(_dask(x1, (2, 512)), _dask(x2, (512, 3)), reduction=reduction)
        assert lazy.dtype == np.float16
        np.testing.assert_array_equal(client.compute(lazy).result(), np.full((2, 3), 4096, np.float16))


@pytest.mark.parametrize("schedule", ["tree", "split-k"])
def test_half_precision_partials_widen_onto_tf32(client, counted, rng, schedule):
    """Widened float16 partial products run in the "tf32" mode: TF32 reads float16 values exactly,
    so a GPU may take its tensor cores instead of float32 SIMT units, with the same sums."""
    x1, x2 = random_array(rng, (20, 64), "float16"), random_array(rng, (64, 12), "float16")
    lazy = polymm_dask.matmul(_dask(x1, (10, 16)), _dask(x2, (16, 12)), backend="counting", schedule=schedule)
    _check(client, lazy, x1, x2)
    products = counted()
    assert products and {mode for *_, mode in products} == {"tf32"}, products
    client.run(_counted_products, clear=True)
    panel = polymm_dask.matmul(_dask(x1, (10, 64)), _dask(x2, (64, 12)), backend="counting", reduction="panel")
    _check(client, panel, x1, x2)  # whole K in one float16 product: its own mode
    assert {mode for *_, mode in counted()} == {"default"}


def test_integer_products_wrap_across_k_blocks(client):
    x1, x2 = np.full((5, 300), 127, np.int8), np.full((300, 4), 127, np.int8)
    lazy = polymm_dask.matmul(_dask(x1, (5, 70)), _dask(x2, (70, 4)), reduction="tree")
    np.testing.assert_array_equal(client.compute(lazy).result(), np.matmul(x1, x2))


@pytest.mark.parametrize("reduction", ["panel", "tree"])
def test_different_k_chunks_are_rechunked_to_one(client, reduction, rng):
    x1, x2 = random_array(rng, (12, 40), "float32"), random_array(rng, (40, 9), "float32")
    a, b = _dask(x1, ((12,), (3, 7, 10, 20))), _dask(x2, ((25, 15), (9,)))
    lazy = polymm_dask.matmul(a, b, reduction=reduction)
    _check(client, lazy, x1, x2)
    # the operand with more K blocks takes the other's K chunks (fewer, larger products)
    x1c, x2c = polymm_dask._common_k_chunks(a, b)
    assert x1c.chunks[1] == x2c.chunks[0] == (25, 15)


def test_a_numpy_operand_is_wrapped_along_the_dask_operands_k_chunks(client, rng):
    x1, x2 = random_array(rng, (3, 10, 40), "float64"), random_array(rng, (40, 9), "float64")
    a = _dask(x1, (2, 5, 15))
    lazy = polymm.matmul(a, x2)
    _check(client, lazy, x1, x2)
    _check(client, polymm.matmul(x2.T.copy(), a.transpose(0, 2, 1)), x2.T.copy(), x1.transpose(0, 2, 1))
    wrapped = polymm_dask._operands(a, x2)[1]
    assert wrapped.chunks == ((15, 15, 10), (9,))


def test_empty_dimensions(client, rng):
    for s1, s2 in (((0, 5), (5, 3)), ((4, 0), (0, 3)), ((2, 0, 5, 6), (1, 6, 3))):
        x1, x2 = random_array(rng, s1, "float32"), random_array(rng, s2, "float32")
        _check(client, polymm.matmul(_dask(x1, 2), _dask(x2, 2)), x1, x2)


# -- where and how the block products ran ----------------------------------------------------------


@pytest.mark.parametrize("reduction,expected", [("panel", 3 * 2), ("tree", 3 * 2 * 4)])
def test_block_products_run_through_polymm_on_the_workers(client, counted, reduction, expected, rng):
    x1, x2 = random_array(rng, (30, 40), "float32"), random_array(rng, (40, 20), "float32")
    # 3 x 2 output blocks, 4 K blocks
    lazy = polymm_dask.matmul(_dask(x1, (10, 10)), _dask(x2, (10, 10)), backend="counting", reduction=reduction)
    assert counted() == [], "building the graph computed something"
    _check(client, lazy, x1, x2)
    products = counted()
    assert len(products) == expected, products
    k = 40 if reduction == "panel" else 10
    assert all(a == (1, 10, k) and b == (1, k, 10) for a, b, *_ in products), products
    worker_pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert {pid for _, _, _, pid, _ in products} <= worker_pids


def test_algorithm_and_scoped_backend_are_carried_into_the_graph(client, counted, rng):
    x1, x2 = random_array(rng, (30, 40), "float32"), random_array(rng, (40, 20), "float32")
    with polymm.use_backend("counting"):
        lazy = polymm.matmul(_dask(x1, (10, 40)), _dask(x2, (40, 10)), algorithm="naive")
    _check(client, lazy, x1, x2)  # computed outside the scope, on processes that never saw it
    products = counted()
    assert len(products) == 3 * 2 and {algorithm for _, _, algorithm, *_ in products} == {"naive"}


def test_precision_is_carried_into_the_graph(client, counted, rng):
    if not hasattr(polymm, "use_precision"):
        pytest.skip("this polymm has no precision modes (precision=, use_precision) yet")
    x1, x2 = random_array(rng, (30, 40), "float32"), random_array(rng, (40, 20), "float32")
    a, b = _dask(x1, (10, 40)), _dask(x2, (40, 10))
    with polymm.use_precision("tf32"):
        scoped = polymm.matmul(a, b, backend="counting")
    given = polymm.matmul(a, b, backend="counting", algorithm="naive", precision="tf32")  # (another graph)
    client.gather(client.compute([scoped, given]))  # values: the precision suite's business
    products = counted()
    assert len(products) == 2 * 3 * 2 and {mode for *_, mode in products} == {"tf32"}, products


def test_graph_calls_polymm_not_dasks_matmul(rng):
    x1, x2 = random_array(rng, (30, 40), "float32"), random_array(rng, (40, 20), "float32")
    for reduction, function, expected in (
        ("panel", polymm_dask._panel_product, 3 * 2),
        ("tree", polymm_dask._block_product, 3 * 2 * 4),
    ):
        graph = polymm_dask.matmul(_dask(x1, 10), _dask(x2, 10), reduction=reduction).__dask_graph__()
        tasks = [task for layer in graph.layers.values() for task in dict(layer).values()]
        functions = [getattr(task, "func", None) for task in tasks]
        names = {getattr(getattr(f, "func", f), "__name__", repr(f)) for f in functions}
        assert functions.count(function) == expected, names
        assert not {name for name in names if "matmul" in name or "dot" in name}, names


# -- choices and errors, at graph-build time ------------------------------------------------------


def test_auto_reduction_is_chosen_by_panel_size():
    a, b = da.ones((4000, 4000), chunks=1000, dtype="float32"), da.ones((4000, 4000), chunks=1000, dtype="float32")
    # one output block needs a 1000 x 4000 panel of each operand: 32 MB
    assert polymm_dask.matmul(a, b, panel_limit="64MB").name.startswith("polymm-matmul-panel")
    assert not polymm_dask.matmul(a, b, panel_limit="16MB").name.startswith("polymm-matmul-panel")
    one_k_block = da.ones((4000, 4000), chunks=(1000, 4000), dtype="float32")
    assert polymm_dask.matmul(one_k_block, b.rechunk((4000, 1000)), panel_limit=1).name.startswith(
        "polymm-matmul-panel"
    )
    with pytest.raises(ValueError, match="'sideways'.*auto, panel, tree"):
        polymm_dask.matmul(a, b, reduction="sideways")


def test_errors_name_what_was_wrong():
    a = da.ones((3, 4), chunks=2)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\)"):
        polymm.matmul(a, da.ones((5, 2), chunks=2))
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\).*broadcast"):
        polymm.matmul(da.ones((2, 3, 4)), da.ones((3, 4, 5)))
    with pytest.raises(TypeError, match="out=.*immutable"):
        polymm.matmul(a, a.T, out=np.empty((3, 3)))
    with pytest.raises(TypeError, match="different array libraries.*array_api_strict"):
        polymm.matmul(a, pytest.importorskip("array_api_strict").ones((4, 2)))
    with pytest.raises(TypeError, match="x2 must be an array.*list"):
        polymm.matmul(a, [[1.0]] * 4)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        polymm.matmul(a[a[:, 0] > 0], a.T)
    with pytest.raises(ValueError, match="no-such-kernel.*'naive'"):
        polymm.matmul(a, a.T, backend="cpu", algorithm="no-such-kernel")
    with pytest.raises(TypeError, match="unexpected keyword.*algoritm.*algorithm, backend"):
        polymm_dask.matmul(a, a.T, algoritm="tiled")
    with pytest.raises(TypeError, match="at least one operand must be a dask"):
        polymm_dask.matmul(np.ones((2, 2)), np.ones((2, 2)))


def test_import_polymm_does_not_import_dask():
    code = (
        "import sys, numpy as np, polymm; polymm.matmul(np.ones((2, 3, 4)), np.ones(4)); "
        "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')], 'dask imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("reduction", ["panel", "tree"])
def test_cupy_chunks_give_cupy_chunks(reduction, rng):
    """On a GPU machine: CuPy chunks in, a Dask array of CuPy chunks out, computed on ``cuda`` (threaded scheduler)."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (no NVIDIA GPU here)")
    if not any(info.name == "cuda" and info.available for info in polymm.backends()):
        pytest.skip("the cuda backend is not available here")
    for s1, c1, s2, c2, dtype in (
        ((300, 200), (128, 70), (200, 150), (70, 64), "float32"),
        ((3, 40, 50), (2, 17, 20), (50,), (20,), "float16"),
        ((50,), (20,), (50, 7), (30, 7), "int8"),
        ((30, 50), (16, 20), (50, 9), (20, 4), "complex64"),
    ):
        x1, x2 = random_array(rng, s1, dtype), random_array(rng, s2, dtype)
        a, b = da.from_array(cupy.asarray(x1), chunks=c1), da.from_array(cupy.asarray(x2), chunks=c2)
        lazy = polymm_dask.matmul(a, b, reduction=reduction)
        assert type(lazy._meta) is cupy.ndarray and lazy.dtype == np.dtype(dtype)
        result = lazy.compute(scheduler="threads")
        assert type(result) is cupy.ndarray
        assert_matches(cupy.asnumpy(result), x1, x2)
        wrapped = polymm.matmul(a, cupy.asarray(x2)).compute(scheduler="threads")  # a CuPy array beside them
        assert_matches(cupy.asnumpy(wrapped), x1, x2)


def test_a_gpu_worker_queues_at_most_gpu_queue_block_products(monkeypatch):
    """Each CuPy block task records an event; past ``polymm.gpu-queue`` of them the oldest is waited for."""
    import types

    import dask

    waited, recorded = [], []

    class Event:
        def __init__(self, n):
            self.n = n

        def synchronize(self):
            waited.append(self.n)

    class Stream:
        def record(self):
            recorded.append(Event(len(recorded)))
            return recorded[-1]

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(get_current_stream=Stream, Device=lambda: types.SimpleNamespace(id=0))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(polymm_dask, "_IN_FLIGHT", {})
    block = type("ndarray", (), {"__module__": "cupy"})()

    for _ in range(5):
        assert polymm_dask._on_gpu((2, "default"), block, lambda: block) is block
    assert waited == [0, 1, 2]  # oldest first; the last two products stay queued
    assert polymm_dask._on_gpu((2, "default"), np.ones(2), lambda: 7) == 7 and len(recorded) == 5  # NumPy: as is
    polymm_dask._on_gpu((0, "default"), block, lambda: block)
    assert len(recorded) == 5  # 0: no bound, nothing recorded

    with dask.config.set({"polymm.gpu-queue": 1, "polymm.gpu-stream": "private"}):
        assert polymm_dask._gpu_settings() == (1, "private")
    for bad in (-1, 1.5, "2", True):
        with dask.config.set({"polymm.gpu-queue": bad}), pytest.raises(ValueError, match="gpu-queue.*whole number"):
            polymm_dask._gpu_settings()
    with dask.config.set({"polymm.gpu-stream": "mine"}), pytest.raises(ValueError, match="gpu-stream 'mine'"):
        polymm_dask._gpu_settings()
