"""Correctness of every CPU kernel against an exact or higher-precision NumPy reference.

Covers every contract dtype, every algorithm and every code path the
dispatcher picks (tiny serial loop, packed serial, batch-parallel,
block-parallel), odd sizes, strided / transposed / negative-stride /
broadcast (stride-0) / unaligned / byte-swapped operands, and a poisoned
output.  Small blockings are patched in to reach every edge of the packed
kernel cheaply.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from polymm.backend import CONTRACT_DTYPES, optional_dtypes
from polymm.testing import assert_matches
from polymm_numba import CPUBackend, params

ALGORITHMS = ("naive", "tiled", "auto")

# (B, M, K, N): tiny, serial, batch-parallel, block-parallel, multi-kc.
SHAPES = [
    (1, 1, 1, 1),
    (2, 1, 17, 1),
    (3, 17, 33, 65),
    (6, 65, 33, 127),
    (1, 127, 257, 300),
    (2, 300, 1, 257),
    (1, 33, 1100, 17),
    (5000, 3, 4, 5),
]


@pytest.fixture(scope="module")
def backend():
    return CPUBackend()


def _random(rng, dt, shape):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.3
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    x = rng.uniform(-2, 2, shape)
    if dt.kind == "c":
        x = x + 1j * rng.uniform(-2, 2, shape)
    return x.astype(dt)


def _poison(dt, shape):
    out = np.empty(shape, dt)
    out.view(np.uint8)[...] = 0xA5
    return out


def _operands(rng, dt, shape, layout):
    """a (B,M,K), b (B,K,N) of dtype ``dt`` laid out as ``layout`` says."""
    B, M, K, N = shape
    if layout == "C":
        return _random(rng, dt, (B, M, K)), _random(rng, dt, (B, K, N))
    if layout == "T":  # each matrix Fortran-ordered
        a = _random(rng, dt, (B, K, M)).transpose(0, 2, 1)
        b = _random(rng, dt, (B, N, K)).transpose(0, 2, 1)
        return a, b
    if layout == "neg":  # negative and non-unit strides everywhere
        a = _random(rng, dt, (B, 2 * M, 3 * K))[::-1, ::-2, ::-3]
        b = _random(rng, dt, (B, 3 * K, 2 * N))[::-1, ::-3, ::-2]
        return a, b
    if layout == "bcast":  # stride-0 batch (read-only views)
        a = np.broadcast_to(_random(rng, dt, (1, M, K)), (B, M, K))
        b = _random(rng, dt, (B, K, N))[:, :, ::-1]
        return a, b
    if layout == "unaligned":  # data pointer not a multiple of the itemsize
        x = _random(rng, dt, (B, M, K))
        buf = np.zeros(x.nbytes + 1, np.uint8)
        a = buf[1:].view(dt).reshape(x.shape)
        a[...] = x
        return a, _random(rng, dt, (B, K, N))
    raise ValueError(layout)


@pytest.mark.parametrize("dt", CONTRACT_DTYPES, ids=str)
def test_all_shapes_all_algorithms(backend, dt):
    rng = np.random.default_rng(1234)
    for shape in SHAPES:
        a, b = _operands(rng, dt, shape, "C")
        for alg in ALGORITHMS:
            out = _poison(dt, (shape[0], shape[1], shape[3]))
            backend.matmul(a, b, out, alg)
            assert_matches(out, a, b)


# Byte-swapped operands never reach a backend: the core casts them (the conformance suite checks it).
LAYOUTS = ("T", "neg", "bcast", "unaligned")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dt", CONTRACT_DTYPES, ids=str)
def test_layouts(backend, dt, layout):
    rng = np.random.default_rng(99)
    for shape in [(3, 17, 33, 65), (2, 65, 127, 33)]:
        a, b = _operands(rng, dt, shape, layout)
        for alg in ALGORITHMS:
            out = _poison(dt, (shape[0], shape[1], shape[3]))
            backend.matmul(a, b, out, alg)
            assert_matches(out, a, b)


@pytest.mark.parametrize("layout", ["neg", "T"])
@pytest.mark.parametrize("dt", ["int8", "uint64", "float32", "complex128", "bool"])
def test_small_blocks_reach_every_edge(backend, dt, layout, monkeypatch):
    """Tiny cache blocks (not multiples of MR/NR): every packing/edge branch runs, for operands
    with strides of several elements and for operands running down their columns (packed a
    column at a time)."""
    dt = np.dtype(dt)
    blk = params.AUTO_BLOCKING[dt]
    monkeypatch.setitem(params.AUTO_BLOCKING, dt, dataclasses.replace(blk, mc=13, nc=blk.nr + 7, kc=5))
    monkeypatch.setattr(params, "TILED", params.Tiling(tm=7, tn=9, tk=4))
    rng = np.random.default_rng(7)
    for shape in [(1, 67, 23, 150), (5, 70, 17, 90)]:
        a, b = _operands(rng, dt, shape, layout)
        for alg in ALGORITHMS:
            out = _poison(dt, (shape[0], shape[1], shape[3]))
            backend.matmul(a, b, out, alg)
            assert_matches(out, a, b)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_small_products_of_every_m_and_n_share_one_kernel(dt):
    """The small-product path cuts any M x N (up to SMALL_MN) into register tiles of fixed
    sizes (the last row tile overlapping, the last column tile masked): every M and N is right
    (masked tiles write nothing beyond N: the output is poisoned around them), and
    however many shapes it meets, it compiles one kernel per dtype and mode; a kernel per N
    made a long-running process grow with the variety of its shapes."""
    backend = CPUBackend()
    dt = np.dtype(dt)
    rng = np.random.default_rng(11)
    mr, nr = params.small_tiles(dt.itemsize)
    sizes = sorted({*range(1, 2 * mr + 2), *range(1, nr + 2), params.SMALL_MN - 1, params.SMALL_MN})
    for m in sizes:
        n = sizes[(m * 7) % len(sizes)]
        for batch, k in ((3, 120 + m % 9), (1, 200)):  # past TINY_WORK: the small path itself
            a = _random(rng, dt, (batch, m, k))
            b = _random(rng, dt, (batch, k, n))
            out = _poison(dt, (batch, m, n))
            backend.matmul(a, b, out, "auto")
            assert_matches(out, a, b)
    for n in sizes:  # every N, into a window of a larger poisoned buffer: nothing written beside it
        a, b = _random(rng, dt, (2, 5, 150)), _random(rng, dt, (2, 150, n))
        big = _poison(dt, (2, 6, n + 7))
        backend.matmul(a, b, big[:, :5, :n], "auto")
        assert_matches(big[:, :5, :n], a, b)
        untouched = _poison(dt, big.shape)
        untouched[:, :5, :n] = big[:, :5, :n]
        assert big.tobytes() == untouched.tobytes(), f"N={n}: the masked tile wrote beside the output"
    small = [kind for kind, _ in backend._fns if kind.startswith("small_")]
    assert sorted(small) == ["small_serial"], small


@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_inf_propagate_like_numpy(backend, dt):
    """No multiply is ever skipped: Inf*0 and NaN*0 give NaN as in NumPy."""
    dt = np.dtype(dt)
    rng = np.random.default_rng(3)
    for B, M, K, N in [(1, 3, 4, 5), (1, 70, 40, 90)]:
        a = _random(rng, dt, (B, M, K))
        b = _random(rng, dt, (B, K, N))
        a[0, 1, :] = 0
        a[0, 2, 1] = np.inf
        a[0, 0, 2] = np.nan
        b[0, 1, :] = 0
        b[0, :, 3] = 0
        b[0, 0, 4] = -np.inf
        if dt.kind == "c":
            # OpenBLAS's zgemm turns complex Inf into NaN+NaNj by its own
            # internal formula (NumPy's non-BLAS loop does not); the backend
            # follows the textbook product, i.e. Python's complex arithmetic.
            want = (a.astype(object) @ b.astype(object)).astype(dt)
        else:
            want = np.matmul(a, b)
        for alg in ALGORITHMS:
            out = _poison(dt, (B, M, N))
            backend.matmul(a, b, out, alg)
            np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
            np.testing.assert_array_equal(np.isinf(out), np.isinf(want))


def test_bool_many_trues_does_not_wrap(backend):
    """bool is any(a & b): 256 or more true products must not wrap to False."""
    for K in (256, 512, 1000):
        a = np.ones((1, 9, K), bool)
        b = np.ones((1, K, 70), bool)
        for alg in ALGORITHMS:
            out = np.zeros((1, 9, 70), bool)
            backend.matmul(a, b, out, alg)
            assert out.all()


@pytest.mark.parametrize("k", [7, 64, 65, 130, 200])
@pytest.mark.parametrize("shape", ["gemv", "n4", "gevm", "batched-dots"])
def test_a_bool_dot_product_finds_its_one_true_term_anywhere(backend, shape, k):
    """The dot paths stop a bool product at the first chunk holding a true term: a product whose
    only true term lies in any chunk, or in the tail after the last whole chunk, is True, and
    every other False (the output poisoned with True first)."""
    rows = 37
    m, n, batch = {"gemv": (rows, 1, 1), "n4": (rows, 4, 1), "gevm": (1, rows, 1), "batched-dots": (3, 1, rows)}[shape]
    for p in sorted({0, 1, 63 % k, 64 % k, k // 2, k - 1}):
        a = np.zeros((batch, m, k), bool)
        b = np.zeros((batch, k, n), bool)
        a[:, ::2, p] = True  # every other row of A has its one true term at p
        b[:, p, :] = True
        out = np.ones((batch, m, n), bool)
        backend.matmul(a, b, out, "auto")
        np.testing.assert_array_equal(out, np.matmul(a, b), err_msg=f"{shape} K={k} true term at {p}")


def test_float16_accumulates_in_float32(backend):
    """Partial sums beyond float16's range still give a finite, correct result."""
    a = np.full((1, 20, 64), 100.0, np.float16)
    b = np.full((1, 64, 20), 100.0, np.float16)
    b[0, 32:, :] = -100.0
    for alg in ALGORITHMS:
        out = _poison(np.float16, (1, 20, 20))
        backend.matmul(a, b, out, alg)
        np.testing.assert_array_equal(out, np.zeros((1, 20, 20), np.float16))


def test_concurrent_calls_from_threads(backend):
    """Parallel kernels launched from several Python threads at once."""
    import concurrent.futures

    rng = np.random.default_rng(5)
    a = _random(rng, np.float64, (2, 150, 90))
    b = _random(rng, np.float64, (2, 90, 170))

    def work(alg):
        out = _poison(np.float64, (2, 150, 170))
        backend.matmul(a, b, out, alg)
        return out

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        for out in ex.map(work, ALGORITHMS * 4):
            assert_matches(out, a, b)


@pytest.mark.filterwarnings("error")
def test_float16_overflow_is_inf_without_warning(backend):
    a = np.full((1, 20, 30), 300.0, np.float16)
    for alg in ALGORITHMS:
        out = _poison(np.float16, (1, 20, 20))
        backend.matmul(a, a.transpose(0, 2, 1), out, alg)
        assert np.all(np.isposinf(out))


def test_descriptors(backend):
    assert backend.array_library == "numpy"
    assert backend.algorithms == ALGORITHMS
    assert set(backend.dtypes()) == set(CONTRACT_DTYPES) | set(optional_dtypes())  # bfloat16 with ml_dtypes
    (dev,) = backend.devices()
    assert dev.startswith("cpu:")


#: Shapes ``(batch, M, K, N)`` among which the "auto" plan, for two threads, meets every packed
#: driver, both split-K kinds and both batched-dot kinds: each calls a body compiled once and
#: handed over by address.
BY_ADDRESS = {
    "auto_serial",
    "auto_batch",
    "auto_parallel",
    "auto_slabs",
    "auto_splitk",
    "small_splitk",
    "tiled_parallel",
    "dot_batch",
    "dot_batch_serial",
}
PLANNED = [(1, 80, 40, 80), (16, 100, 100, 100), (1, 700, 700, 700), (1, 300, 300, 300), (1, 100, 20000, 100),
           (1, 32, 16384, 32), (2, 96, 96, 520), (2048, 1, 512, 1), (16, 1, 300, 1)]  # fmt: skip


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_every_kernel_called_by_address_computes_the_product(backend, dtype):
    """The kernels whose work is compiled once and called by address (``native_call``): each
    driver the plan picks computes the product, and the plans cover them all."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(5)
    seen = set()
    for nb, m, k, n in PLANNED:
        a = (rng.standard_normal((nb, m, k)) + (1j * rng.standard_normal((nb, m, k)) if dt.kind == "c" else 0)).astype(
            dt
        )
        b = (rng.standard_normal((nb, k, n)) + (1j * rng.standard_normal((nb, k, n)) if dt.kind == "c" else 0)).astype(
            dt
        )
        for algorithm in ("auto", "tiled"):
            out = np.full((nb, m, n), np.nan, dt)
            if algorithm == "auto":
                kind, args = backend._plan(a, b, out, dt, nth=2)
                backend._kernel(kind, dt)(*args)
            else:
                kind = "tiled_parallel"
                backend.matmul(a, b, out, "tiled")
            seen.add(kind)
            assert_matches(out, a, b)
    wanted = BY_ADDRESS - ({"small_splitk"} if dt.kind == "c" else set())
    assert wanted <= seen, sorted(wanted - seen)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("m,k,n", [(256, 256, 256), (203, 130, 97), (150, 300, 130), (600, 100, 60)])
def test_the_slab_grid_for_many_threads_computes_the_product(backend, dtype, m, k, n):
    """Planned for 16 threads, mid-size products whose columns are too few for 16 slabs run as a
    grid of slabs by row groups (``auto_slabs``; rows and columns not multiples of the register
    tile, a group's rows ending mid-block); on this machine's threads the tasks are shared out."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(11)
    a = rng.integers(-8, 8, (1, m, k)).astype(dt) if dt.kind == "i" else rng.standard_normal((1, m, k)).astype(dt)
    b = rng.integers(-8, 8, (1, k, n)).astype(dt) if dt.kind == "i" else rng.standard_normal((1, k, n)).astype(dt)
    out = np.full((1, m, n), -7, dt) if dt.kind == "i" else np.full((1, m, n), np.nan, dt)
    kind, args = backend._plan(a, b, out, dt, nth=16)
    slabs, groups = args[4], args[6]
    assert kind == "auto_slabs" and groups > 1 and slabs * groups <= 16
    backend._kernel(kind, dt)(*args)
    assert_matches(out, a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_passive_pool_runs_mid_size_products_with_contiguous_rows_of_a_in_one_launch(backend, monkeypatch, dtype):
    """Where the pool waits passively (every launch wakes it), a 1024-class product on 16 threads
    runs as the slab grid (one launch) while A's rows are contiguous, up to
    cpu-slabs.passive_work_per_thread per thread, and keeps auto_parallel's packed blocks where A
    runs down its columns or the pool spins; the slab grid's answer is right (NaN-poisoned out)."""
    from polymm_numba import neighbours

    dt = np.dtype(dtype)
    rng = np.random.default_rng(5)
    m, k, n = 1000, 1024, 1000
    assert params.SLABS_WORK_PER_THREAD * 16 < m * k * n <= params.SLABS_PASSIVE_WORK_PER_THREAD * 16
    a = rng.standard_normal((1, m, k)).astype(dt)
    b = rng.standard_normal((1, k, n)).astype(dt)
    at = np.asfortranarray(a[0])[None]  # the same values, A down its columns
    out = np.full((1, m, n), np.nan, dt)
    for passive, x, kind in ((True, a, "auto_slabs"), (True, at, "auto_parallel"), (False, a, "auto_parallel")):
        monkeypatch.setattr(neighbours, "PASSIVE", passive)
        assert backend._plan(x, b, out, dt, nth=16)[0] == kind, (passive, x.strides)
    monkeypatch.setattr(neighbours, "PASSIVE", True)
    kind, args = backend._plan(a, b, out, dt, nth=16)
    backend._kernel(kind, dt)(*args)
    assert_matches(out, a, b)


@pytest.mark.parametrize("nr,m,n", [(64, 512, 512), (64, 256, 256), (32, 256, 256), (16, 320, 320)])
def test_the_slab_grid_gives_every_thread_a_task_whatever_the_tile_width(backend, monkeypatch, nr, m, n):
    """Slabs are whole NR-wide panels: where the columns make fewer panels than the slab count
    the planner asked for, the kernel merged slabs and half the threads idled (6 x 64 tiles, 512
    columns: 8 tasks for 16 threads). The planner counts panels, and row groups make up the rest."""
    dt = np.dtype("float32")
    blk = params.AUTO_BLOCKING[dt]
    monkeypatch.setitem(params.AUTO_BLOCKING, dt, dataclasses.replace(blk, mr=6, nr=nr))
    a = np.ones((1, m, m), dt)
    b = np.ones((1, m, n), dt)
    kind, args = backend._plan(a, b, np.empty((1, m, n), dt), dt, nth=16)
    slabs, groups = args[4], args[6]
    assert kind == "auto_slabs" and slabs <= -(-n // nr) and slabs * groups == 16


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_batch_broadcast_along_two_axes_is_one_launch_on_a_team_counted_once(monkeypatch, dtype):
    """(64, 1, 32, 32) @ (1, 64, 32, 32): no one batch stride reaches every product, so the core
    hands the backend its 64 outer indices at once (matmul_groups), and their 4096 small products
    run as one launch (small_groups) on a team counted once; with one thread free, as one serial
    kernel. Each of the 64 calls alone is under cpu-small.serial_work. Values into a NaN out=."""
    import numba

    import polymm
    from polymm_numba import backend as cpu
    from polymm_numba import neighbours

    if numba.get_num_threads() < 2:
        pytest.skip("one Numba thread: nothing to count or share")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((64, 1, 32, 32)).astype(dtype)
    b = rng.standard_normal((1, 64, 32, 32)).astype(dtype)
    assert 32**3 * 64 <= params.SMALL_SERIAL_WORK < 32**3 * 64 * 64
    counts, kinds = [], []
    free = [numba.get_num_threads()]
    monkeypatch.setattr(neighbours, "team_size", lambda limit, lock, **_: counts.append(limit) or min(limit, free[0]))
    launch = cpu.CPUBackend._launch
    monkeypatch.setattr(
        cpu.CPUBackend, "_launch", lambda self, kind, args, dt: kinds.append(kind) or launch(self, kind, args, dt)
    )
    out = np.full((64, 64, 32, 32), np.nan, dtype)
    assert polymm.matmul(a, b, out=out, backend="cpu") is out
    assert counts == [numba.get_num_threads()] and kinds == ["small_groups"]
    assert_matches(out, a, b)
    # one thread free (NumPy's pool spinning beside us): the serial kernel, called as it is
    free[0] = 1
    kinds.clear()
    out[...] = np.nan
    polymm.matmul(a, b, out=out, backend="cpu")
    assert len(counts) == 2 and kinds == []
    assert_matches(out, a, b)
    # the outer axis and the batch axis of B reversed: negative strides in the one launch
    a2, b2 = a[::-1], b[:, ::-1]
    out = np.full((64, 64, 32, 32), np.nan, dtype)
    polymm.matmul(a2, b2, out=out, backend="cpu")
    assert_matches(out, a2, b2)


def test_a_shallow_product_on_a_passive_pool_gives_threads_row_groups_first(backend, monkeypatch):
    """outer-k32 (4096 x 32 @ 32 x 4096) on 16 passive threads: the slab grid is 16 row groups,
    so that each thread first touches its own pages of the new 64 MiB result; a deep product
    (K = 1024) keeps its column slabs. Values of the row-group grid into NaN."""
    from polymm_numba import neighbours

    monkeypatch.setattr(neighbours, "PASSIVE", True)
    dt = np.dtype("float32")
    for (m, k, n), grid in (((4096, 32, 4096), (1, 16)), ((1024, 1024, 1024), None)):
        a, b, out = np.ones((1, m, k), dt), np.ones((1, k, n), dt), np.empty((1, m, n), dt)
        kind, args = backend._plan(a, b, out, dt, nth=16)
        assert kind == "auto_slabs"
        slabs, groups = args[4], args[6]
        if grid:
            assert (slabs, groups) == grid
        else:
            assert slabs > groups
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 600, 32)).astype(dt)
    b = rng.standard_normal((1, 32, 700)).astype(dt)
    out = np.full((1, 600, 700), np.nan, dt)
    kind, args = backend._plan(a, b, out, dt, nth=4)
    assert kind == "auto_slabs" and args[4] == 1 and args[6] > 1
    backend._kernel(kind, dt)(*args)
    assert_matches(out, a, b)


def test_on_a_passive_pool_a_long_product_shares_the_cores_of_numpys_spinning_threads(backend, monkeypatch):
    """Right after a NumPy product OpenBLAS's threads spin about 0.1 s. On a passive pool of
    cpu-threads.share_from_cores threads or more a product of at least
    cpu-threads.share_spin_seconds on one thread takes the team beside them (team_size told they
    do not hold their cores); a short one, one on fewer threads, or any product on a spinning
    pool shorter than the spin where the spinners cannot be idled (neighbours.MAY_YIELD), keeps
    the cores they leave."""
    import numba

    from polymm_numba import neighbours

    if numba.get_num_threads() < 2:
        pytest.skip("one Numba thread: no team to size")
    monkeypatch.setattr(neighbours, "MAY_YIELD", False)
    told = []
    monkeypatch.setattr(
        neighbours, "team_size", lambda limit, lock, outlasts_spin=False: told.append(outlasts_spin) or 1
    )
    dt = np.dtype("float32")
    big, small = 1024, 256
    assert params.one_thread_seconds(big**3, dt) >= params.SHARE_SPIN_SECONDS > params.one_thread_seconds(small**3, dt)
    assert params.one_thread_seconds(big**3, dt) < params.SPIN_SECONDS
    threads = numba.get_num_threads()
    cases = ((True, big, threads, True), (True, small, threads, False), (False, big, threads, False))
    for passive, n, from_cores, shares in cases + ((True, big, threads + 1, False),):
        monkeypatch.setattr(neighbours, "PASSIVE", passive)
        monkeypatch.setattr(params, "SHARE_FROM_CORES", from_cores)
        a, b = np.ones((1, n, n), dt), np.ones((1, n, n), dt)
        out = np.full((1, n, n), np.nan, dt)
        told.clear()
        backend.matmul(a, b, out, "auto")
        assert told == [shares], (passive, n, from_cores)
        assert np.all(out == n)


def test_a_long_product_beside_spinning_threads_idles_them_for_its_launch(backend, monkeypatch):
    """Where the spinners may be idled (neighbours.MAY_YIELD, cpu-threads.yield_spinners), a
    product of at least cpu-threads.share_spin_seconds on one thread shares their cores, the
    threads found running beside it idled for its launch; a short one does neither."""
    import contextlib

    import numba

    from polymm_numba import neighbours

    if numba.get_num_threads() < 2:
        pytest.skip("one Numba thread: no team to size")
    monkeypatch.setattr(neighbours, "MAY_YIELD", True)
    monkeypatch.setattr(neighbours, "PASSIVE", False)
    monkeypatch.setattr(neighbours, "team_size", lambda limit, lock, outlasts_spin=False: limit if outlasts_spin else 1)
    monkeypatch.setattr(neighbours, "spinning_threads", lambda: [4242])
    idled = []

    @contextlib.contextmanager
    def yielding(tids):
        idled.append(list(tids))
        yield

    monkeypatch.setattr(neighbours, "yielding", yielding)
    dt = np.dtype("float32")
    rng = np.random.default_rng(4)
    for n, expect in ((1024, [[4242]]), (256, [])):
        a, b = rng.standard_normal((1, n, n)).astype(dt), rng.standard_normal((1, n, n)).astype(dt)
        out = np.full((1, n, n), np.nan, dt)
        idled.clear()
        backend.matmul(a, b, out, "auto")
        assert idled == expect, n
        assert_matches(out, a, b)
    monkeypatch.setattr(params, "YIELD_SPINNERS", False)  # the database's switch
    idled.clear()
    backend.matmul(a, b, out, "auto")
    assert idled == []
