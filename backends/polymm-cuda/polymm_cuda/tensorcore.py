"""The tensor-core path of ``"auto"``: when it applies, and how it is launched.

``kernels/tensorcore.cu`` multiplies float16 and bfloat16 matrices on the tensor cores
(``mma.sync``; float32 accumulation, what the contract asks of float16) and int8 and uint8 ones
(int32 accumulation, whose low byte is NumPy's wrapped result) in 128-row tiles;
``kernels/dmma.cu`` multiplies float64 matrices on the FP64 tensor cores (``mma.sync`` m16n8k8 on
Hopper, m8n8k4 before).
It copies 16-byte chunks straight from global memory, so it needs operands laid out for that;
:func:`choose` says which kernel reads a call's layout or which rule it breaks. :func:`planner_entry`
makes them a CUDA-only entry of the shared planner, whose SIMT kernels serve the rest; on Hopper it
tries :mod:`polymm_cuda.wgmma` (float16, bfloat16, int8, uint8) first. Its answer also says when
the operands of a large product would run on the tensor cores once copied (:func:`repack`), which
the backend then does: the decision is made once, in the planner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from polymm.kernels.devices import settings_for

from . import wgmma
from .transpose import transposed_copy

__all__ = [
    "LAYOUTS",
    "MIN_CC",
    "Params",
    "DEFAULT",
    "CANDIDATES",
    "choose",
    "layout_choice",
    "choose_dmma",
    "dmma_splits",
    "external_launch",
    "planner_entry",
    "REPACK_WORK",
    "shape_rule",
    "repack",
]

#: dtype name -> the B layouts its kernels read: "kn" (B unit-stride along N, as stored) and "nk"
#: (unit-stride along K: B^T row-major). 8-bit MMA fragments need K-contiguous B.
LAYOUTS = {"float16": ("kn", "nk"), "bfloat16": ("kn", "nk"), "int8": ("nk",), "uint8": ("nk",)}
BM = 128
THREADS = 256
#: ``mma.sync.m16n8k16`` with float32 accumulation, ``ldmatrix`` and ``cp.async``: Ampere and later.
MIN_CC = 80
_CHUNK = 8  # elements per 16-byte copy


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


#: The parameters ``"auto"`` uses. ``benchmarks/tune_tensorcore.py`` on an H200, 2026-11-23
#: (float16, 2048-8192 squares): 64 x 64 warp tiles with 4 stages were the fastest, 15% above
#: the 64 x 32, 3-stage start; the grouped block order made no difference.
DEFAULT = Params(wn=64, stages=4, group_m=0)
#: What the tuner tries.
CANDIDATES = tuple(Params(wn, st, g) for wn in (32, 64) for st in (3, 4) for g in (0, 8))


#: Whether ``"auto"`` takes the float64 kernels: yes since their first H100 proof run (2026-11-23:
#: device tests, the conformance suite and 100,000 fuzzed float64 cases with them on, no failure;
#: 0.42-0.50x cuBLAS DGEMM against the SIMT kernel's 0.35x). ``POLYMM_CUDA_DMMA=0`` turns them off.
DMMA_IN_AUTO = os.environ.get("POLYMM_CUDA_DMMA", "1") != "0"
#: The float64 kernels (``kernels/dmma.cu`` with its defaults): 64 x 64 tiles of 2 x 2 warps, 4 stages
#: of 16-deep K slices, blocks in groups of 16 tile rows. H100, 2026-11-25, whole calls against
#: cuBLAS DGEMM: 1024 / 2048 / 4096 squares 0.91x / 0.86x / 0.92x (0.57x / 0.62x / 0.64x at
#: 624ff06); ``benchmarks/h100-2026-11-25/`` has the sweeps behind the choice.
DMMA_BM, DMMA_BN, DMMA_THREADS, DMMA_STAGES = 64, 64, 128, 4
#: The MMA shape on Hopper (sm_90 and later; m8n8k4 before): m16n8k4 where the tiles fit in one
#: wave of DMMA_BLOCKS_PER_SM blocks per SM, m16n8k8 beyond. H100, 2026-11-25, kernels alone
#: (``benchmarks/h100-2026-11-25/probe19-b069838.log``): 1000 and 1024 squares (256 tiles) 1.14x as
#: fast on m16n8k4; (8192, 4096) @ (4096, 256) (512 tiles) 1.13x as fast on m16n8k8; 2048 and 4096
#: squares level.
DMMA_SHAPE_ONE_WAVE, DMMA_SHAPE = 1684, 1688
DMMA_BLOCKS_PER_SM = 3  # kernels/dmma.cu's DM_MINB
#: float64 with A along K and B along N (both row-major) is multiplied swapped, C^T = B^T A^T (the
#: rows of B^T paired for 16-byte loads), beyond one wave of tiles, and as it is within one
#: (``-DDM_SWAP=0``). H100, 2026-11-26, kernels alone on m16n8k4, swapped -> not
#: (``benchmarks/h100-2026-11-26/session7/probe34.log``): 1024 cubed 57.8 -> 48.6 us (DGEMM 42.6),
#: 1000 54.5 -> 49.4, 768 38.2 -> 36.0, 512 17.6 -> 17.1; level from one wave on (1280, 2048).
DMMA_UNSWAPPED_ONE_WAVE = True
#: Wide tiles: float64 products (and complex128 ones with B along N, unswapped: below) may run in 64 x 128 tiles
#: (2 x 2 warps of 32 x 64), DMMA_WIDE_BLOCKS_PER_SM blocks per SM, three stages. Once the tiles
#: fill their waves they are about 5% faster per multiply-add, 10% at 8192 (H100, 2026-11-26,
#: ``benchmarks/h100-2026-11-26/session7/probe31.log`` and ``probe32.log``, GPU time against DGEMM:
#: 2048 squares 341 -> 330 us (287), 4096 2631 -> 2514 (2287), 8192 23841 -> 21641 (19985),
#: (8192, 4096) @ (4096, 256) 367 -> 340 (313), 64 x 512 cubed 348 -> 337 (323)); but a wave holds
#: fewer of them, and a product whose last wave they fill worse loses (1500 squares 169 -> 196,
#: 3000 x 1000 @ 1000 x 3000 361 -> 374), as do A stored along M (2048: 340 -> 373) and an outer
#: product (4096 x 32 @ 32 x 4096: 54.7 -> 56.5). So :func:`dmma_wide` takes them where K is at
#: least DMMA_WIDE_MIN_K (not swept below 1000 but for K = 32), A lies along K, and DMMA_WIDE_GAIN
#: times the wide tiles' fill of their waves beats the 64 x 64 tiles' fill.
DMMA_WIDE_GAIN, DMMA_WIDE_MIN_K = 1.05, 256
DMMA_WIDE_BN, DMMA_WIDE_STAGES, DMMA_WIDE_BLOCKS_PER_SM = 128, 3, 2
#: The wide tiles multiply in m16n8k16, Hopper's largest f64 MMA (half the MMA instructions of
#: m16n8k8). H100, 2026-11-26, kernels alone, m16n8k8 -> m16n8k16 (``benchmarks/h100-2026-11-26/
#: session8/probe40.log``, ``probe41.log``; DGEMM): 2048 squares 328.8 -> 324.4 us (288.2), 4096
#: 2494.5 -> 2441.9 (2252.1). The 64 x 64 tiles gained nothing from it (the same run).
DMMA_WIDE_SHAPE = 16816
#: complex128 in the wide tiles runs unswapped (``-DDM_SWAP=0``: X = A as reals, Y = B2 read from
#: B's rows, one component and sign per lane, one 8-byte load and an XOR per value); swapped (a
#: pair of B's components per 16-byte load, chosen and sign-flipped per value) it was slower in them
#: than in 64 x 64 tiles. H100, 2026-11-26, kernels alone, 64 x 64 swapped -> 64 x 128 unswapped
#: (``benchmarks/h100-2026-11-26/session8/probe42.log``; ZGEMM): 1024 squares 183.5 -> 178.5 us
#: (152.5), 4096 10640 -> 10488 (9733), (8192, 4096) @ (4096, 256) 1379 -> 1334 (1183); but 2048
#: 1319 -> 1337 (1145). Whole calls and GPU time, the planner's choice with the wide tiles off / on
#: (``probe43.log``, GPU time): they win where the 64 x 64 tiles take few waves (1024 squares, 1.3
#: waves: 182 -> 177 us, whole calls 0.87x -> 0.90x ZGEMM; the skinny product, 2.6: 1386 -> 1344)
#: and lose where those take more (2048, 5.2 waves: 1329 -> 1345; 64 x 512 cubed, 21: 1312 -> 1374;
#: 8 x 1024 cubed, 10: 1309 -> 1351), 3000 squares (11 waves, 4260 -> 4155) aside; and in waves
#: they fill poorly themselves (1280 squares: 400 tiles, 1.5 waves) they lose too (kernels alone,
#: ``probe44.log`` and ``../session7/probe36.log``: 375 us in 64 x 64, 414-432 wide, ZGEMM 307). So
#: complex128 takes them only where its 64 x 64 tiles would take at most DMMAZ_WIDE_MAX_WAVES waves
#: and the wide tiles fill theirs to DMMAZ_WIDE_MIN_FILL, in m16n8k4 (``probe44.log``, against
#: m16n8k16: 1024 squares 178.6 -> 173.5 us, the skinny product 1342 -> 1288).
DMMAZ_WIDE_UNSWAPPED, DMMAZ_WIDE_MAX_WAVES, DMMAZ_WIDE_MIN_FILL, DMMAZ_WIDE_SHAPE = True, 3, 0.95, 1684
DMMA_SHAPE_NAMES = {884: "m8n8k4", 1684: "m16n8k4", 1688: "m16n8k8", 16816: "m16n8k16"}
#: Shallower products stay on the SIMT kernel. H100, 2026-11-25, kernels alone
#: (``benchmarks/h100-2026-11-25/session5/probe27.log``): once the float64 kernel stored C 16 bytes
#: at a time, 4096 x 32 @ 32 x 4096 took 55.1 us on it against 74.5 on the SIMT kernel (cuBLAS
#: 53.6), 2048 x 32 @ 32 x 2048 14.8 against 23.3 (17.0); 64 before (the former stores: 78.1 us).
DMMA_MIN_K = 32
#: Products of fewer tiles too (H100, 2026-11-24, kernels alone: float64 256 squares, 8 tiles of the
#: first kernel's 64 x 128, 24.6 us on DMMA against 8.2 on the SIMT kernel in four teams; cuBLAS
#: 4.8): the same area in 64 x 64 tiles.
DMMA_MIN_TILES = 32
#: Deep products on fewer tiles than one wave (K at least DEEP_K x max(M, N), one matrix): K in
#: slices, computed as a batch and summed in order (the planner's split-K), as many as fill one
#: wave, each at least this deep, their partial sums at most the planner's SLICES_BYTES. H100,
#: 2026-11-25, whole calls: 128 x 65536 x 128 in 64 slices 0.085 ms, 0.164 on the SIMT cores'
#: split-K, cuBLAS 0.080 (``benchmarks/h100-2026-11-25/cliffs-cuda-2db1b91.log``; the depth was
#: not swept).
DMMA_SLICE_MIN = 512
#: Shallower products of one matrix on at most a quarter of a wave of tiles (and at least
#: DMMA_MIN_TILES) are split too, in slices at least this deep (0: they are not): a block per tile
#: leaves most SMs idle. H100,
#: 2026-11-26 (``benchmarks/h100-2026-11-26/session7/probe35.log``), GPU time, whole K -> slices
#: (cuBLAS): float64 512 cubed 17.0 -> 15.1 us (9.1) in 4 slices, 384 13.5 -> 12.2 (7.3) in 2;
#: complex128 256 cubed 17.3 -> 10.4 (6.6), 320 21.2 -> 15.7 (9.6), 384 24.9 -> 21.4 (17.7), in 4.
#: Where the tiles fill more than a quarter of a wave two slices lost: float64 640 cubed 20.9 ->
#: 23.8, 768 35.2 -> 36.9, complex128 512 32.2 -> 35.1.
DMMA_SHALLOW_SLICE_MIN = 128
#: complex128 runs on the float64 kernel as one real product (``kernels/realify.c`` says how) from
#: this compute capability on: ``polymm_dmmaz_*`` read B's realified 2 x 2 blocks from B itself
#: (the Hopper MMA shapes); before, the shared planner writes them out first (``realify``), from
#: its REALIFY_WORK multiply-adds per matrix on. Reading them costs no scratch, so small products
#: take the float64 kernel's own limits (tiles, K) alone. H100, 2026-11-26, whole calls against
#: ZGEMM (``benchmarks/h100-2026-11-26/probe28.log``, ``probe29.log``), SIMT -> polymm_dmmaz: 256
#: cubed 35.2 -> 31.9 us (34.0), 288 46.5 -> 34.6 (35.6), 320 55.9 -> 35.7 (35.4), 1024 x 64
#: cubed 233 -> 90 (111), 64 x 128 cubed 125 -> 44 (62), 16 x 200 cubed 171 -> 54 (62).
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


def dmma_shape(cc: int, sms: int, tiles: int) -> int:
    """The float64 kernel's MMA shape (``-DDM_MMA``) for ``tiles`` 64 x 64 tiles on ``sms`` SMs."""
    if cc < 90:
        return 884
    return DMMA_SHAPE_ONE_WAVE if dmma_one_wave(sms, tiles) else DMMA_SHAPE


def dmma_wide(name: str, cc: int, sms: int, shape) -> bool:
    """Whether float64 kernel ``name`` runs a product of ``shape`` (batch, M, N, K) on ``sms`` SMs
    in the wide tiles (DMMA_WIDE_GAIN says when)."""
    bt, m, n, k = fp64_shape(np.dtype("complex128" if is_complex_dmma(name) else "float64"), shape)
    if cc < 90 or "_am_" in name or k < DMMA_WIDE_MIN_K:
        return False

    def fill(bn: int, blocks_per_sm: int) -> float:  # of the waves the tiles take
        tiles, slots = bt * -(-m // DMMA_BM) * -(-n // bn), blocks_per_sm * sms
        return tiles / (-(-tiles // slots) * slots)

    wide_fill = fill(DMMA_WIDE_BN, DMMA_WIDE_BLOCKS_PER_SM)
    if is_complex_dmma(name):  # DMMAZ_WIDE_UNSWAPPED says when
        waves = bt * -(-m // DMMA_BM) * -(-n // DMMA_BN) / (DMMA_BLOCKS_PER_SM * sms)
        ok = DMMAZ_WIDE_UNSWAPPED and name.endswith("_bn") and waves <= DMMAZ_WIDE_MAX_WAVES
        if not (ok and wide_fill >= DMMAZ_WIDE_MIN_FILL):
            return False
    return DMMA_WIDE_GAIN * wide_fill > fill(DMMA_BN, DMMA_BLOCKS_PER_SM)


def dmma_tile(wide: bool) -> tuple[int, int, tuple[str, ...]]:
    """(tile width, stages, the kernel's -D options for them) of the 64 x 64 tiles or the wide ones."""
    if not wide:
        return DMMA_BN, DMMA_STAGES, ()
    options = (
        f"-DDM_WN={DMMA_WIDE_BN // 2}",
        f"-DDM_STAGES={DMMA_WIDE_STAGES}",
        f"-DDM_MINB={DMMA_WIDE_BLOCKS_PER_SM}",
    )
    return DMMA_WIDE_BN, DMMA_WIDE_STAGES, options


def dmma_launch(name: str, cc: int, sms: int, shape, a, b) -> dict:
    """The planner's description of a float64 kernel's launch on a device of compute capability
    ``cc`` with ``sms`` SMs: its MMA shape (:func:`dmma_shape`), tile (:func:`dmma_wide`) and
    whether it swaps (DMMA_UNSWAPPED_ONE_WAVE); 16-byte copies of an operand
    (``-DDM_VA=2`` / ``-DDM_VB=2``) where its unit-stride axis starts 16-byte aligned in every row
    and batch entry (``a``/``b`` = (element offset from a 16-byte aligned base, strides)), one
    element per copy otherwise; a 1-D grid of tiles (the kernel orders them), the batch along z."""
    (a_off, sa), (b_off, sb) = a, b
    cplx = is_complex_dmma(name)
    bt, m, n, _ = shape
    tiles = -(-m // DMMA_BM) * -(-n * (2 if cplx else 1) // DMMA_BN)
    mma = dmma_shape(cc, sms, bt * tiles)

    def pairs(off, strides, unit_axis):
        other = 3 - unit_axis
        return strides[unit_axis] == 1 and off % 2 == 0 and strides[other] % 2 == 0 and strides[0] % 2 == 0

    # a complex kernel copies a complex (16 bytes) at a time, whatever these options say
    va = 2 if cplx or pairs(a_off, sa, 2 if "_ak_" in name else 1) else 1
    vb = 2 if cplx or pairs(b_off, sb, 2 if name.endswith("_bn") else 1) else 1
    wide = dmma_wide(name, cc, sms, shape)
    bn, stages, tile_options = dmma_tile(wide)
    if wide:
        mma = DMMAZ_WIDE_SHAPE if cplx else DMMA_WIDE_SHAPE
    options = (f"-DDM_MMA={mma}", f"-DDM_VA={va}", f"-DDM_VB={vb}", *tile_options)
    if DMMA_UNSWAPPED_ONE_WAVE and name == "polymm_dmma_ak_bn" and cc >= 90 and dmma_one_wave(sms, bt * tiles):
        options += ("-DDM_SWAP=0",)
    if cplx and wide:  # DMMAZ_WIDE_UNSWAPPED
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


def dmma_splits(shape, device) -> int:
    """Slices of K for a float64 product on the FP64 tensor cores of ``device`` (1: none); their
    partial sums at most the device database's ``split-k.slices_bytes``."""
    sms = device.compute_units
    slices_bytes = settings_for(device)("split-k", "slices_bytes")
    bt, m, n, k = shape
    tiles = -(-m // DMMA_BM) * -(-n // DMMA_BN)
    deep = k >= DEEP_K * max(m, n)
    slice_min = DMMA_SLICE_MIN if deep else DMMA_SHALLOW_SLICE_MIN
    if bt > 1 or min(m, n) < 1 or not slice_min:
        return 1
    if not deep and not DMMA_MIN_TILES <= tiles <= DMMA_BLOCKS_PER_SM * sms // 4:
        return 1  # fewer tiles stay on the SIMT kernel (a 256 square: 9.2 us against 9.4 in slices)
    splits = min(DMMA_BLOCKS_PER_SM * sms // tiles, k // slice_min, slices_bytes // (m * n * 8))
    return 1 << (splits.bit_length() - 1) if splits >= 2 else 1


def choose_dmma(dtype: np.dtype, cc: int, shape, sa, sb, splits: int = 1) -> tuple[str | None, str]:
    """``(kernel name, why)`` for float64 on the FP64 tensor cores (exact IEEE double FMAs), or None;
    ``splits``: slices of K (:func:`dmma_splits` of :func:`fp64_shape`), each a product of its own.

    Any strides are read in place; the name says along which axis the threads walk each operand
    (its smaller stride), so the copies coalesce. complex128 takes the same rules on the real
    product it becomes (:func:`fp64_shape`), A along K.
    """
    if dtype.name not in ("float64", "complex128"):
        return None, "the FP64 tensor cores serve float64 (and complex128 as float64)"
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
    if bt * splits * -(-m // DMMA_BM) * -(-n // DMMA_BN) < DMMA_MIN_TILES:
        return None, f"fewer than {DMMA_MIN_TILES} tiles of {DMMA_BM} x {DMMA_BN}: the SIMT kernel spreads wider"
    if k < DMMA_MIN_K:
        return None, f"K = {k} < {DMMA_MIN_K}: writing C dominates, the SIMT kernel's stores are faster"
    if splits == 1 and k >= DEEP_K * max(m, n) and bt * -(-m // DMMA_BM) * -(-n // DMMA_BN) < DEEP_TILES:
        return None, f"deep K = {k} on few tiles: split-K on the SIMT cores"
    if -(-m // DMMA_BM) * -(-n // DMMA_BN) >= 2**31:
        return None, f"2**31 tiles of {DMMA_BM} x {DMMA_BN} or more"
    a_along_k = abs(sa[2]) <= abs(sa[1])
    b_along_n = abs(sb[2]) <= abs(sb[1])
    layout = f"{'ak' if a_along_k else 'am'}_{'bn' if b_along_n else 'bk'}"
    if cplx:  # m, n, k: the real product's
        why = f"complex128 as one float64 product ({m} x {k} @ {k} x {n}), B realified as it is read"
        return f"polymm_dmmaz_{layout}", why
    along = f"A along {'K' if a_along_k else 'M'}, B along {'N' if b_along_n else 'K'}"
    return f"polymm_dmma_{layout}", f"float64, {along}, read in place"


def describe(cc: int) -> str:
    """What ``"auto"`` runs on the tensor cores of a device of compute capability ``cc`` (for ``polymm info``)."""
    if cc < MIN_CC:
        return "tensor cores: none used (needs sm_80)"
    shapes = [DMMA_SHAPE_NAMES[dmma_shape(cc, 1, tiles)] for tiles in (1, 10**9)]
    shape = shapes[0] if shapes[0] == shapes[1] else f"{shapes[0]} for one wave of tiles, {shapes[1]} beyond"
    if cc >= 90:
        shape += f", {DMMA_SHAPE_NAMES[DMMA_WIDE_SHAPE]} in 64 x {DMMA_WIDE_BN} tiles"
        shape += f" ({DMMA_SHAPE_NAMES[DMMAZ_WIDE_SHAPE]} for complex128)"
    float64 = (
        f"float64 (mma.sync {shape}) and complex128 (as one float64 product, B realified: "
        f"as it is read from compute capability {DMMAZ_MIN_CC / 10:.1f} on, into scratch before)"
        if DMMA_IN_AUTO
        else "float64 and complex128 off (POLYMM_CUDA_DMMA=0: SIMT)"
    )
    if cc == 90:
        return (
            "tensor cores: float16, bfloat16, int8, uint8 (wgmma); float32 in precision 'tf32' and 'tf32x3' "
            f"(wgmma); {float64}"
        )
    return f"tensor cores: {', '.join(LAYOUTS)} (mma.sync); {float64}"


def kernel_name(dtype_name: str, layout: str) -> str:
    return f"polymm_tc_{dtype_name}_{layout}"


#: Few columns or rows (at most this many): a memory-bound product, for the SIMT matrix-vector paths.
FEW_COLUMNS = 8
#: K at least this many times max(M, N) on fewer tiles than this: split-K on the SIMT cores fills
#: the GPU, one block per 128 x 256 tile would not.
DEEP_K, DEEP_TILES = 16, 16


def shape_rule(dtype: np.dtype, cc: int, shape) -> str | None:
    """Why no tensor-core kernel should run a product of this dtype and shape (whatever the
    layout: a copy into another layout would not help), or None."""
    if dtype.name not in LAYOUTS:
        return f"no tensor-core kernel for {dtype.name}"
    if cc < MIN_CC:
        return f"compute capability {cc / 10:.1f} < {MIN_CC / 10:.1f}"
    bt, m, n, k = shape
    if -(-m // BM) > 65535:
        return f"more than 65535 tiles of {BM} rows"
    if k % (16 // dtype.itemsize):
        return f"K must be a multiple of {16 // dtype.itemsize} (16-byte copies)"
    return _simt_shape(shape)


def _simt_shape(shape) -> str | None:
    """The shapes the SIMT paths serve better than any tile of 128 rows, or None."""
    bt, m, n, k = shape
    if min(m, n) <= FEW_COLUMNS:
        return f"min(M, N) = {min(m, n)} <= {FEW_COLUMNS}: memory-bound, the SIMT matrix-vector paths"
    if k >= DEEP_K * max(m, n) and bt * -(-m // BM) * -(-n // DEFAULT.bn) < DEEP_TILES:
        return f"deep K = {k} on few tiles: split-K on the SIMT cores"
    return None


def choose(dtype: np.dtype, cc: int, shape, sa, sb, a_ptr: int, b_ptr: int) -> tuple[str | None, str]:
    """``(kernel name, why)``: the tensor-core kernel for this call, or None and the rule it breaks."""
    why = shape_rule(dtype, cc, shape)
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
    """Copies that every tensor-core kernel reads: A and B^T row-major (K-contiguous); an operand
    already K-contiguous is kept, and a broadcast batch stays one matrix."""

    def k_contiguous(x, order):
        if x.strides[order[-1]] == x.itemsize:
            return x
        one = x[:1] if x.shape[0] > 1 and x.strides[0] == 0 else x
        y = transposed_copy(xp, one.transpose(order)).transpose(order)
        return xp.broadcast_to(y, x.shape) if one is not x else y

    return k_contiguous(a, (0, 1, 2)), k_contiguous(b, (0, 2, 1))


def external_launch(p: Params, shape) -> dict:
    """The planner's description of a ``kernels/tensorcore.cu`` launch with parameters ``p``
    (the batch is split by the planner where the grid cannot hold it)."""
    grid, block = p.geometry(shape, 2**31 - 1)
    return {"source": "tensorcore", "options": p.options(), "grid": grid, "block": block, "smem": p.smem_bytes()}


#: Multiply-adds per product from which ``"auto"`` copies operands the tensor cores cannot read as
#: they lie into a layout they read (:func:`repack`): a copy costs far less than the SIMT kernel.
REPACK_WORK = 128**3


def planner_entry(device, dtype, shape, a, b):
    """The tensor cores as a CUDA-only entry of the shared planner (:mod:`polymm.kernels.planner`),
    where every rule of theirs runs, once per plan: a :class:`~polymm.kernels.planner.Choice` with
    an external kernel when one reads these operands (``a``/``b`` = (element offset from a 16-byte
    aligned base, strides)); :data:`~polymm.kernels.planner.RELAYOUT` when one would read them
    after :func:`repack` (a product of REPACK_WORK or more); else None."""
    from polymm.kernels.planner import RELAYOUT, Choice

    dtype = np.dtype(dtype)
    if dtype.name == "float32":
        return _tf32_entry(device, shape, a, b)
    if dtype.name not in LAYOUTS:
        return _dmma_entry(device, dtype, shape, a, b)
    if shape_rule(dtype, device.cc, shape) is not None:
        return None  # no layout would let the tensor cores run it
    (a_off, sa), (b_off, sb) = a, b
    a_ptr, b_ptr = a_off * dtype.itemsize, b_off * dtype.itemsize
    name, why = wgmma.choose(dtype, device.cc, shape, sa, sb, a_ptr, b_ptr)
    if name is not None:  # wgmma reads them (or its plan copies B itself)
        layout = name.rsplit("_", 1)[1]
        external = wgmma.external_launch(shape, sa, sb, layout, dtype.itemsize, device.compute_units)
        return Choice(name, None, f"tensor cores (wgmma, copy engine): {why}", external=external)
    name, why = layout_choice(dtype, shape, sa, sb, a_ptr, b_ptr)
    if name is not None:
        return Choice(name, None, f"tensor cores (mma.sync): {why}", external=external_launch(DEFAULT, shape))
    bt, m, n, k = shape
    return RELAYOUT if m * n * k >= REPACK_WORK else None


def _dmma_entry(device, dtype, shape, a, b):
    """float64 and complex128 on the FP64 tensor cores (:func:`choose_dmma`), or None."""
    from polymm.kernels.planner import Choice

    if not DMMA_IN_AUTO:
        return None
    (_, sa), (_, sb) = a, b
    bt, m, n, k = shape
    splits = dmma_splits(fp64_shape(dtype, shape), device)
    name, why = choose_dmma(dtype, device.cc, shape, sa, sb, splits)
    if name is None:
        return None
    if splits > 1:
        why += f", K = {k} on few tiles: {splits} slices of K, added in order"
    external = dmma_launch(name, device.cc, device.compute_units, (bt * splits, m, n, k), a, b)
    shape = DMMA_SHAPE_NAMES[int(external["options"][0].split("=")[1])]
    copies = "16-byte" if {"-DDM_VA=2", "-DDM_VB=2"} <= set(external["options"]) else "8-byte where unaligned"
    wide = any(o.startswith("-DDM_WN=") for o in external["options"])
    tiles = f"{DMMA_BM} x {DMMA_WIDE_BN if wide else DMMA_BN} tiles"
    why = f"FP64 tensor cores (mma.sync {shape}, {tiles}, {copies} copies): {why}"
    return Choice(name, None, why, external=external, splits=splits)


#: Multiply-adds per matrix from which a float32 product in a TF32 precision mode runs on the
#: tensor cores; smaller ones are faster on the SIMT kernels, at full precision. H100, 2026-11-23
#: (squares, whole calls, ``.device``'s crossover script): "tf32" 52.6 us against 79.8 at 768,
#: 48.6 against 37.6 at 512; "tf32x3" 150 us against 293 at 1536, 112 against 79 at 1024.
#: ``POLYMM_CUDA_TF32_MIN_WORK=N`` sets both (the proof runs take 0: the suite's small products then
#: exercise the tensor-core paths too).
TF32_MIN_WORK = {"tf32": 640**3, "tf32x3": 1200**3}
if os.environ.get("POLYMM_CUDA_TF32_MIN_WORK"):
    TF32_MIN_WORK = dict.fromkeys(TF32_MIN_WORK, int(os.environ["POLYMM_CUDA_TF32_MIN_WORK"]))


def tf32_rule(mode: str, cc: int, shape) -> str | None:
    """Why a float32 product in precision ``mode`` stays on the SIMT kernels (at full
    precision, which every mode accepts), or None."""
    if mode not in wgmma.TF32_PRODUCTS:
        return f"precision {mode!r}: float32 in float32"
    if cc != wgmma.CC:
        return f"TF32 products run on wgmma (compute capability 9.0; this is {cc / 10:.1f})"
    bt, m, n, k = shape
    if bt > 65535:
        return "a batch beyond one grid"
    if m * n * k < max(TF32_MIN_WORK[mode], 1):
        return f"{m * n * k} multiply-adds per matrix < {TF32_MIN_WORK[mode]}: faster on the SIMT kernels"
    return _simt_shape(shape)


def _tf32_entry(device, shape, a, b):
    """float32 in the ``"tf32"``/``"tf32x3"`` precision modes (:func:`polymm_cuda.wgmma.tf32_launch`)."""
    from polymm.kernels.planner import Choice
    from polymm.precision import current

    mode = current()
    if tf32_rule(mode, device.cc, shape) is not None:
        return None
    layout, external = wgmma.tf32_launch(mode, shape, a, b, device.compute_units)
    if mode == "tf32x3":
        what = "split into hi and lo parts, three products"
    elif layout == "kn":
        what = "one product, C^T = B^T A^T with B^T from registers (B is N-contiguous)"
    else:
        what = "one product"
    return Choice(
        wgmma.kernel_name(mode, layout),
        None,
        f"TF32 tensor cores (wgmma), precision {mode!r}: {what}",
        external=external,
    )
