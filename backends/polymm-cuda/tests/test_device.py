"""Correctness of the CUDA backend on a real GPU (skipped cleanly without one).

Every dtype x algorithm x layout (contiguous, transposed, negative strides,
broadcast batch, strided slices, misaligned starts) at odd sizes, against
NumPy: integers and bool exactly (NumPy's own wrap-around is the reference),
floating types against a float64/complex128 product by relative norm.  Outputs
are poisoned first so an unwritten element fails.  Every path of the shared
planner is reached (and asserted to be the one planned), the tensor-core,
FP64 tensor-core and image kernels are run, plus the 64-bit indexing and
> 65535-batch paths.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
try:
    _NDEV = cp.cuda.runtime.getDeviceCount()
except Exception:  # no driver
    _NDEV = 0
pytestmark = pytest.mark.skipif(_NDEV < 1, reason="no CUDA device")

from polymm.backend import CONTRACT_DTYPES, SizeLimitError  # noqa: E402
from polymm.kernels import IMAGE_DTYPES, devices  # noqa: E402
from polymm.kernels.devices import settings_for  # noqa: E402
from polymm_cuda import CUDABackend, planes, tensorcore  # noqa: E402
from polymm.testing import assert_matches, random_array  # noqa: E402

DTYPES = [d.name for d in CONTRACT_DTYPES]
ALGORITHMS = ("naive", "tiled", "auto")
SHAPES = [
    (1, 1, 1, 1),
    (1, 1, 1, 7),
    (1, 17, 33, 65),
    (2, 33, 17, 127),
    (1, 65, 127, 257),
    (3, 127, 65, 33),
    (1, 257, 257, 17),
    (1, 300, 260, 130),
]  # (B, M, N, K)
LAYOUTS = ("c", "at", "bt", "neg", "bcast", "slice", "misaligned", "padded", "padded-t")


@pytest.fixture(autouse=True)
def _tensor_cores_preferred(monkeypatch):
    """These tests prove the tensor-core kernels at tile edges, small products included: wherever a
    tensor-core family offers a candidate it runs (``POLYMM_PREFER``), whatever the cost model says
    of so small a product (tests/test_planner.py checks the ranking itself; byte planes take
    products of any size, ``POLYMM_CUDA_PLANES_MIN_WORK=0``)."""
    monkeypatch.setenv("POLYMM_PREFER", "wgmma,mma-sync,relayout,dmma,tf32,byte-planes")
    monkeypatch.setenv("POLYMM_CUDA_PLANES_MIN_WORK", "0")


@pytest.fixture(scope="module")
def backend():
    return CUDABackend()


def _operands(rng, layout, bt, m, n, k, dtype):
    """Host arrays a (B,M,K), b (B,K,N) with the layout's strides, then put on the GPU
    preserving those strides (views of device buffers)."""

    def dev(x):  # device view with the same structure as the host view x
        return x

    if layout == "c":
        a, b = random_array(rng, (bt, m, k), dtype), random_array(rng, (bt, k, n), dtype)
        return cp.asarray(a), cp.asarray(b), a, b
    if layout == "at":
        a = random_array(rng, (bt, k, m), dtype)
        b = random_array(rng, (bt, k, n), dtype)
        return cp.asarray(a).transpose(0, 2, 1), cp.asarray(b), a.transpose(0, 2, 1), b
    if layout == "bt":
        a = random_array(rng, (bt, m, k), dtype)
        b = random_array(rng, (bt, n, k), dtype)
        return cp.asarray(a), cp.asarray(b).transpose(0, 2, 1), a, b.transpose(0, 2, 1)
    if layout == "neg":
        a = random_array(rng, (bt, m, k), dtype)
        b = random_array(rng, (bt, k, n), dtype)
        return (cp.asarray(a)[::-1, ::-1, :], cp.asarray(b)[:, ::-1, ::-1], a[::-1, ::-1, :], b[:, ::-1, ::-1])
    if layout == "rows-reversed":
        a = random_array(rng, (bt, m, k), dtype)
        b = random_array(rng, (bt, k, n), dtype)
        return cp.asarray(a)[:, ::-1], cp.asarray(b)[:, ::-1], a[:, ::-1], b[:, ::-1]
    if layout == "step":
        a = random_array(rng, (bt, m, 2 * k), dtype)
        b = random_array(rng, (bt, k, 2 * n), dtype)
        return cp.asarray(a)[..., ::2], cp.asarray(b)[..., ::2], a[..., ::2], b[..., ::2]
    if layout == "bcast":
        a = random_array(rng, (1, m, k), dtype)
        b = random_array(rng, (bt, k, n), dtype)
        return (cp.broadcast_to(cp.asarray(a), (bt, m, k)), cp.asarray(b), np.broadcast_to(a, (bt, m, k)), b)
    if layout == "slice":
        a = random_array(rng, (bt, 2 * m, 3 * k), dtype)
        b = random_array(rng, (bt, 2 * k, n + 1), dtype)
        return (cp.asarray(a)[:, ::2, ::3], cp.asarray(b)[:, ::2, 1:], a[:, ::2, ::3], b[:, ::2, 1:])
    if layout == "misaligned":
        a = random_array(rng, (bt, m, k + 1), dtype)
        b = random_array(rng, (bt, k, n + 3), dtype)
        return (cp.asarray(a)[:, :, 1:], cp.asarray(b)[:, :, 3:], a[:, :, 1:], b[:, :, 3:])
    if layout in ("padded", "padded-t"):
        # Aligned rows of a wider buffer (leading dimension a multiple of 4, K and N not):
        # 16-byte vector loads apply although K % 4 != 0.
        lk, ln = -(-k // 4) * 4 + 4, -(-n // 4) * 4 + 4
        wa = random_array(rng, (bt, m, lk), dtype)
        da, ha = cp.asarray(wa)[:, :, :k], wa[:, :, :k]
        if layout == "padded":
            wb = random_array(rng, (bt, k, ln), dtype)
            return da, cp.asarray(wb)[:, :, :n], ha, wb[:, :, :n]
        wb = random_array(rng, (bt, n, lk), dtype)
        return da, cp.asarray(wb)[:, :, :k].transpose(0, 2, 1), ha, wb[:, :, :k].transpose(0, 2, 1)
    raise AssertionError(layout)


def _poisoned(bt, m, n, dtype):
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        return cp.full((bt, m, n), np.nan, dtype=dt)
    if dt == np.bool_:
        return cp.ones((bt, m, n), dtype=dt)  # the sparse inputs make many results False
    return cp.full((bt, m, n), 113, dtype=dt)


def _check(out, a, b, dtype):
    """The shared oracle (polymm.testing) on the host copy of ``out``."""
    got = cp.asnumpy(out)
    assert got.dtype == np.dtype(dtype)
    assert_matches(got, a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul(backend, dtype, algorithm, layout):
    rng = np.random.default_rng(abs(hash((dtype, algorithm, layout))) % 2**32)
    for bt, m, n, k in SHAPES:
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, dtype)
        out = _poisoned(bt, m, n, dtype)
        backend.matmul(da, db, out, algorithm)
        _check(out, ha, hb, dtype)


#: (B, M, N, K, layout) -> what the planner's reason says: one per GPU path.
PATHS = [
    ((1, 2000, 3, 700, "c"), "lanes along K"),
    ((1, 700, 1, 900, "at"), "packed to rows"),
    ((1, 5, 900, 3000, "c"), "row strip"),
    ((1, 40, 24, 9000, "c"), "slices of K"),
    ((300, 20, 30, 40, "c"), "small"),
    ((1, 200, 190, 70, "c"), "tiles"),
    ((1, 1001, 999, 1003, "c"), "packed"),
    ((1, 255, 257, 255, "c"), "1 wide"),
    ((1, 1024, 1024, 512, "bt"), "read in place"),
]
#: the reasons of the vector paths, which only the vector dtypes take
VECTOR_REASONS = ("packed", "1 wide", "read in place")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case,reason", PATHS, ids=[f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}" for c, _ in PATHS])
def test_every_planner_path(backend, dtype, case, reason):
    """Each GPU path of the shared planner runs and is the one planned."""
    rng = np.random.default_rng(7)
    bt, m, n, k, layout = case
    da, db, ha, hb = _operands(rng, layout, bt, m, n, k, dtype)
    out = _poisoned(bt, m, n, dtype)
    backend.matmul(da, db, out, "auto")
    _check(out, ha, hb, dtype)
    if reason in VECTOR_REASONS and dtype not in ("float32", "float64"):
        reason = "tiles"
    got = backend.last_plan.reason
    # the CUDA-only tensor-core entry may claim what its kernels take, never what its rules decline
    device, shape = backend.planner_device(da), (bt, m, n, k)
    sa, sb = (tuple(s // da.itemsize for s in x.strides) for x in (da, db))
    dmma = tensorcore.dmma_in_auto(device)
    hopper = device.cc == 90  # wgmma: any K, deep K split into runs
    tensor_cores = tensorcore.shape_rule(np.dtype(dtype), device, shape, hopper) is None or (
        dmma and tensorcore.choose_dmma(np.dtype(dtype), device, shape, sa, sb)[0] is not None
    )
    tensor_cores = tensor_cores or planes.refusal(np.dtype(dtype), shape, device) is None
    realify_work = settings_for(device)("realify", "work")
    if dtype == "complex128" and sa[2] == 1 and m * n * k >= realify_work:  # as one float64 product
        real = ((bt, m, 2 * n, 2 * k), (2 * sa[0], 2 * sa[1], 1), (4 * k * n, 2 * n, 1))
        tensor_cores = dmma and tensorcore.choose_dmma(np.dtype("float64"), device, *real)[0] is not None
    assert reason in got or (tensor_cores and "tensor cores" in got), backend.last_plan


def test_large_batch_is_split(backend):
    """gridDim.z is limited to 65535: larger batches are launched in chunks."""
    rng = np.random.default_rng(3)
    ha = rng.standard_normal((70001, 3, 2)).astype(np.float32)
    hb = rng.standard_normal((70001, 2, 5)).astype(np.float32)
    for alg in ALGORITHMS:
        out = _poisoned(70001, 3, 5, np.float32)
        backend.matmul(cp.asarray(ha), cp.asarray(hb), out, alg)
        _check(out, ha, hb, np.float32)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_64bit_indexing(backend, algorithm):
    """M*K and M*N beyond 2**31 elements (int8 keeps it to a few GB)."""
    rng = np.random.default_rng(5)
    m, k, n = 70000, 32768, 3  # M*K = 2.29e9
    a = cp.asarray(rng.integers(-128, 127, size=(1, m, k), dtype=np.int8))
    b = cp.asarray(rng.integers(-128, 127, size=(1, k, n), dtype=np.int8))
    out = _poisoned(1, m, n, np.int8)
    backend.matmul(a, b, out, algorithm)
    rows = np.r_[0:4, m - 64 : m]
    ha, hb = cp.asnumpy(a[0, rows]).astype(np.int64), cp.asnumpy(b[0]).astype(np.int64)
    want = (ha @ hb).astype(np.int8)  # wraps like NumPy's int8 product
    assert (cp.asnumpy(out[0, rows]) == want).all()
    del a, out
    m2, n2 = 65536, 32800  # M*N = 2.15e9
    a = cp.asarray(rng.integers(-128, 127, size=(1, m2, 1), dtype=np.int8))
    b = cp.asarray(rng.integers(-128, 127, size=(1, 1, n2), dtype=np.int8))
    out = _poisoned(1, m2, n2, np.int8)
    backend.matmul(a, b, out, algorithm)
    rows = np.r_[0:2, m2 - 2 : m2]
    want = (cp.asnumpy(a[0, rows]).astype(np.int64) * cp.asnumpy(b[0]).astype(np.int64)).astype(np.int8)
    assert (cp.asnumpy(out[0, rows]) == want).all()


def test_current_stream_no_sync(backend):
    """Work goes to the current CuPy stream (ordered after work queued there)."""
    rng = np.random.default_rng(11)
    ha = rng.standard_normal((1, 300, 200)).astype(np.float32)
    hb = rng.standard_normal((1, 200, 100)).astype(np.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        a = cp.asarray(ha)
        b = cp.asarray(hb)
        out = _poisoned(1, 300, 100, np.float32)
        backend.matmul(a, b, out, "auto")
        s.synchronize()
    _check(out, ha, hb, np.float32)


def test_numpy_roundtrip(backend):
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    y = backend.to_numpy(backend.from_numpy(x))
    assert isinstance(y, np.ndarray) and (y == x).all()


@pytest.mark.skipif(_NDEV < 2, reason="needs two GPUs")
def test_two_devices_is_an_error(backend):
    with cp.cuda.Device(0):
        a = cp.ones((1, 4, 4), cp.float32)
        out = cp.empty((1, 4, 4), cp.float32)
    with cp.cuda.Device(1):
        b = cp.ones((1, 4, 4), cp.float32)
    with pytest.raises(ValueError, match="cuda:0.*cuda:1"):
        backend.matmul(a, b, out, "auto")


def test_through_polymm(backend):
    """The public entry point with CuPy arrays and the backend's name."""
    import polymm

    rng = np.random.default_rng(13)
    ha = rng.standard_normal((4, 33, 17)).astype(np.float32)
    hb = rng.standard_normal((17, 9)).astype(np.float32)
    for alg in ALGORITHMS:
        got = polymm.matmul(cp.asarray(ha), cp.asarray(hb), backend=backend.name, algorithm=alg)
        assert isinstance(got, cp.ndarray)
        _check(got, ha, np.broadcast_to(hb, (4, 17, 9)), np.float32)
    got = polymm.matmul(ha, hb, backend=backend.name)
    assert isinstance(got, np.ndarray)
    _check(got, ha, np.broadcast_to(hb, (4, 17, 9)), np.float32)


TC_SHAPES = [  # (B, M, N, K): whole tiles, edges of every tile dimension, a K tail, batches
    (1, 128, 128, 32),
    (1, 256, 384, 512),
    (1, 130, 136, 40),
    (3, 200, 264, 64),
    (1, 9, 16, 8),
    (2, 1000, 520, 1032),
]


TC_DTYPES = ("float16", "int8", "uint8")


@pytest.mark.parametrize("layout", ("c", "bt", "at", "bcast", "padded", "misaligned"))
@pytest.mark.parametrize("dtype", TC_DTYPES)
def test_tensor_core_path(backend, dtype, layout):
    """Products the tensor-core kernels take, directly or after "auto" repacks them, at tile edges;
    8-bit results wrap exactly as NumPy's."""
    rng = np.random.default_rng(11)
    for bt, m, n, k in TC_SHAPES:
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, dtype)
        device = backend.planner_device(da)
        isz = np.dtype(dtype).itemsize
        sa = tuple(s // isz for s in da.strides)
        sb = tuple(s // isz for s in db.strides)
        name, why = tensorcore.choose(np.dtype(dtype), device, (bt, m, n, k), sa, sb, da.data.ptr, db.data.ptr)
        if (
            tensorcore.shape_rule(np.dtype(dtype), device, (bt, m, n, k)) is None
            and layout in ("c", "bcast")
            and dtype == "float16"
        ):
            assert name is not None, why
        out = _poisoned(bt, m, n, dtype)
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, dtype)


WG_SHAPES = [  # (B, M, N, K): one tile, edges of every tile dimension and of K, batches, several tiles
    (1, 128, 256, 64),
    (1, 130, 264, 72),
    (3, 200, 264, 520),
    (1, 16, 16, 8),
    (2, 257, 300, 136),
    (1, 1000, 1030, 1032),
    (1, 2048, 2048, 136),  # 256-wide tiles (the others take 128: more tiles for the SMs)
    (4, 1024, 1024, 72),
    (2, 72, 131, 40),  # N odd (rows 16-byte aligned in the "padded" layout only)
    (1, 130, 131, 77),  # K and N odd: the rows of A and B copied K-major first
    (2, 200, 264, 1001),
    (64, 64, 64, 64),  # M <= 64: 64-row tiles, each consumer warp group its own (WG_BM 64)
    (5, 40, 200, 300),  # the same with rows and K tails, several slices per tile
    (3, 64, 520, 136),  # several tiles along N, their count odd
]


WG_SHAPES_8 = [  # the same for 8-bit operands: K a multiple of 16 (16-byte rows), tails of 128-wide K slices
    (1, 128, 256, 128),
    (1, 130, 264, 80),
    (3, 200, 264, 528),
    (2, 257, 300, 144),
    (1, 1000, 1030, 1040),
    (1, 2048, 2048, 144),
    (4, 1024, 1024, 80),
    (1, 130, 131, 77),  # K and N odd: the rows of A and B copied K-major first
    (2, 200, 264, 1001),
    (64, 64, 64, 128),  # M <= 64: 64-row tiles (WG_BM 64), K-major B only (the swapped form splits columns)
    (5, 40, 200, 304),
]


@pytest.mark.parametrize("dtype", ("float16", "int8", "uint8"))
@pytest.mark.parametrize("layout", ("c", "bt", "bcast", "at", "padded", "misaligned", "rows-reversed", "step"))
def test_wgmma_path(backend, layout, dtype, monkeypatch):
    """float16 and the 8-bit integers on Hopper's wgmma kernel (TMA copies, both B layouts for
    float16, K-major B for int8/uint8, broadcast batches), at tile edges and beyond one tile;
    operands the copy engine cannot read (K or N odd, transposed, misaligned, rows reversed, every
    other column) are copied first; on other GPUs another kernel, never a wrong answer. wgmma
    alone is preferred: mma.sync reads reversed rows in place, and the cost model rightly gives
    it small products that wgmma would first copy (the H200, 2026-11-28)."""
    from polymm_cuda import tensorcore, wgmma

    monkeypatch.setenv("POLYMM_PREFER", "wgmma")

    rng = np.random.default_rng(17)
    cc = backend._compute_capability(0)
    isz = np.dtype(dtype).itemsize
    ran = short = 0
    for bt, m, n, k in WG_SHAPES if isz == 2 else WG_SHAPES_8:
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, dtype)
        sa, sb = tuple(s // isz for s in da.strides), tuple(s // isz for s in db.strides)
        name, why = wgmma.choose(np.dtype(dtype), cc, (bt, m, n, k), sa, sb, da.data.ptr, db.data.ptr)
        rules = tensorcore.shape_rule(np.dtype(dtype), backend.planner_device(da), (bt, m, n, k), cc == wgmma.CC)
        if rules is not None:
            name = None  # another path's shape (few columns; before Hopper K not a multiple of 16 bytes)
        out = _poisoned(bt, m, n, dtype)
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, dtype)
        if name is not None:  # it reads these operands: "auto" runs it
            assert backend.last_plan.kernel == name, backend.last_plan
            ran += 1
            swapped = isz == 1 and name.endswith("_kn")  # tiles of C^T: rows along N
            own = (bt, n, m, k) if swapped else (bt, m, n, k)
            device = backend.planner_device(da)
            rows = 128 if swapped else wgmma.tile_rows(own, device, wgmma.width(own, device))
            assert ("-DWG_BM=64" in backend.last_plan.external["options"]) == (rows == 64), backend.last_plan
            short += rows == 64
    if cc == wgmma.CC:
        assert ran >= 7, f"wgmma ran {ran} of {len(WG_SHAPES)} shapes"
        assert isz == 1 or short >= 2, f"64-row tiles ran {short} times"  # the 8-bit ones only where B is K-major


@pytest.mark.parametrize("dtype", ("int8", "uint8"))
def test_8bit_wgmma_with_b_along_n(backend, dtype):
    """8-bit products with B N-contiguous (as NumPy stores it) on Hopper: read as stored through
    registers (``polymm_wgmma_<type>_kn``, C^T = B^T A^T) where its rows are 16-byte aligned (also
    as a view of wider rows, N odd), else copied K-major first; full-range operands (int32 sums far
    outside the type, wrapped to the low byte like NumPy's) at tile edges, K tails, batches and a
    broadcast A."""
    from polymm_cuda import wgmma

    rng = np.random.default_rng(29)
    info = np.iinfo(dtype)
    cc = backend._compute_capability(0)
    read = {"kn": 0, "nk": 0}
    for bt, m, n, k in WG_SHAPES_8 + [(2, 72, 144, 48), (1, 300, 1040, 4096)]:
        for broadcast in (False, True):
            ha = rng.integers(info.min, info.max + 1, (1 if broadcast else bt, m, k), dtype=dtype)
            hb = rng.integers(info.min, info.max + 1, (bt, k, n), dtype=dtype)
            da = cp.asarray(ha)
            if broadcast:
                ha, da = np.broadcast_to(ha, (bt, m, k)), cp.broadcast_to(da, (bt, m, k))
            out = _poisoned(bt, m, n, dtype)
            backend.matmul(da, cp.asarray(hb), out, "auto")
            want = np.matmul(ha.astype(np.int64), hb.astype(np.int64)).astype(dtype)
            np.testing.assert_array_equal(cp.asnumpy(out), want)
            if cc == wgmma.CC:
                layout = "kn" if n % 16 == 0 else "nk"  # rows of n bytes
                assert backend.last_plan.kernel == wgmma.kernel_name(dtype, layout), backend.last_plan
                read[layout] += 1
    # B as a view of wider rows (16-byte aligned, N odd or not a multiple of 16): read as stored,
    # C's columns stored one byte at a time where N is odd
    for bt, m, n, k in [(2, 100, 131, 160), (1, 64, 77, 32), (1, 200, 200, 48)]:
        ha = rng.integers(info.min, info.max + 1, (bt, m, k), dtype=dtype)
        wide = rng.integers(info.min, info.max + 1, (bt, k, -(-n // 16) * 16 + 16), dtype=dtype)
        hb = wide[:, :, :n]
        out = _poisoned(bt, m, n, dtype)
        backend.matmul(cp.asarray(ha), cp.asarray(wide)[:, :, :n], out, "auto")
        want = np.matmul(ha.astype(np.int64), hb.astype(np.int64)).astype(dtype)
        np.testing.assert_array_equal(cp.asnumpy(out), want)
        if cc == wgmma.CC:
            assert backend.last_plan.kernel == wgmma.kernel_name(dtype, "kn"), backend.last_plan
            read["kn"] += 1
    if cc == wgmma.CC:
        assert read["kn"] >= 11 and read["nk"] >= 4, read


@pytest.mark.parametrize("mode", ["tf32", "tf32x3"])
@pytest.mark.parametrize("layout", ("c", "bt", "at", "bcast", "neg", "slice", "misaligned", "padded"))
def test_tf32_modes_on_wgmma(backend, mode, layout, monkeypatch):
    """float32 in the "tf32" and "tf32x3" precision modes: on Hopper, wgmma reads the operands
    in place or as split copies (any layout), "tf32" with B as stored through registers (C^T =
    B^T A^T); every result within the mode's bound, "tf32x3" within float32's too, and "tf32"
    measurably less precise (the tensor cores really ran). The size from which "auto" takes them
    is lowered so that small shapes run them too."""
    import polymm
    from polymm.precision import error_bound
    from polymm_cuda import tensorcore

    monkeypatch.delenv("POLYMM_CUDA_TF32_MIN_WORK", raising=False)
    monkeypatch.setitem(devices.entry("NVIDIA GPU", "tf32", "min_work"), "value", {"tf32": 1, "tf32x3": 1})

    rng = np.random.default_rng(23)
    cc = backend._compute_capability(0)
    ran, swapped, worst = 0, 0, 0.0
    for bt, m, n, k in WG_SHAPES:
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, "float32")
        out = _poisoned(bt, m, n, "float32")
        with polymm.use_precision(mode):
            backend.matmul(da, db, out, "auto")
        got = cp.asnumpy(out)
        assert_matches(got, ha, hb, precision=mode)
        if mode == "tf32x3":
            assert_matches(got, ha, hb)
        if tensorcore.tf32_rule(mode, backend.planner_device(da), (bt, m, n, k)) is None:
            kernels = {f"polymm_wgmma_{mode}_nk"} | ({"polymm_wgmma_tf32_kn"} if mode == "tf32" else set())
            assert backend.last_plan.kernel in kernels, backend.last_plan
            ran += 1
            swapped += backend.last_plan.kernel.endswith("_kn")
            exact = np.matmul(ha.astype(np.float64), hb.astype(np.float64))
            scale = np.matmul(np.abs(ha).astype(np.float64), np.abs(hb).astype(np.float64))
            worst = max(worst, float(np.max(np.abs(got - exact) / scale / error_bound("default", k, 2.0**-23))))
    if cc == 90:
        assert ran >= 5, f"wgmma ran {ran} of {len(WG_SHAPES)} shapes"
        if mode == "tf32":
            assert worst > 1, "a TF32 product should exceed float32's error bound somewhere"
        if mode == "tf32" and layout in ("c", "at", "bcast", "padded"):  # B N-contiguous, aligned
            assert swapped >= 5, f"the swapped kernel ran {swapped} of {len(WG_SHAPES)} shapes"


def test_tf32x3_keeps_inf_nan_and_huge_values(backend, monkeypatch):
    """Inf and NaN cannot be split into TF32 parts: the rows and columns that hold them are
    recomputed in float32, so every special lands where a float32 product puts it; values near
    float32's largest stay finite (they round down, not to Inf)."""
    import polymm

    monkeypatch.delenv("POLYMM_CUDA_TF32_MIN_WORK", raising=False)
    monkeypatch.setitem(devices.entry("NVIDIA GPU", "tf32", "min_work"), "value", {"tf32": 1, "tf32x3": 1})

    rng = np.random.default_rng(29)
    for bt, m, n, k in [(1, 300, 260, 200), (2, 130, 264, 1100)]:
        a = rng.standard_normal((bt, m, k)).astype(np.float32)
        b = rng.standard_normal((bt, k, n)).astype(np.float32)
        a[0, 3, 5], a[-1, m - 1, k - 1], b[0, 7, 11], b[-1, k - 2, n - 1] = np.inf, np.nan, -np.inf, np.nan
        b[0, :, 21] = 0.0  # Inf * 0: NaN, as in float32
        a[0, :, 0], b[0, 0, 20] = 1e-3, np.finfo(np.float32).max  # past TF32's largest: must stay finite
        for mode in ("tf32x3", "tf32"):
            out = _poisoned(bt, m, n, "float32")
            with polymm.use_precision(mode):
                backend.matmul(cp.asarray(a), cp.asarray(b), out, "auto")
            got = cp.asnumpy(out)
            if backend._compute_capability(0) == 90:  # "tf32" reads B as stored (C^T = B^T A^T)
                assert backend.last_plan.kernel == f"polymm_wgmma_{mode}_{'kn' if mode == 'tf32' else 'nk'}"
            with np.errstate(all="ignore"):
                want = np.matmul(a, b)  # NumPy's float32 product: where the specials belong
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=mode)
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=mode)
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want), err_msg=mode)
            finite = np.isfinite(want)
            scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
            assert np.all(np.abs(got[finite] - want[finite]) <= 4e-3 * scale[finite]), mode


def test_wgmma_copies_zero_row_strides(backend):
    """One row of A seen 300 times (a broadcast view, row stride 0): no tensor map describes it,
    so it is copied first (on Hopper) or another kernel computes it, right."""
    rng = np.random.default_rng(19)
    row = random_array(rng, (1, 1, 136), "float16")
    ha, hb = np.broadcast_to(row, (1, 300, 136)), random_array(rng, (1, 136, 264), "float16")
    da = cp.broadcast_to(cp.asarray(row), (1, 300, 136))
    out = _poisoned(1, 300, 264, "float16")
    backend.matmul(da, cp.asarray(hb), out, "auto")
    if backend._compute_capability(0) == 90:
        assert backend.last_plan.external["before"][0]["kernel"] == "polymm_restride_16", backend.last_plan
    _check(out, ha, hb, "float16")


SPLIT_SHAPES = [  # (B, M, N, K): K at least split-k.deep_k x max(M, N) on few tiles, K odd, a batch
    (1, 128, 256, 8192),
    (1, 200, 160, 8192),
    (3, 130, 100, 5003),
    (1, 64, 48, 20000),
]


@pytest.mark.parametrize("dtype", ("float16", "int8", "uint8", "tf32", "tf32x3"))
def test_wgmma_split_k(backend, dtype, monkeypatch):
    """Deep products on few tiles run on wgmma in runs of K (``WG_SPLIT``), the partial sums added
    in run order by ``polymm_wgmma_sum_<type>``: values against the oracle (full-range 8-bit
    operands wrap like NumPy's), both B layouts, and the same bits on a second call."""
    import polymm
    from polymm_cuda import wgmma

    if backend._compute_capability(0) != wgmma.CC:
        pytest.skip("wgmma runs on compute capability 9.0")
    mode = dtype if dtype.startswith("tf32") else None
    if mode:
        monkeypatch.setenv("POLYMM_CUDA_TF32_MIN_WORK", "0")
        dtype = "float32"
    rng = np.random.default_rng(41)
    for bt, m, n, k in SPLIT_SHAPES:
        for b_t in (False, True):
            if np.dtype(dtype).kind in "iu":
                info = np.iinfo(dtype)
                ha = rng.integers(info.min, info.max + 1, (bt, m, k), dtype=dtype)
                hb = rng.integers(info.min, info.max + 1, (bt, n, k) if b_t else (bt, k, n), dtype=dtype)
            else:
                ha = random_array(rng, (bt, m, k), dtype)
                hb = random_array(rng, (bt, n, k) if b_t else (bt, k, n), dtype)
            hb = hb.transpose(0, 2, 1) if b_t else hb
            db = cp.asarray(hb.transpose(0, 2, 1)).transpose(0, 2, 1) if b_t else cp.asarray(hb)
            out = _poisoned(bt, m, n, dtype)
            with polymm.use_precision(mode or "default"):
                backend.matmul(cp.asarray(ha), db, out, "auto")
                plan = backend.last_plan
                assert "runs of K, added in order" in plan.reason, plan
                assert plan.external["after"][0]["kernel"].startswith("polymm_wgmma_sum_"), plan
                again = _poisoned(bt, m, n, dtype)
                backend.matmul(cp.asarray(ha), db, again, "auto")
            cp.testing.assert_array_equal(out, again)
            if np.dtype(dtype).kind in "iu":
                want = np.matmul(ha.astype(np.int64), hb.astype(np.int64)).astype(dtype)
                np.testing.assert_array_equal(cp.asnumpy(out), want)
            elif mode:
                assert_matches(cp.asnumpy(out), ha, hb, precision=mode)
            else:
                _check(out, ha, hb, dtype)


BYTE_PLANE_CASES = [  # (B, M, N, K), layout
    ((1, 512, 384, 1000), "c"),
    ((2, 300, 260, 130), "at"),
    ((3, 130, 100, 517), "bt"),
    ((2, 129, 200, 300), "bcast"),
    ((2, 100, 140, 250), "neg"),
    ((1, 96, 80, 70000), "c"),  # deep: several runs per byte pair; 64-bit sums exact per run
    # shallow: by Horner's rule the pairs of one shift share its slices of K (K rounded up to 32)
    ((1, 300, 280, 30), "c"),
    ((2, 200, 150, 70), "bt"),
    ((1, 260, 300, 5), "at"),
]


@pytest.mark.parametrize("dtype", planes.DTYPES)
def test_byte_planes(backend, dtype):
    """int16 to uint64 on the uint8 tensor cores by byte planes (by Horner's rule, or in runs of
    K): full-range operands (every carry of every byte pair), any layout, a product deep enough
    for several runs per pair; NumPy's wrapped product bit for bit, and the same bits on a second
    call."""
    from polymm_cuda import wgmma

    if backend._compute_capability(0) != wgmma.CC:
        pytest.skip("the uint8 wgmma product runs on compute capability 9.0")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(43)
    for (bt, m, n, k), layout in BYTE_PLANE_CASES:
        ha = rng.integers(info.min, info.max, (bt, m, k), dtype=dtype, endpoint=True)
        hb = rng.integers(info.min, info.max, (bt, k, n), dtype=dtype, endpoint=True)
        da, db, ha, hb = _operands_like(layout, ha, hb)
        out = _poisoned(bt, m, n, dtype)
        backend.matmul(da, db, out, "auto")
        plan = backend.last_plan
        assert "products of byte pairs" in plan.reason, plan
        deep = k > 10000  # several runs of K per byte pair, summed after; else 16- and 32-bit by Horner's rule
        assert ("runs of K per pair" in plan.reason) == deep, plan.reason
        assert ("Horner's rule" in plan.reason) == (np.dtype(dtype).itemsize <= 4 and not deep), plan.reason
        again = _poisoned(bt, m, n, dtype)
        backend.matmul(da, db, again, "auto")
        cp.testing.assert_array_equal(out, again)
        want = np.matmul(ha.astype(np.uint64), hb.astype(np.uint64)).astype(dtype)
        np.testing.assert_array_equal(cp.asnumpy(out), want, err_msg=f"{(bt, m, n, k)} {layout}")


def _operands_like(layout, ha, hb):
    """Device views of host operands ``ha`` (B,M,K) and ``hb`` (B,K,N) with ``layout``'s strides
    (the layouts of :func:`_operands` that keep the shape)."""
    if layout == "c":
        return cp.asarray(ha), cp.asarray(hb), ha, hb
    if layout == "at":
        return cp.asarray(ha.transpose(0, 2, 1)).transpose(0, 2, 1), cp.asarray(hb), ha, hb
    if layout == "bt":
        return cp.asarray(ha), cp.asarray(hb.transpose(0, 2, 1)).transpose(0, 2, 1), ha, hb
    if layout == "bcast":
        ha = np.broadcast_to(ha[:1], ha.shape)
        return cp.broadcast_to(cp.asarray(ha[:1]), ha.shape), cp.asarray(hb), ha, hb
    if layout == "neg":
        da, db = cp.asarray(ha[::-1, ::-1, :]), cp.asarray(hb[:, ::-1, ::-1])
        return da[::-1, ::-1, :], db[:, ::-1, ::-1], ha, hb
    raise AssertionError(layout)


def test_wgmma_bfloat16_through_torch(backend):
    """bfloat16 CUDA tensors (DLPack) through polymm.matmul, B as stored and transposed."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import polymm

    gen = torch.Generator(device="cuda").manual_seed(3)
    for bt, m, n, k in WG_SHAPES:
        a = torch.randn(bt, m, k, device="cuda", generator=gen).to(torch.bfloat16)
        for b in (
            torch.randn(bt, k, n, device="cuda", generator=gen).to(torch.bfloat16),
            torch.randn(bt, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2),
        ):
            got = polymm.matmul(a, b, backend=backend.name)
            assert got.dtype == torch.bfloat16 and got.shape == (bt, m, n)

            def host(t):
                return t.float().cpu().numpy().astype(ml_dtypes.bfloat16)

            assert_matches(host(got), host(a), host(b))


def test_torch_tensors_in_place_and_through_dlpack(backend):
    """PyTorch CUDA tensors are viewed in place when PyTorch's stream is CuPy's (lazy conjugates
    resolved first); work on another PyTorch stream goes through DLPack, which orders the
    streams; tensors that require grad go through polymm's autograd function (the result requires
    grad, its gradient is right)."""
    torch = pytest.importorskip("torch")
    import polymm

    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(2, 70, 40, dtype=torch.complex64, device="cuda", generator=gen)
    y = torch.randn(40, 30, dtype=torch.complex64, device="cuda", generator=gen)
    for a, b in ((x, y), (x.conj(), y), (x, -y.conj())):
        got = polymm.matmul(a, b, backend=backend.name)
        want = torch.matmul(
            a.resolve_conj().resolve_neg().cpu().to(torch.complex128),
            b.resolve_conj().resolve_neg().cpu().to(torch.complex128),
        )
        assert type(got) is torch.Tensor and got.dtype == torch.complex64
        assert torch.allclose(got.cpu().to(torch.complex128), want, rtol=1e-4, atol=1e-4)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        big = torch.randn(1024, 1024, device="cuda", generator=gen)
        got = polymm.matmul(big, big, backend=backend.name)
    side.synchronize()
    want = big.double().cpu() @ big.double().cpu()
    assert torch.allclose(got.double().cpu(), want, rtol=1e-3, atol=1e-2)
    leaf = big.clone().requires_grad_()
    got = polymm.matmul(leaf, big, backend=backend.name)
    assert got.requires_grad
    got.sum().backward()
    assert torch.allclose(leaf.grad.double(), big.double().sum(1).expand(1024, 1024), rtol=1e-3, atol=1e-2)


def test_torch_views_reach_every_path(backend, monkeypatch):
    """Tensors seen in place (:class:`polymm_cuda.arrays.ForeignView`) become CuPy arrays where a
    path needs one: 4-D batches (the general path), float16 operands ``mma.sync`` copies first
    (misaligned; Hopper's wgmma copies them by launches of its own plan, no CuPy array made), the
    image kernel; a CPU tensor beside a CUDA one is refused, naming both."""
    torch = pytest.importorskip("torch")
    import polymm
    from polymm_cuda.arrays import ForeignView

    made = []
    real = ForeignView.cupy
    monkeypatch.setattr(ForeignView, "cupy", lambda self: made.append(self.shape) or real(self))
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(2, 3, 40, 50, device="cuda", generator=gen)
    y = torch.randn(2, 3, 50, 30, device="cuda", generator=gen)
    flat = torch.randn(300 * 512 + 1, device="cuda", generator=gen).half()
    h = flat[1:].view(300, 512)  # two bytes past a 16-byte boundary: no TMA
    g = torch.randn(512, 600, device="cuda", generator=gen).half()
    for a, b, algorithm, tol in ((x, y, "auto", 1e-4), (x[0, 0], y[0, 0], "image", 1e-4), (h, g, "auto", 2e-2)):
        made.clear()
        got = polymm.matmul(a, b, backend=backend.name, algorithm=algorithm)
        want = a.double().cpu() @ b.double().cpu()
        assert type(got) is torch.Tensor and got.dtype == a.dtype and got.shape == want.shape
        assert torch.allclose(got.double().cpu(), want, rtol=tol, atol=tol * want.abs().max())
        if a is h and backend._compute_capability(0) == 90:
            assert not made, f"a CuPy view was made for wgmma's own copies: {made}"
            continue
        assert made, f"no CuPy view was made for {algorithm} {tuple(a.shape)} @ {tuple(b.shape)}"
    with pytest.raises(ValueError, match=r"different devices \(cuda:0 and cpu:0\)"):
        polymm.matmul(x[0, 0], y[0, 0].cpu(), backend=backend.name)


def test_torch_products_replay_their_plan(backend, monkeypatch):
    """A product of PyTorch tensors seen before replays its plan (``dispatch._REPLAYS``): the
    short path's views and operands are not made again, and every answer is right on new data;
    a layout, alignment, precision or algorithm not seen before plans again; lazily conjugated
    tensors take the whole short path."""
    torch = pytest.importorskip("torch")
    import polymm
    from polymm import dispatch

    planned = []
    real = dispatch._plain_device
    monkeypatch.setattr(dispatch, "_plain_device", lambda *a, **k: planned.append(1) or real(*a, **k))
    monkeypatch.setattr(dispatch, "_REPLAYS", {})
    gen = torch.Generator(device="cuda").manual_seed(11)

    def fresh(*shape, dtype=torch.float32):
        return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

    flat = fresh(300 * 512 + 1, dtype=torch.float16)
    cases = [  # (x1 maker, x2 maker, precision, algorithm, relative tolerance, replayed)
        (lambda: fresh(64, 80), lambda: fresh(80, 96), None, "auto", 1e-5, True),
        (lambda: fresh(1024, 512), lambda: fresh(512, 1024), None, "auto", 1e-5, True),
        (lambda: fresh(1024, 512), lambda: fresh(512, 1024), "tf32", "auto", 5e-3, True),
        (lambda: fresh(1024, 512), lambda: fresh(1024, 512).T, None, "auto", 1e-5, True),
        (lambda: fresh(1024, 512), lambda: fresh(512, 1024), None, "tiled", 1e-5, True),
        (lambda: fresh(2, 72, 40, dtype=torch.bfloat16), lambda: fresh(2, 40, 136, dtype=torch.bfloat16), None, "auto", 2e-2, True),
        (lambda: fresh(300, 512, dtype=torch.float16), lambda: fresh(512, 264, dtype=torch.float16), None, "auto", 2e-2, True),
        (lambda: fresh(3, 70, 50, dtype=torch.float64), lambda: fresh(50, dtype=torch.float64), None, "auto", 1e-12, True),
        (lambda: fresh(256, 256, dtype=torch.complex128), lambda: fresh(256, 256, dtype=torch.complex128), None, "auto", 1e-12, True),
        # two bytes past a 16-byte boundary: wgmma's own copies (a plan, replayed); mma.sync's repack (planned every call)
        (lambda: flat.normal_(generator=gen)[1:].view(300, 512), lambda: fresh(512, 264, dtype=torch.float16), None, "auto", 2e-2, backend._compute_capability(0) == 90),
    ]  # fmt: skip
    for make_a, make_b, precision, algorithm, tol, replayed in cases * 2:  # round two replays round one's plans
        planned.clear()
        for call in range(3):
            a, b = make_a(), make_b()
            got = polymm.matmul(a, b, backend=backend.name, algorithm=algorithm, precision=precision)
            want = a.cpu().to(torch.complex128 if a.is_complex() else torch.float64)
            want = want @ b.cpu().to(want.dtype)
            assert type(got) is torch.Tensor and got.dtype == a.dtype and got.shape == want.shape
            err = (got.cpu().to(want.dtype) - want).abs().max() / want.abs().max()
            assert err < tol, (tuple(a.shape), tuple(b.shape), a.dtype, precision, algorithm, call, float(err))
        what = f"{tuple(a.shape)} @ {tuple(b.shape)} {a.dtype} {precision} {algorithm}"
        assert len(planned) <= 1 if replayed else len(planned) == 3, f"{what}: planned {len(planned)} times"
    assert len(dispatch._REPLAYS) == sum(case[-1] for case in cases)
    x = fresh(64, 80, dtype=torch.complex64)
    y = fresh(80, 96, dtype=torch.complex64)
    for _ in range(2):
        planned.clear()
        got = polymm.matmul(x.conj(), y, backend=backend.name)
        assert planned, "a lazily conjugated tensor skipped the short path"
        want = x.conj().resolve_conj().cpu().to(torch.complex128) @ y.cpu().to(torch.complex128)
        assert torch.allclose(got.cpu().to(torch.complex128), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_products_replay_fuzzed(backend, monkeypatch, library):
    """Random products of CuPy arrays or PyTorch tensors (dtypes, batches, vectors, transposed
    and offset views, precision modes), each called three times on new values: the second and
    third calls replay the first's plan where the backend allows it (``dispatch._REPLAYS``), and
    every answer matches the oracle."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch") if library == "torch" else None
    import polymm
    from polymm import dispatch

    monkeypatch.setattr(dispatch, "_REPLAYS", {})
    planned = []
    real = dispatch._plain_device
    monkeypatch.setattr(dispatch, "_plain_device", lambda *a, **k: planned.append(1) or real(*a, **k))
    rng = np.random.default_rng(20261125)
    dtypes = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int32", "int8"]

    def device(values):
        """``values`` (NumPy, 1-D) on the GPU; bfloat16 travels as its 16-bit words."""
        words = values.view(np.int16) if values.dtype.name == "bfloat16" else values
        if torch is None:
            x = cp.asarray(words)
            return x.view(values.dtype) if words is not values else x
        x = torch.as_tensor(words, device="cuda")
        return x.view(torch.bfloat16) if words is not values else x

    def host(x):
        if torch is None:
            return cp.asnumpy(x.view(np.int16)).view(x.dtype) if x.dtype.name == "bfloat16" else cp.asnumpy(x)
        return x.float().cpu().numpy().astype(ml_dtypes.bfloat16) if x.dtype == torch.bfloat16 else x.cpu().numpy()

    def operand(shape, dtype, layout):
        """An operand of ``shape``: C order, the transpose of a C-order one, or one element past the
        start of a longer buffer."""
        size = int(np.prod(shape))
        flat = device(random_array(rng, (size + 1,), dtype))
        if layout == "offset":
            return flat[1:].reshape(shape)
        if layout == "transposed" and len(shape) >= 2:
            return flat[:size].reshape(*shape[:-2], shape[-1], shape[-2]).swapaxes(-1, -2)
        return flat[:size].reshape(shape)

    for case in range(150):
        dtype = str(rng.choice(dtypes))
        m, k, n = (int(x) for x in rng.integers(1, 300, 3))
        batch = tuple(int(x) for x in rng.integers(1, 4, int(rng.integers(0, 2))))
        s1 = (k,) if rng.random() < 0.1 else (*batch, m, k)
        s2 = (k,) if rng.random() < 0.1 and len(s1) > 1 else (*(batch if rng.random() < 0.7 else ()), k, n)
        l1, l2 = (str(rng.choice(["c", "c", "transposed", "offset"])) for _ in range(2))
        precision = "tf32" if dtype == "float32" and rng.random() < 0.3 else None
        planned.clear()
        kept = len(dispatch._REPLAYS)
        for call in range(3):
            a, b = operand(s1, dtype, l1), operand(s2, dtype, l2)
            got = polymm.matmul(a, b, backend=backend.name, precision=precision)
            assert type(got) is type(a) and got.dtype == a.dtype, (case, call)
            assert_matches(host(got), host(a), host(b), precision=precision)
            if call == 0:  # replayed from now on: a launch was kept, or one kept before served
                first, replayed = len(planned), len(dispatch._REPLAYS) > kept or not planned
        what = f"case {case}: {s1} {l1} @ {s2} {l2} {dtype} {precision}"
        assert len(planned) == (first if replayed else 3), f"{what}: planned {len(planned)} times"
    assert dispatch._REPLAYS  # (how many: the cases' layouts decide)


def test_int8_tensor_core_wraps_like_numpy(backend):
    """Full-range int8 operands with K = 4096: int32 sums far outside int8, truncated like NumPy."""
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (1, 256, 4096), dtype=np.int8)
    b = rng.integers(-128, 128, (1, 4096, 256), dtype=np.int8)
    out = _poisoned(1, 256, 256, "int8")
    backend.matmul(cp.asarray(a), cp.asarray(b), out, "auto")
    _check(out, a, b, np.int8)


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
@pytest.mark.parametrize(
    "view",
    ["transposed", "transposed-batch", "row-slice", "broadcast", "odd"],
)
def test_transposed_copy_equals_cupy(dtype, view):
    """The tiled transposed copy the tensor cores' repacking uses gives exactly CuPy's
    ``ascontiguousarray`` of the view, edges, batches, row strides and fallbacks included."""
    from polymm_cuda.transpose import transposed_copy

    rng = np.random.default_rng(11)
    base = cp.asarray(rng.standard_normal((3, 70, 100)) * 100).astype(dtype)
    v = {
        "transposed": base[0:1].transpose(0, 2, 1),
        "transposed-batch": base.transpose(0, 2, 1),
        "row-slice": base[:, 3:67, 5:95].transpose(0, 2, 1),  # rows 100 apart, offset start
        "broadcast": cp.broadcast_to(base[:1], (4, 70, 100)).transpose(0, 2, 1),  # batch stride 0
        "odd": base[:, ::2, :].transpose(0, 2, 1)[:, ::3],  # no unit stride: CuPy's copy
    }[view]
    out = transposed_copy(cp, v)
    assert out.flags.c_contiguous and out.shape == v.shape
    assert bool((out == cp.ascontiguousarray(v)).all())


def _dmma_entry(family: str, name: str) -> dict:
    """The device database's entry of the FP64 tensor-core kernels (all on ``NVIDIA GPU``), for a
    test to change for a while."""
    return devices.entry("NVIDIA GPU", family, name)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dmma_kernel(backend, layout, monkeypatch):
    """float64 on the FP64 tensor cores, every layout read in place, at tile edges and beyond one
    tile, with the MMA shape and tiles of one wave of tiles and (all shapes again) those of many
    (m16n8k8; on Hopper 64 x 128 tiles in m16n8k16), row-major operands swapped (C^T = B^T A^T) and, in one
    wave, not; deep products in slices of K (the last one shorter) summed in order."""
    monkeypatch.delenv("POLYMM_CUDA_DMMA", raising=False)
    monkeypatch.setitem(_dmma_entry("dmma", "in_auto"), "value", True)
    monkeypatch.setitem(_dmma_entry("dmma", "min_tiles"), "value", 1)  # the small shapes too: every edge of the tiles
    rng = np.random.default_rng(13)
    cc = backend._compute_capability(0)
    device = backend.device_info(0)
    dmma = settings_for(device)
    mmas = {f"-DDM_MMA={tensorcore.dmma_shape(device, tiles)}" for tiles in (1, 10**9)}  # one wave, many
    options, splits_seen = set(), set()
    shapes = TC_SHAPES + [
        (1, 300, 260, 130),
        (2, 64, 128, 16),
        (1, 65, 129, 17),
        (1, 40, 50, 3000),
        (1, 128, 96, 40000),
    ]
    # the second time round, one wave of tiles takes the MMA shape and tiles of many
    rounds = (
        (dmma("dmma", "shape_one_wave"), dmma("dmma", "wide_gain")),
        (dmma("dmma", "shape"), float("inf")),
    )
    for (one_wave, wide_gain), (bt, m, n, k) in itertools.product(rounds, shapes):
        monkeypatch.setitem(_dmma_entry("dmma", "shape_one_wave"), "value", one_wave)
        monkeypatch.setitem(_dmma_entry("dmma", "wide_gain"), "value", wide_gain)
        backend._plans.clear()
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, "float64")
        isz = 8
        sa = tuple(s // isz for s in da.strides)
        sb = tuple(s // isz for s in db.strides)
        splits = tensorcore.dmma_splits((bt, m, n, k), backend.planner_device(da))
        name, why = tensorcore.choose_dmma(np.dtype("float64"), device, (bt, m, n, k), sa, sb, splits)
        if cc >= tensorcore.MIN_CC and min(m, n) >= 32 and m * n * k >= 64**3 and k >= dmma("dmma", "min_k"):
            assert name is not None, why
        if name is not None:  # the MMA shape and copy widths the planner gives this call
            a_at, b_at = (da.data.ptr % 16 // isz, sa), (db.data.ptr % 16 // isz, sb)
            options.update(tensorcore.dmma_launch(name, device, (bt * splits, m, n, k), a_at, b_at)["options"])
            splits_seen.add(splits)
        out = _poisoned(bt, m, n, "float64")
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, "float64")
    backend._plans.clear()
    if cc >= tensorcore.MIN_CC:  # 16-byte copies of rows padded past an odd K; one element where unaligned
        expected = {"padded": "-DDM_VA=2", "padded-t": "-DDM_VB=2", "misaligned": "-DDM_VA=1", "slice": "-DDM_VA=1"}
        assert expected.get(layout, next(iter(options))) in options, options
        assert mmas <= options, options
        assert max(splits_seen) > 1, splits_seen
        if cc >= 90 and layout != "at":  # A along K: the wide tiles ran
            assert f"-DDM_WN={dmma('dmma', 'wide_tile')['bn'] // 2}" in options, options
            assert f"-DDM_MMA={dmma('dmma', 'wide_shape')}" in options, options
        if cc >= 90 and layout == "c":  # one wave of tiles or less: A along K and B along N as they are
            assert "-DDM_SWAP=0" in options, options


@pytest.mark.parametrize("shift", [0, 1])
def test_dmma_stores_pairs_wherever_c_lies(backend, shift, monkeypatch):
    """The float64 kernel stores C two values at a time where a row starts 16-byte aligned and one
    at a time elsewhere: C 8 bytes past an aligned address, odd and even N, both operand layouts
    that swap the MMA's roles and one that does not, an outer product of K = 32."""
    monkeypatch.setitem(_dmma_entry("dmma", "min_tiles"), "value", 1)
    rng = np.random.default_rng(37)
    for bt, m, n, k, layout in [
        (1, 128, 130, 64, "c"),
        (2, 96, 129, 32, "c"),
        (1, 130, 128, 48, "bt"),
        (1, 64, 200, 40, "at"),
    ]:
        backend._plans.clear()
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, "float64")
        out = cp.full(bt * m * n + shift, np.nan)[shift:].reshape(bt, m, n)
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, "float64")
        assert "FP64 tensor cores" in backend.last_plan.reason or backend._compute_capability(0) < tensorcore.MIN_CC


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("as_read", [True, False], ids=["as-read", "into-scratch"])
def test_complex128_realified(backend, layout, as_read, monkeypatch):
    """complex128 as one float64 product on the FP64 tensor cores, every layout, tile edges, a
    batch, a deep product in slices: B realified as the complex kernel reads it (Hopper:
    ``polymm_dmmaz_*``, A along K with any stride) or into scratch first (``realify``, A's K axis
    contiguous; forced here by raising ``DMMAZ_MIN_CC``); the rest stays on the complex kernels,
    never a wrong answer. Read as it is, in 64 x 64 tiles swapped (C^T = B^T A^T) and, the second
    time round, in the wide tiles wherever they may run (B along N), unswapped."""
    monkeypatch.setitem(devices.entry("any", "realify", "work"), "value", 0)  # the small shapes too
    monkeypatch.setitem(_dmma_entry("dmma", "min_tiles"), "value", 1)
    if not as_read:
        monkeypatch.setattr(tensorcore, "DMMAZ_MIN_CC", 1000)
    rng = np.random.default_rng(29)
    realified, options = 0, set()
    shapes = TC_SHAPES + [(1, 40, 50, 3000), (1, 300, 260, 130)]
    for wide, (bt, m, n, k) in itertools.product((False, True), shapes):
        monkeypatch.setitem(_dmma_entry("dmma", "wide_gain"), "value", float("inf") if wide else 0.0)
        monkeypatch.setitem(_dmma_entry("dmmaz", "wide_min_fill"), "value", 0.0)
        monkeypatch.setitem(_dmma_entry("dmmaz", "wide_max_waves"), "value", float("inf"))
        backend._plans.clear()
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, "complex128")
        out = _poisoned(bt, m, n, "complex128")
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, "complex128")
        reason = backend.last_plan.reason
        if backend.last_plan.external:
            options.update(backend.last_plan.external["options"])
        if as_read and "B realified as it is read" in reason:
            realified += 1
            assert abs(da.strides[2]) <= abs(da.strides[1]), (layout, da.strides)
        elif reason.startswith("complex128 as one float64 product"):
            packed = "A packed K-contiguous" in reason  # A not along K: dmmaz cannot read it
            assert packed or not as_read or backend._compute_capability(0) < tensorcore.DMMAZ_MIN_CC, reason
            realified += 1
            assert (da.strides[2] == 16) != packed, (layout, da.strides)
    cc = backend._compute_capability(0)
    if cc >= (tensorcore.DMMAZ_MIN_CC if as_read else tensorcore.MIN_CC) and layout in (
        "c",
        "bt",
        "bcast",
        "padded",
        "padded-t",
    ):
        assert realified >= 8, realified
        if as_read and cc >= 90 and layout in ("c", "bcast", "padded"):  # B along N: wide tiles, unswapped
            wide_bn = settings_for(backend.device_info(0))("dmma", "wide_tile")["bn"]
            assert {f"-DDM_WN={wide_bn // 2}", "-DDM_SWAP=0"} <= options, options


@pytest.mark.parametrize("layout", LAYOUTS)
def test_complex64_realified_onto_float32_tiles(backend, layout, monkeypatch):
    """complex64 as one float32 product on the SIMT tiles (``realify.simt``): B realified into
    scratch, A read in place as reals where its K axis is contiguous, every layout, tile edges, a
    batch and a deep product (split-K of the real product); other layouts stay complex, never a
    wrong answer."""
    monkeypatch.setitem(devices.entry("any", "realify", "work"), "value", 0)  # the small shapes too
    monkeypatch.delenv("POLYMM_PREFER")  # the SIMT tiles: no tensor-core family serves complex64
    rng = np.random.default_rng(31)
    realified = 0
    for bt, m, n, k in TC_SHAPES + [(1, 40, 50, 3000), (1, 300, 260, 130), (1, 64, 64, 8192)]:
        backend._plans.clear()
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, "complex64")
        out = _poisoned(bt, m, n, "complex64")
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, "complex64")
        if backend.last_plan.reason.startswith("complex64 as one float32 product"):
            realified += 1
            assert (da.strides[2] == 8) != ("A packed K-contiguous" in backend.last_plan.reason), (layout, da.strides)
    if layout in ("c", "bt", "bcast"):
        assert realified >= 4, realified


@pytest.mark.parametrize("dtype", ["complex128", "complex64", "float64"])
def test_operands_off_their_item_alignment(backend, dtype, monkeypatch):
    """Operands and C at addresses their item size does not divide (a complex128 view 8 bytes into
    a buffer) are copied aside, never read or written misaligned (the kernels read whole items,
    complex ones 16 bytes at a time, the FP64 tensor cores' included); through the library's
    front door too, twice (its short path never replays them)."""
    import polymm

    monkeypatch.setitem(devices.entry("any", "realify", "work"), "value", 0)  # complex128 on the FP64 tensor cores too
    monkeypatch.setitem(_dmma_entry("dmma", "min_tiles"), "value", 1)
    rng = np.random.default_rng(31)
    isz = np.dtype(dtype).itemsize

    def shifted(host):  # a device copy of ``host`` half an item past an aligned address
        x = cp.ndarray(host.shape, host.dtype, memptr=cp.cuda.alloc(host.nbytes + isz) + isz // 2)
        x.set(np.ascontiguousarray(host))
        assert x.data.ptr % isz
        return x

    for bt, m, n, k in [(1, 256, 256, 256), (2, 70, 130, 96)]:
        ha, hb = random_array(rng, (bt, m, k), dtype), random_array(rng, (bt, k, n), dtype)
        da, db = shifted(ha), shifted(hb)
        for out in (_poisoned(bt, m, n, dtype), shifted(np.full((bt, m, n), np.nan, dtype))):
            backend._plans.clear()
            backend.matmul(da, db, out, "auto")
            _check(out, ha, hb, dtype)
        for _ in range(2):
            _check(polymm.matmul(da, db, backend="cuda"), ha, hb, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [d.name for d in IMAGE_DTYPES])
def test_image_kernel(backend, dtype, layout):
    """The texture-object path for every dtype images hold, every layout (stacked batches and
    broadcast batches become one texture each)."""
    rng = np.random.default_rng(abs(hash((dtype, "image", layout))) % 2**32)
    for bt, m, n, k in SHAPES:
        da, db, ha, hb = _operands(rng, layout, bt, m, n, k, dtype)
        out = _poisoned(bt, m, n, dtype)
        backend.matmul(da, db, out, "image")
        _check(out, ha, hb, dtype)


def test_image_kernel_refuses_by_name(backend):
    with pytest.raises(TypeError, match="float64.*cuda:0"):
        backend.matmul(cp.ones((1, 3, 3)), cp.ones((1, 3, 3)), cp.empty((1, 3, 3)), "image")
    with pytest.raises(SizeLimitError, match=r"x1 needs a \d+ x 2 image of float32.*cuda:0"):
        backend.matmul(
            cp.ones((1, 2, 200000), np.float32),
            cp.ones((1, 200000, 2), np.float32),
            cp.empty((1, 2, 2), np.float32),
            "image",
        )


def test_copied_operands_are_never_planned_as_to_be_copied(monkeypatch):
    """A product whose operands "auto" copies into a tensor-core layout is planned again for the
    copies; operands that had that layout from the start may have stored "copy them" under the
    same shapes and strides. The copies' plan is looked up apart (a soak of 105,000 products on
    four threads failed 9 of them with a TypeError before)."""
    import dataclasses

    backend = CUDABackend()
    real = backend.plan

    def relayout(*args, **kwargs):  # every plan says its operands "want" a copy
        made, a_off, b_off = real(*args, **kwargs)
        return dataclasses.replace(made, relayout=True), a_off, b_off

    monkeypatch.setattr(backend, "plan", relayout)
    rng = np.random.default_rng(5)
    for _ in range(2):  # the second call finds both plans cached
        x1, x2 = random_array(rng, (1, 64, 48), "float16"), random_array(rng, (1, 48, 40), "float16")
        out = cp.full((1, 64, 40), cp.nan, cp.float16)
        backend.matmul(cp.asarray(x1), cp.asarray(x2), out, "auto")
        assert_matches(out.get(), x1, x2)


def test_a_result_larger_than_the_gpu_is_polymms_own_memory_error():
    """An outer product whose result needs more than the GPU has raises
    :class:`~polymm.backend.DeviceMemoryError` (a ``MemoryError``) naming the device and its
    free memory, not CuPy's ``OutOfMemoryError``; and the next product still runs."""
    import polymm
    from polymm.backend import DeviceMemoryError

    free, total = cp.cuda.runtime.memGetInfo()
    n = int((total // 4) ** 0.5) + 4096  # float32 n x n: more than the whole device
    a, b = cp.ones((n, 1), cp.float32), cp.ones((1, n), cp.float32)
    with pytest.raises(
        DeviceMemoryError, match=r"CUDA device \d+ could not allocate a buffer \([\d,]+ of [\d,]+ bytes free\)"
    ):
        polymm.matmul(a, b)
    small = polymm.matmul(cp.ones((3, 2), cp.float32), cp.ones((2, 4), cp.float32))
    assert cp.asnumpy(small).tolist() == [[2.0] * 4] * 3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ("c", "misaligned", "padded", "slice", "bcast"))
def test_matvec_runs_along_k(backend, dtype, layout):
    """The work-group matvec reads A's rows and B's column in runs of ``matvec.run_bytes`` (one
    raw-bits load each) where both are K-contiguous and K, the offsets and A's row stride are
    multiples of a run, element by element otherwise (an odd K, an offset of one element, three
    columns of a row-major B); values checked against the oracle, every dtype and layout."""
    rng = np.random.default_rng(37)
    for bt, n, k in [(1, 1, 1040), (3, 1, 1040), (1, 3, 1040), (1, 1, 1037)]:
        da, db, ha, hb = _operands(rng, layout, bt, 300, n, k, dtype)
        out = _poisoned(bt, 300, n, dtype)
        backend._plans.clear()
        backend.matmul(da, db, out, "auto")
        _check(out, ha, hb, dtype)
        ((*_, made),) = backend._plans.values()  # the one plan of this call
        (launch,) = [x for x in made.launches if x.kernel == "matvec"]
        runs = layout == "c" and launch.params.gvw > 1 and k % launch.params.gvw == 0
        if layout in ("c", "misaligned"):
            assert launch.flags.get("vec_a", False) is (runs and n == 1), launch
            assert launch.flags.get("vec_b", False) is (runs and n == 1), launch
