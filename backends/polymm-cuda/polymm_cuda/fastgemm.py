"""The CUDA-only fast path behind ``algorithm="auto"``: configurations as data.

``kernels/fastgemm.cu`` holds one templated register-blocked SIMT GEMM
(``polymm_fastgemm<Tag, BM, BN, BK, WM, WN, TM, TN, AK, VA, BNM, VB, MINB>``).
This module knows, without CuPy or a GPU (so CI can test it): the dtype tags,
the tile configurations, which instantiation suits given operands (layout,
alignment) and which configuration suits a problem size.  The backend turns
the chosen instantiation into a kernel through NVRTC with a name expression.

Why a CUDA-only kernel besides the shared ``tiled`` one: reaching cuBLAS-class
speed needs 16-byte vector loads through strides, warp tiling and register
double buffering tuned to CUDA's shared-memory banks, which the portable
source deliberately keeps simple.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

__all__ = [
    "TileConfig",
    "CONFIGS",
    "DTYPE_TAGS",
    "source",
    "name_expression",
    "Variant",
    "choose_variant",
    "choose_config",
    "explicit_instantiation",
]

# dtype name -> (tag struct in fastgemm.cu, storage C type, bytes of the compute type)
DTYPE_TAGS = {
    "bool": ("pm_b1", "unsigned char", 4),
    "int8": ("pm_i8", "signed char", 4),
    "int16": ("pm_i16", "short", 4),
    "int32": ("pm_i32", "int", 4),
    "int64": ("pm_i64t", "long long", 8),
    "uint8": ("pm_u8", "unsigned char", 4),
    "uint16": ("pm_u16", "unsigned short", 4),
    "uint32": ("pm_u32", "unsigned int", 4),
    "uint64": ("pm_u64t", "unsigned long long", 8),
    "float16": ("pm_f16", "unsigned short", 4),
    "float32": ("pm_f32", "float", 4),
    "float64": ("pm_f64", "double", 8),
    "complex64": ("pm_z64", "pm_c64", 8),
    "complex128": ("pm_z128", "pm_c128", 16),
}


@dataclass(frozen=True)
class TileConfig:
    """One block shape: BM x BN tile per block, BK-deep K slices, WM x WN per
    warp, TM x TN per thread; ``minb`` blocks per SM promised to the compiler
    (``__launch_bounds__``, caps registers at 65536 / (threads * minb));
    ``rate``: relative per-SM throughput used by :func:`choose_config`."""

    name: str
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    tm: int
    tn: int
    minb: int
    rate: float = 1.0
    stages: int = 2  # shared-memory stages when loading with cp.async
    occ: int = 2  # resident blocks per SM that keep it busy (the selection model)
    prefer_async: bool = False  # measured faster with cp.async even for vector loads

    @property
    def threads(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn) * 32

    def smem_bytes(self, compute_size: int, ak: bool, bnm: bool, stages: int = 2) -> int:
        pad = 1 if compute_size >= 16 else 16 // compute_size
        lda = self.bm + (pad if ak else 0)
        ldb = self.bn + (0 if bnm else pad)
        return stages * self.bk * (lda + ldb) * compute_size

    def check(self, widths=(1, 2, 4)) -> None:
        """Raise ``ValueError`` unless the kernel's static assertions hold for these vector widths."""
        lm, ln = self.wm // self.tm, self.wn // self.tn
        ok = (
            self.bm % self.wm == 0
            and self.bn % self.wn == 0
            and lm * ln == 32
            and self.tm % 4 == 0
            and self.tn % 4 == 0
        )
        nt = self.threads
        for v in widths:
            ok &= (self.bm * self.bk // v) % nt == 0 and (self.bk * self.bn // v) % nt == 0
            ok &= nt % (self.bk // v) == 0 and nt % (self.bm // v) == 0 and nt % (self.bn // v) == 0
        if not ok:
            raise ValueError(f"inconsistent tile configuration {self}")


#: The configurations, by compute-type size (bytes).  Chosen per problem by
#: :func:`choose_config`; all are instantiated by the CI compile test.
CONFIGS = {
    4: (
        TileConfig("128x128x16", 128, 128, 16, 64, 32, 8, 8, 2, rate=1.0, stages=3, occ=2),
        TileConfig("128x256x16", 128, 256, 16, 64, 64, 8, 16, 1, rate=1.05, stages=3, occ=1, prefer_async=True),
        TileConfig("256x128x8", 256, 128, 8, 64, 64, 16, 8, 1, rate=1.05, stages=4, occ=1, prefer_async=True),
        TileConfig("128x64x8", 128, 64, 8, 64, 32, 8, 8, 4, rate=0.95, stages=3, occ=2),
        TileConfig("128x64x16", 128, 64, 16, 64, 32, 8, 8, 4, rate=0.95, stages=3, occ=1, prefer_async=True),
        TileConfig("64x64x8w", 64, 64, 8, 64, 32, 8, 8, 8, rate=0.92, stages=3, occ=2),
    ),
    8: (
        TileConfig("128x128x8", 128, 128, 8, 64, 32, 8, 8, 1, rate=1.0, stages=3, occ=1),
        TileConfig("64x64x8w", 64, 64, 8, 64, 32, 8, 8, 4, rate=1.02, stages=3, occ=1, prefer_async=True),
        TileConfig("64x64x8", 64, 64, 8, 32, 32, 4, 8, 4, rate=0.8, stages=3, occ=1),
        TileConfig("32x64x8", 32, 64, 8, 32, 16, 4, 4, 8, rate=0.6, stages=3, occ=1),
    ),
    16: (
        TileConfig("64x64x8", 64, 64, 8, 32, 16, 4, 4, 2, rate=1.0, stages=2, occ=1),
        TileConfig("32x64x8", 32, 64, 8, 32, 16, 4, 4, 4, rate=0.8, stages=2, occ=1),
    ),
}
#: Load through cp.async where the dtype allows (else registers stage the tiles).
USE_ASYNC = True
CONFIG_BY_NAME = {(size, c.name): c for size, cs in CONFIGS.items() for c in cs}
#: What "auto" may pick from, by compute size and load path: "noasync" (the
#: dtype must be converted on its way to shared memory, so registers stage
#: it), "vector" (both operands load 16-byte vectors), "scalar" (some operand
#: is read element by element).  Lists fitted to H100 measurements (RESULTS.md).
AUTO_CONFIGS = {
    (4, "noasync"): ("128x128x16", "128x64x8", "64x64x8w"),
    (4, "vector"): ("128x256x16", "128x64x16", "64x64x8w"),
    (4, "scalar"): ("256x128x8", "128x64x16", "64x64x8w"),
    (8, "vector"): ("64x64x8w", "32x64x8"),
    (8, "scalar"): ("64x64x8w", "32x64x8"),
    (16, "vector"): ("64x64x8", "32x64x8"),
    (16, "scalar"): ("64x64x8", "32x64x8"),
}


def source() -> str:
    """The template source (no includes: NVRTC and nvcc compile it as is)."""
    return resources.files(__package__).joinpath("kernels/fastgemm.cu").read_text()


@dataclass(frozen=True)
class Variant:
    """One instantiation: dtype, tile configuration and operand access pattern.

    ``ak``: A is read along k (lanes walk k; stored transposed in shared
    memory), else along m.  ``va``: elements per vector load of A (1 = scalar,
    any stride).  ``bnm``/``vb`` likewise for B (along n, else along k).
    """

    dtype: str
    config: TileConfig
    ak: bool
    va: int
    bnm: bool
    vb: int
    cp_async: bool = False

    @property
    def compute_size(self) -> int:
        return DTYPE_TAGS[self.dtype][2]

    @property
    def stages(self) -> int:
        return self.config.stages if self.cp_async else 2

    @property
    def smem_bytes(self) -> int:
        return self.config.smem_bytes(self.compute_size, self.ak, self.bnm, self.stages)

    @property
    def name_expression(self) -> str:
        return name_expression(self)


def _b(x: bool) -> str:
    return "true" if x else "false"


def name_expression(v: Variant) -> str:
    """The template-id NVRTC lowers (must match the source's parameter order)."""
    c = v.config
    tag = DTYPE_TAGS[v.dtype][0]
    return (
        f"polymm_fastgemm<{tag}, {c.bm}, {c.bn}, {c.bk}, {c.wm}, {c.wn}, {c.tm}, {c.tn}, "
        f"{_b(v.ak)}, {v.va}, {_b(v.bnm)}, {v.vb}, {c.minb}, {v.stages}, {_b(v.cp_async)}>"
    )


def explicit_instantiation(v: Variant) -> str:
    """An explicit instantiation statement (what nvcc needs to compile ``v`` offline)."""
    s = DTYPE_TAGS[v.dtype][1]
    i = "long long"
    args = f"int, int, int, const {s}*, {i}, {i}, {i}, {i}, const {s}*, {i}, {i}, {i}, {i}, {s}*, {i}"
    return f"template __global__ void {name_expression(v)}({args});\n"


#: dtypes whose shared-memory (compute) representation is their stored bits,
#: so tiles can be copied with cp.async (no conversion on the way).
ASYNC_DTYPES = frozenset({"float32", "float64", "int32", "uint32", "int64", "uint64", "complex64", "complex128"})


def vector_width(dtype: np.dtype) -> int:
    """Elements per 16-byte-class vector load: 4 up to 4-byte types, 2 for 8, 1 for 16."""
    return max(1, min(4, 16 // np.dtype(dtype).itemsize))


def _aligned(ptr_bytes: int, itemsize: int, w: int, *strides: int) -> bool:
    return ptr_bytes % (w * itemsize) == 0 and all(s % w == 0 for s in strides)


def access_pattern(dtype: np.dtype, a_ptr: int, a_strides, b_ptr: int, b_strides, shape) -> tuple[bool, int, bool, int]:
    """``(ak, va, bnm, vb)`` for operands at byte addresses ``a_ptr``/``b_ptr``.

    ``a_strides = (sb, sm, sk)``, ``b_strides = (sb, sk, sn)`` in elements;
    ``shape = (B, M, N, K)``.  Strides of length-1 axes never matter; a vector
    path needs unit inner stride and every vector start aligned (base pointer,
    the other strides multiples of the width).
    """
    bt, m, n, k = shape
    itemsize = np.dtype(dtype).itemsize
    w = vector_width(dtype)
    a_sb, a_sm, a_sk = a_strides
    b_sb, b_sk, b_sn = b_strides
    if bt == 1:
        a_sb = b_sb = 0
    if m == 1:
        a_sm = 0
    if k == 1:
        a_sk = b_sk = 0
    if n == 1:
        b_sn = 0
    # A: along k when k is the unit (or smaller) stride, else along m.
    if a_sk == 1 or (a_sm != 1 and (a_sk == 0 or (a_sm != 0 and abs(a_sk) <= abs(a_sm)))):
        ak = True
        va = w if (w > 1 and a_sk == 1 and _aligned(a_ptr, itemsize, w, a_sm, a_sb)) else 1
    else:
        ak = False
        va = w if (w > 1 and a_sm == 1 and _aligned(a_ptr, itemsize, w, a_sk, a_sb)) else 1
    if b_sn == 1 or (b_sk != 1 and (b_sn == 0 or (b_sk != 0 and abs(b_sn) <= abs(b_sk)))):
        bnm = True
        vb = w if (w > 1 and b_sn == 1 and _aligned(b_ptr, itemsize, w, b_sk, b_sb)) else 1
    else:
        bnm = False
        vb = w if (w > 1 and b_sk == 1 and _aligned(b_ptr, itemsize, w, b_sn, b_sb)) else 1
    return ak, va, bnm, vb


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def choose_config(compute_size: int, batch: int, m: int, n: int, sms: int, path: str = "vector") -> TileConfig:
    """The configuration with the best modelled throughput for this problem.

    Model (fitted to H100 measurements, see RESULTS.md): rate x (useful
    fraction of the tiles) x (how busy the SMs are: blocks over ``occ`` per
    SM, with the last wave's emptiness counted).  Runs once per new shape.
    """
    names = AUTO_CONFIGS.get((compute_size, path)) or AUTO_CONFIGS[(compute_size, "vector")]
    best, best_score = None, -1.0
    for name in names:
        c = CONFIG_BY_NAME[(compute_size, name)]
        tm, tn = _cdiv(m, c.bm), _cdiv(n, c.bn)
        tiles = batch * tm * tn
        fill = (m * n) / (tm * c.bm * tn * c.bn)
        slots = sms * c.occ
        busy = tiles / (_cdiv(tiles, slots) * slots)
        score = c.rate * fill * busy
        if score > best_score + 1e-9:
            best, best_score = c, score
    return best


def choose_variant(
    dtype: np.dtype,
    a_ptr: int,
    a_strides,
    b_ptr: int,
    b_strides,
    shape,
    sms: int,
    config: TileConfig | None = None,
    cp_async: bool | None = None,
) -> Variant:
    """The instantiation "auto" runs for these operands."""
    name = np.dtype(dtype).name
    size = DTYPE_TAGS[name][2]
    bt, m, n, _ = shape
    async_ok = USE_ASYNC and name in ASYNC_DTYPES
    ak, va, bnm, vb = access_pattern(dtype, a_ptr, a_strides, b_ptr, b_strides, shape)
    path = "noasync" if not async_ok else ("vector" if va > 1 and vb > 1 else "scalar")
    cfg = config or choose_config(size, bt, m, n, sms, path)
    if not async_ok:
        cp_async = False
    elif cp_async is None:
        # Measured (RESULTS.md): cp.async (no staging registers, 3-4 stages)
        # wins when some operand is read element by element and for the tiles
        # marked prefer_async; register staging otherwise.
        cp_async = va == 1 or vb == 1 or cfg.prefer_async
    if cp_async:
        # cp.async stores what it copies unchanged, so an operand that is
        # transposed into shared memory is copied element-wise; lanes then
        # walk the unit-stride axis (coalesced), not 16-byte vectors.
        if ak:
            va = 1
        if not bnm:
            vb = 1
    return Variant(name, cfg, ak, va, bnm, vb, cp_async)


def all_variants(dtype_name: str, exhaustive: bool = False):
    """Instantiations to compile-check for one dtype (the CI compile test).

    Every configuration with its usual access patterns, plus every access
    pattern x load mode for the first configuration: each code path of the
    template meets every dtype and every tile shape at least once.
    ``exhaustive`` gives the full product instead.
    """
    size = DTYPE_TAGS[dtype_name][2]
    w = vector_width(np.dtype(dtype_name))
    widths = sorted({1, w})
    modes = (False, True) if dtype_name in ASYNC_DTYPES else (False,)
    seen = set()

    def emit(v):
        if v.name_expression not in seen:  # configs may differ only in stages
            seen.add(v.name_expression)
            yield v

    for i, c in enumerate(CONFIGS[size]):
        if exhaustive or i == 0:
            for ak in (True, False):
                for va in widths:
                    for bnm in (True, False):
                        for vb in widths:
                            for mode in modes:
                                yield from emit(Variant(dtype_name, c, ak, va, bnm, vb, mode))
        else:
            yield from emit(Variant(dtype_name, c, True, w, True, w, False))
            yield from emit(Variant(dtype_name, c, True, 1, True, w, modes[-1]))
            yield from emit(Variant(dtype_name, c, True, 1, True, 1, modes[-1]))
            yield from emit(Variant(dtype_name, c, False, w, False, w, modes[-1]))
