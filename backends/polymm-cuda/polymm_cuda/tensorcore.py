"""The tensor-core path of ``"auto"``: when it applies, and how it is launched.

``kernels/tensorcore.cu`` multiplies float16 and bfloat16 matrices on the tensor cores
(``mma.sync``; float32 accumulation, what the contract asks of float16) and int8 and uint8 ones
(int32 accumulation, whose low byte is NumPy's wrapped result) in 128-row tiles;
``kernels/dmma.cu`` multiplies float64 matrices on the FP64 tensor cores (``mma.sync`` m16n8k8 on
Hopper, m8n8k4 before).
It copies 16-byte chunks straight from global memory, so it needs operands laid out for that;
:func:`choose` says which kernel reads a call's layout or which rule it breaks; :mod:`polymm_cuda.families`
makes these rules (and :mod:`polymm_cuda.wgmma`'s) candidates of the shared planner, which weighs them
against its SIMT kernels once per plan, including running the tensor cores on operands copied
first (:func:`repack`), which the backend then does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from polymm.kernels import GRID_ROWS
from polymm.kernels.devices import settings_for

from . import wgmma
from .transpose import transposed_copy

__all__ = [
    "LAYOUTS",
    "MIN_CC",
    "Params",
    "mma_sync_params",
    "mma_sync_candidates",
    "dmma_in_auto",
    "tf32_min_work",
    "choose",
    "layout_choice",
    "choose_dmma",
    "complex_wide_splits",
    "dmma_splits",
    "external_launch",
    "shape_rule",
    "repack",
]

#: dtype name -> the B layouts its kernels read: "kn" (B unit-stride along N, as stored) and "nk"
#: (unit-stride along K: B^T row-major). 8-bit MMA fragments need K-contiguous B.
LAYOUTS = {"float16": ("kn", "nk"), "bfloat16": ("kn", "nk"), "int8": ("nk",), "uint8": ("nk",)}
BM, THREADS = 128, 256  # kernels/tensorcore.cu's TC_BM and TC_THREADS (its tile's rows, its block)
#: ``mma.sync.m16n8k16`` with float32 accumulation, ``ldmatrix`` and ``cp.async``: Ampere and later.
MIN_CC = 80


@dataclass(frozen=True)
class Params:
    """The kernel's compile-time tile parameters (``-D`` macros of the source).

    ``wn``: warp tile columns (the block tile is 128 x 4*wn); ``stages``: K slices in flight;
    ``group_m``: blocks ordered in groups of that many tile rows (0: a plain 2-D grid).
    """

    wn: int = 32
    stages: int = 3
    group_m: int = 0

    @property
    def bn(self) -> int:
        return 4 * self.wn

    def options(self) -> tuple[str, ...]:
        return (f"-DTC_WN={self.wn}", f"-DTC_STAGES={self.stages}", f"-DTC_GROUP_M={self.group_m}")

    def smem_bytes(self) -> int:
        return self.stages * (BM + self.bn) * 64  # 64 bytes of K per slice

    def geometry(self, shape, batch_limit: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block): one block per tile of C, the batch along z."""
        bt, m, n, _ = shape
        tiles_m, tiles_n = -(-m // BM), -(-n // self.bn)
        z = min(bt, batch_limit)
        grid = (tiles_m * tiles_n, 1, z) if self.group_m else (tiles_n, tiles_m, z)
        return grid, (THREADS, 1, 1)


def mma_sync_params(device) -> Params:
    """The tile ``"auto"`` runs ``kernels/tensorcore.cu`` in on ``device`` (``mma-sync.params``)."""
    return Params(**settings_for(device)("mma-sync", "params"))


def mma_sync_candidates(device) -> tuple[Params, ...]:
    """What ``benchmarks/tune_tensorcore.py`` times on ``device``: every combination of the
    values in ``mma-sync.candidates``."""
    c = settings_for(device)("mma-sync", "candidates")
    return tuple(Params(wn, st, g) for wn in c["wn"] for st in c["stages"] for g in c["group_m"])


def dmma_in_auto(device) -> bool:
    """Whether ``"auto"`` takes the FP64 tensor-core kernels on ``device``: ``dmma.in_auto``,
    unless ``POLYMM_CUDA_DMMA`` says (``0``: off; any other value: on)."""
    forced = os.environ.get("POLYMM_CUDA_DMMA")
    return forced != "0" if forced else bool(settings_for(device)("dmma", "in_auto"))


# The float64 kernels' compile-time tile, kernels/dmma.cu's defaults (DM_WARPS_M x DM_WM by
# DM_WARPS_N x DM_WN, DM_STAGES, DM_MINB, which no option overrides for them): 64 x 64 tiles of
# 2 x 2 warps, 4 stages of 16-deep K slices, 3 blocks per SM. H100, 2026-11-25, whole calls
# against cuBLAS DGEMM: 1024 / 2048 / 4096 squares 0.91x / 0.86x / 0.92x (0.57x / 0.62x / 0.64x at
# 624ff06); ``benchmarks/h100-2026-11-25/`` (git show 7089882:...) has the sweeps behind them.
# The tuning read from the device database: the ``dmma`` and ``dmmaz`` families (MMA shapes per
# wave, the wide tiles, swapping, the smallest products and K slices).
DMMA_BM, DMMA_BN, DMMA_THREADS, DMMA_STAGES = 64, 64, 128, 4
DMMA_BLOCKS_PER_SM = 3  # kernels/dmma.cu's DM_MINB
#: ``-DDM_MMA`` values: the FP64 MMA instructions (m8n8k4 from sm_80; the others sm_90 and later).
DMMA_SHAPE_NAMES = {884: "m8n8k4", 1684: "m16n8k4", 1688: "m16n8k8", 16816: "m16n8k16"}
#: complex128 runs on the float64 kernel as one real product (``kernels/realify.c`` says how) from
#: this compute capability on: ``polymm_dmmaz_*`` read B's realified 2 x 2 blocks from B itself,
#: which takes the Hopper MMA shapes; before, the shared planner writes them out first
#: (``realify``, from ``realify.work`` multiply-adds per matrix on). Reading them costs no scratch,
#: so small products take the float64 kernel's own limits (tiles, K) alone. H100, 2026-11-26, whole
#: calls against ZGEMM (``benchmarks/h100-2026-11-26/probe28.log``, ``probe29.log``, git show
#: 7089882:...), SIMT -> polymm_dmmaz: 256 cubed 35.2 -> 31.9 us (34.0), 288 46.5 -> 34.6 (35.6),
#: 320 55.9 -> 35.7 (35.4), 1024 x 64 cubed 233 -> 90 (111), 64 x 128 cubed 125 -> 44 (62), 16 x
#: 200 cubed 171 -> 54 (62).
DMMAZ_MIN_CC = 90


def is_complex_dmma(name: str) -> bool:
    """Whether float64 kernel ``name`` computes a complex128 product (``polymm_dmmaz_*``)."""
    return name.startswith("polymm_dmmaz_")


def fp64_shape(dtype: np.dtype, shape):
    """The float64 product the FP64 tensor cores compute for a ``dtype`` product of ``shape``:
    complex128's (batch, M, N, K) is (batch, M, 2N, 2K) in reals."""
    bt, m, n, k = shape
    return (bt, m, 2 * n, 2 * k) if dtype.name == "complex128" else shape


def dmma_smem(name: str, bn: int = DMMA_BN, stages: int = DMMA_STAGES) -> int:
    """Bytes of shared memory of float64 kernel ``name`` (``kernels/dmma.cu``'s ``DmLayout``s) in
    tiles ``bn`` wide: per stage, A and B in K rows of 16 doubles or in rows of 64 along M (``bn``
    along N), each padded by 4 doubles (a complex B: 8 complex rows of ``bn`` reals, or ``bn / 2``
    complex columns of 16 reals)."""
    a = DMMA_BM * (16 + 4) if "_ak_" in name else 16 * (DMMA_BM + 4)
    rows = 8 if is_complex_dmma(name) else 16
    outer = bn // 2 if is_complex_dmma(name) else bn
    b = rows * (bn + 4) if name.endswith("_bn") else outer * (16 + 4)
    return stages * (a + b) * 8


def dmma_one_wave(sms: int, tiles: int) -> bool:
    """Whether ``tiles`` 64 x 64 tiles of the float64 kernel run in one wave on ``sms`` SMs."""
    return tiles <= DMMA_BLOCKS_PER_SM * sms


def dmma_shape(device, tiles: int) -> int:
    """The float64 kernel's MMA shape (``-DDM_MMA``) for ``tiles`` 64 x 64 tiles on ``device``:
    m8n8k4 before Hopper; on Hopper ``dmma.shape_one_wave`` within one wave, ``dmma.shape`` beyond."""
    if device.cc < 90:
        return 884
    one_wave = dmma_one_wave(device.compute_units, tiles)
    return settings_for(device)("dmma", "shape_one_wave" if one_wave else "shape")


def dmma_wide(name: str, device, shape) -> bool:
    """Whether float64 kernel ``name`` runs a product of ``shape`` (batch, M, N, K) on ``device``
    in the wide tiles (``dmma.wide_gain`` says when; for complex128 the ``dmmaz`` family too).

    Not :func:`polymm.kernels.planner.wave_is_full` (does one wave fill the SMs): this weighs how
    well two tilings fill their last waves."""
    settings = settings_for(device)
    bt, m, n, k = fp64_shape(np.dtype("complex128" if is_complex_dmma(name) else "float64"), shape)
    if device.cc < 90 or "_am_" in name or k < settings("dmma", "wide_min_k"):
        return False
    sms = device.compute_units

    def fill(bn: int, blocks_per_sm: int) -> float:  # of the waves the tiles take
        tiles, slots = bt * -(-m // DMMA_BM) * -(-n // bn), blocks_per_sm * sms
        return tiles / (-(-tiles // slots) * slots)

    wide = settings("dmma", "wide_tile")
    wide_fill = fill(wide["bn"], wide["blocks_per_sm"])
    if is_complex_dmma(name):  # unswapped in the wide tiles, where its 64 x 64 tiles take few waves
        waves = bt * -(-m // DMMA_BM) * -(-n // DMMA_BN) / (DMMA_BLOCKS_PER_SM * sms)
        ok = settings("dmmaz", "wide_unswapped") and name.endswith("_bn")
        ok = ok and waves <= settings("dmmaz", "wide_max_waves")
        if not (ok and wide_fill >= settings("dmmaz", "wide_min_fill")):
            return False
    return settings("dmma", "wide_gain") * wide_fill > fill(DMMA_BN, DMMA_BLOCKS_PER_SM)


def dmma_tile(device, wide: bool) -> tuple[int, int, tuple[str, ...]]:
    """(tile width, stages, the kernel's -D options for them) of the 64 x 64 tiles or the wide
    ones (``dmma.wide_tile``) on ``device``."""
    if not wide:
        return DMMA_BN, DMMA_STAGES, ()
    tile = settings_for(device)("dmma", "wide_tile")
    options = (
        f"-DDM_WN={tile['bn'] // 2}",
        f"-DDM_STAGES={tile['stages']}",
        f"-DDM_MINB={tile['blocks_per_sm']}",
    )
    return tile["bn"], tile["stages"], options


def dmma_launch(name: str, device, shape, a, b) -> dict:
    """The planner's description of a float64 kernel's launch on ``device``: its MMA shape
    (:func:`dmma_shape`), tile (:func:`dmma_wide`) and whether it swaps
    (``dmma.unswapped_one_wave``); 16-byte copies of an operand
    (``-DDM_VA=2`` / ``-DDM_VB=2``) where its unit-stride axis starts 16-byte aligned in every row
    and batch entry (``a``/``b`` = (element offset from a 16-byte aligned base, strides)), one
    element per copy otherwise; a 1-D grid of tiles (the kernel orders them), the batch along z."""
    (a_off, sa), (b_off, sb) = a, b
    settings = settings_for(device)
    cplx = is_complex_dmma(name)
    bt, m, n, _ = shape
    tiles = -(-m // DMMA_BM) * -(-n * (2 if cplx else 1) // DMMA_BN)
    mma = dmma_shape(device, bt * tiles)

    def pairs(off, strides, unit_axis):
        other = 3 - unit_axis
        return strides[unit_axis] == 1 and off % 2 == 0 and strides[other] % 2 == 0 and strides[0] % 2 == 0

    # a complex kernel copies a complex (16 bytes) at a time, whatever these options say
    va = 2 if cplx or pairs(a_off, sa, 2 if "_ak_" in name else 1) else 1
    vb = 2 if cplx or pairs(b_off, sb, 2 if name.endswith("_bn") else 1) else 1
    wide = dmma_wide(name, device, shape)
    bn, stages, tile_options = dmma_tile(device, wide)
    if wide:
        mma = settings("dmmaz" if cplx else "dmma", "wide_shape")
    options = (f"-DDM_MMA={mma}", f"-DDM_VA={va}", f"-DDM_VB={vb}", *tile_options)
    one_wave = device.cc >= 90 and dmma_one_wave(device.compute_units, bt * tiles)
    if name == "polymm_dmma_ak_bn" and one_wave and settings("dmma", "unswapped_one_wave"):
        options += ("-DDM_SWAP=0",)
    if cplx and wide:  # dmmaz.wide_unswapped
        options += ("-DDM_SWAP=0",)
    grid = (-(-m // DMMA_BM) * -(-n * (2 if cplx else 1) // bn), 1, bt)
    block = (DMMA_THREADS, 1, 1)
    # k_step: split-K's slices start 16-byte aligned wherever the operands do (and on a K slice)
    return {
        "source": "dmma",
        "options": options,
        "grid": grid,
        "block": block,
        "smem": dmma_smem(name, bn, stages),
        "k_step": 8 if cplx else 16,
    }


def dmma_splits(shape, device, wide: bool = False) -> int:
    """Slices of K for a float64 product on the FP64 tensor cores of ``device`` (1: none): deep
    products (``split-k.deep_k``) in slices of ``dmma.slice_min`` or more, shallow ones on few
    tiles (``dmma.shallow_most_wave``) of ``dmma.shallow_slice_min``; as many as fill one wave
    (of 64 x 64 tiles, or with ``wide`` of the deep products' wide ones, ``dmma.wide_tile``),
    their partial sums at most ``split-k.slices_bytes``."""
    settings = settings_for(device)
    bt, m, n, k = shape
    deep = k >= settings("split-k", "deep_k") * max(m, n)
    slice_min = settings("dmma", "slice_min" if deep else "shallow_slice_min")
    if bt > 1 or min(m, n) < 1 or not slice_min or (wide and not deep):
        return 1
    tile = settings("dmma", "wide_tile") if wide else {"bn": DMMA_BN, "blocks_per_sm": DMMA_BLOCKS_PER_SM}
    tiles = -(-m // DMMA_BM) * -(-n // tile["bn"])
    slots = tile["blocks_per_sm"] * device.compute_units  # one wave of tiles
    if not deep and not settings("dmma", "min_tiles") <= tiles <= slots * settings("dmma", "shallow_most_wave"):
        return 1  # fewer tiles stay on the SIMT kernel (a 256 square: 9.2 us against 9.4 in slices)
    splits = min(slots // tiles, k // slice_min, settings("split-k", "slices_bytes") // (m * n * 8))
    return 1 << (splits.bit_length() - 1) if splits >= 2 else 1


#: The dtypes of the FP64 tensor-core kernels (complex128 as one float64 product).
FP64_DTYPES = ("float64", "complex128")

#: Why an operand with no unit stride goes to the FP64 tensor cores only once copied.
SCATTERED_WHY = (
    "an operand has no unit stride on its two matrix axes: the FP64 tensor cores read it at a fraction of their "
    "rate (complex128 2048 squares with every other column, H200 2026-11-28: 3.24 ms in place, 1.40 ms copied "
    "first); relayout copies it"
)


def scattered(strides) -> bool:
    """Whether an operand with these (batch, row, column) element strides has no unit stride on its
    two matrix axes (every other column, say): no copy of the FP64 kernels coalesces on it."""
    return abs(strides[1]) != 1 and abs(strides[2]) != 1


def complex_wide_splits(device, shape, sa, sb, splits: int) -> tuple[int, str, str] | None:
    """A deep complex128 product (``shape`` in complex elements, ``splits`` slices of K counted
    against 64 x 64 tiles) in as many slices as fill one wave of the wide tiles: ``(splits, kernel,
    why)``, or None where those tiles would not run it or a slice would be shallower than twice
    ``dmma.slice_min`` (H200: 256 x 65536 x 256 in 8 slices 873 us, in 16 of the wide tiles 678,
    ZGEMM 595; 64 x 65536 x 64 in 256 slices of 512 reals 86 us against 82 in 128)."""
    complex128 = np.dtype("complex128")
    real = fp64_shape(complex128, shape)
    wide = dmma_splits(real, device, wide=True)
    if wide <= splits or real[3] // wide < 2 * settings_for(device)("dmma", "slice_min"):
        return None
    name, why = choose_dmma(complex128, device, shape, sa, sb, wide)
    bt, m, n, k = shape
    if name is None or not dmma_wide(name, device, (bt * wide, m, n, k)):
        return None
    return wide, name, why


def choose_dmma(dtype: np.dtype, device, shape, sa, sb, splits: int = 1) -> tuple[str | None, str]:
    """``(kernel name, why)`` for float64 on the FP64 tensor cores (exact IEEE double FMAs), or None;
    ``splits``: slices of K (:func:`dmma_splits` of :func:`fp64_shape`), each a product of its own.

    Any strides are read in place; the name says along which axis the threads walk each operand
    (its smaller stride), so the copies coalesce. complex128 takes the same rules on the real
    product it becomes (:func:`fp64_shape`), A along K.
    """
    if dtype.name not in ("float64", "complex128"):
        return None, "the FP64 tensor cores serve float64 (and complex128 as float64)"
    cc, settings = device.cc, settings_for(device)
    if cc < MIN_CC:
        return None, f"compute capability {cc / 10:.1f} < {MIN_CC / 10:.1f}"
    cplx = dtype.name == "complex128"
    if cplx:
        if cc < DMMAZ_MIN_CC:
            return None, f"complex128 reads B as real blocks from compute capability {DMMAZ_MIN_CC / 10:.1f} on"
        if abs(sa[2]) > abs(sa[1]):
            return None, "complex128 as reals needs A along K"
    bt, m, n, k = fp64_shape(dtype, shape)
    if min(m, n) < 32 or m * n * k < 64**3:
        return None, f"too small for {DMMA_BM} x {DMMA_BN} tiles"
    tiles = -(-m // DMMA_BM) * -(-n // DMMA_BN)
    min_tiles = settings("dmma", "min_tiles")
    if bt * splits * tiles < min_tiles:
        return None, f"fewer than {min_tiles} tiles of {DMMA_BM} x {DMMA_BN}: the SIMT kernel spreads wider"
    min_k = settings("dmma", "min_k")
    if k < min_k:
        return None, f"K = {k} < {min_k}: writing C dominates, the SIMT kernel's stores are faster"
    if splits == 1 and _deep_on_few_tiles(settings, bt, m, n, k, tiles):
        return None, f"deep K = {k} on few tiles: split-K on the SIMT cores"
    if tiles >= 2**31:
        return None, f"2**31 tiles of {DMMA_BM} x {DMMA_BN} or more"
    a_along_k = abs(sa[2]) <= abs(sa[1])
    b_along_n = abs(sb[2]) <= abs(sb[1])
    layout = f"{'ak' if a_along_k else 'am'}_{'bn' if b_along_n else 'bk'}"
    if cplx:  # m, n, k: the real product's
        why = f"complex128 as one float64 product ({m} x {k} @ {k} x {n}), B realified as it is read"
        return f"polymm_dmmaz_{layout}", why
    along = f"A along {'K' if a_along_k else 'M'}, B along {'N' if b_along_n else 'K'}"
    return f"polymm_dmma_{layout}", f"float64, {along}, read in place"


def describe(device) -> str:
    """What ``"auto"`` runs on the tensor cores of ``device`` (for ``polymm info``)."""
    cc = device.cc
    if cc < MIN_CC:
        return "tensor cores: none used (needs sm_80)"
    shapes = [DMMA_SHAPE_NAMES[dmma_shape(device, tiles)] for tiles in (1, 10**9)]
    shape = shapes[0] if shapes[0] == shapes[1] else f"{shapes[0]} for one wave of tiles, {shapes[1]} beyond"
    if cc >= 90:
        settings = settings_for(device)
        wide, complex_wide = (DMMA_SHAPE_NAMES[settings(family, "wide_shape")] for family in ("dmma", "dmmaz"))
        shape += f", {wide} in 64 x {settings('dmma', 'wide_tile')['bn']} tiles ({complex_wide} for complex128)"
    off_by = "POLYMM_CUDA_DMMA=0" if os.environ.get("POLYMM_CUDA_DMMA") else "dmma.in_auto"
    float64 = (
        f"float64 (mma.sync {shape}) and complex128 (as one float64 product, B realified: "
        f"as it is read from compute capability {DMMAZ_MIN_CC / 10:.1f} on, into scratch before)"
        if dmma_in_auto(device)
        else f"float64 and complex128 off ({off_by}: SIMT)"
    )
    if cc == 90:
        return (
            "tensor cores: float16, bfloat16, int8, uint8 (wgmma); float32 in precision 'tf32' and 'tf32x3' "
            f"(wgmma); {float64}"
        )
    return f"tensor cores: {', '.join(LAYOUTS)} (mma.sync); {float64}"


def kernel_name(dtype_name: str, layout: str) -> str:
    return f"polymm_tc_{dtype_name}_{layout}"


def shape_rule(dtype: np.dtype, device, shape, wgmma_rules: bool = False) -> str | None:
    """Why no tensor-core kernel should run a product of this dtype and shape on ``device``
    (whatever the layout: a copy into another layout would not help), or None. ``wgmma_rules``:
    the ``wgmma`` kernel's, which takes any K (the copy engine reads or copies the operands) and
    cuts a deep K into runs of its own (deep products on few tiles pass)."""
    if dtype.name not in LAYOUTS:
        return f"no tensor-core kernel for {dtype.name}"
    cc = device.cc
    if cc < MIN_CC:
        return f"compute capability {cc / 10:.1f} < {MIN_CC / 10:.1f}"
    bt, m, n, k = shape
    if -(-m // BM) > GRID_ROWS:
        return f"more than {GRID_ROWS} tiles of {BM} rows"
    if k % (16 // dtype.itemsize) and not wgmma_rules:
        return f"K must be a multiple of {16 // dtype.itemsize} (16-byte copies)"
    return _simt_shape(shape, device, split_k=wgmma_rules)


def _deep_on_few_tiles(settings, bt, m, n, k, tiles) -> bool:
    """Whether K is ``split-k.deep_k`` times max(M, N) or more on fewer than
    ``tensor-cores.deep_tiles`` tiles: split-K on the SIMT cores fills the GPU, a block per tile
    would not."""
    return k >= settings("split-k", "deep_k") * max(m, n) and bt * tiles < settings("tensor-cores", "deep_tiles")


def _simt_shape(shape, device, split_k: bool = False) -> str | None:
    """The shapes the SIMT paths serve better than any tile of 128 rows (deep products on few
    tiles only where the kernel does not split K: ``split_k``), or None."""
    settings = settings_for(device)
    bt, m, n, k = shape
    few = settings("tensor-cores", "few_columns")
    if min(m, n) <= few:
        return f"min(M, N) = {min(m, n)} <= {few}: memory-bound, the SIMT matrix-vector paths"
    if not split_k and _deep_on_few_tiles(settings, bt, m, n, k, -(-m // BM) * -(-n // mma_sync_params(device).bn)):
        return f"deep K = {k} on few tiles: split-K on the SIMT cores"
    return None


def choose(dtype: np.dtype, device, shape, sa, sb, a_ptr: int, b_ptr: int) -> tuple[str | None, str]:
    """``(kernel name, why)``: the tensor-core kernel for this call on ``device``, or None and the
    rule it breaks."""
    why = shape_rule(dtype, device, shape)
    if why is not None:
        return None, why
    return layout_choice(dtype, shape, sa, sb, a_ptr, b_ptr)


def layout_choice(dtype: np.dtype, shape, sa, sb, a_ptr: int, b_ptr: int) -> tuple[str | None, str]:
    """:func:`choose` for a product that passed :func:`shape_rule`: the rules of the layout alone."""
    layouts = LAYOUTS[dtype.name]
    n = shape[2]
    chunk = 16 // dtype.itemsize  # elements per 16-byte copy
    if sa[2] != 1 or sa[1] % chunk or sa[0] % chunk or a_ptr % 16:
        return None, "A must be K-contiguous with 16-byte aligned rows"
    if b_ptr % 16 or sb[0] % chunk:
        return None, "B must start 16-byte aligned with 16-byte aligned batch strides"
    if "nk" in layouts and sb[1] == 1 and sb[2] % chunk == 0:
        return kernel_name(dtype.name, "nk"), "B is K-contiguous (B^T row-major)"
    if "kn" in layouts and sb[2] == 1 and sb[1] % chunk == 0 and n % chunk == 0:
        return kernel_name(dtype.name, "kn"), "B is N-contiguous"
    return None, f"B must be contiguous along {' or '.join('N' if x == 'kn' else 'K' for x in layouts)}"


def repack(xp, a, b):
    """Copies that the tensor-core kernels read: A row-major (K-contiguous), B^T row-major
    (K-contiguous) for the 16- and 8-bit kernels and B row-major for the FP64 ones (they read B
    along N); an operand already so is kept, and a broadcast batch stays one matrix."""

    def k_contiguous(x, order):
        if x.strides[order[-1]] == x.itemsize:
            return x
        one = x[:1] if x.shape[0] > 1 and x.strides[0] == 0 else x
        y = transposed_copy(xp, one.transpose(order)).transpose(order)
        return xp.broadcast_to(y, x.shape) if one is not x else y

    return k_contiguous(a, (0, 1, 2)), k_contiguous(b, (0, 1, 2) if b.dtype.name in FP64_DTYPES else (0, 2, 1))


def external_launch(p: Params, shape) -> dict:
    """The planner's description of a ``kernels/tensorcore.cu`` launch with parameters ``p``
    (the batch is split by the planner where the grid cannot hold it)."""
    grid, block = p.geometry(shape, 2**31 - 1)
    return {"source": "tensorcore", "options": p.options(), "grid": grid, "block": block, "smem": p.smem_bytes()}


def tf32_min_work(mode: str, device) -> int:
    """Multiply-adds per matrix from which the ``tf32`` family offers a float32 product in precision
    ``mode`` on ``device``: ``tf32.min_work``, unless ``POLYMM_CUDA_TF32_MIN_WORK=N`` sets it for both
    modes (the proof runs take 0 with ``POLYMM_PREFER=tf32``: the suite's small products then
    exercise those paths too)."""
    forced = os.environ.get("POLYMM_CUDA_TF32_MIN_WORK")
    return int(forced) if forced else settings_for(device)("tf32", "min_work")[mode]


def tf32_rule(mode: str, device, shape) -> str | None:
    """Why a float32 product in precision ``mode`` stays on the SIMT kernels of ``device`` (at full
    precision, which every mode accepts), or None (deep products on few tiles too: wgmma splits K)."""
    if mode not in wgmma.TF32_PRODUCTS:
        return f"precision {mode!r}: float32 in float32"
    cc = device.cc
    if cc != wgmma.CC:
        return f"TF32 products run on wgmma (compute capability 9.0; this is {cc / 10:.1f})"
    bt, m, n, k = shape
    if bt > GRID_ROWS:
        return "a batch beyond one grid"
    min_work = tf32_min_work(mode, device)
    if m * n * k < max(min_work, 1):
        return f"{m * n * k} multiply-adds per matrix < {min_work}: faster on the SIMT kernels"
    return _simt_shape(shape, device, split_k=True)
