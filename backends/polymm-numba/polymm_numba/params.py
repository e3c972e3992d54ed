"""Blocking parameters of the CPU kernels, kept as data.

The register micro-tile (``mr`` x ``nr``) is baked into the compiled
micro-kernel (LLVM must see constant loop bounds to keep the accumulator in
vector registers), so each distinct (mr, nr) pair gets its own compiled
specialisation.  The cache blocks (``mc``, ``nc``, ``kc``) and the tile sizes
of the ``"tiled"`` kernel are ordinary runtime arguments: change them here
(or in :data:`AUTO_BLOCKING` / :data:`TILED` at runtime) without recompiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Blocking", "Tiling", "AUTO_BLOCKING", "TILED", "TINY_WORK", "SERIAL_WORK", "blocking_for"]


@dataclass(frozen=True)
class Blocking:
    """Goto/BLIS-style blocking of the packed ``"auto"`` kernel.

    ``mr`` x ``nr``: register tile (an MR-tall panel of A times an NR-wide
    panel of B).  ``kc``: depth of a packed panel (B micro-panel of
    ``kc * nr`` elements stays in L1).  ``mc``: rows of A packed per block
    (``mc * kc`` elements in L2).  ``nc``: columns of B packed per block
    (shared by all threads, in L3).
    """

    mr: int
    nr: int
    mc: int
    nc: int
    kc: int


@dataclass(frozen=True)
class Tiling:
    """Tile sizes of the ``"tiled"`` kernel: the CPU mirror of the GPU kernel.

    Each task computes a ``tm`` x ``tn`` block of the output, walking K in
    steps of ``tk`` and copying the A and B tiles into small contiguous
    buffers first (the role shared memory plays on a GPU).
    """

    tm: int = 64
    tn: int = 64
    tk: int = 128


def _has_wide_vectors() -> bool:
    """True when the host has AVX-512 (32 vector registers of 512 bits)."""
    try:
        import llvmlite.binding as llvm

        return bool(llvm.get_host_cpu_features().get("avx512f"))
    except Exception:  # unknown host: the narrow tiles are safe everywhere
        return False


# The register tile must fit the vector register file, or the accumulators
# spill and the micro-kernel runs at a third of its speed.
#
# AVX-512 (32 zmm): nr * itemsize = 128 bytes, two 512-bit vectors per
# accumulator row; mr = 8 rows gives 16 vector accumulators.  Measured on
# Zen 4, one core, 1024^3: 8x32 float32 ~ 0.9x OpenBLAS, 8x16 float64 ~ 0.9x
# (12x32, 6x64, 14x32 and 6x32, 12x16, 8x24 were no better).
#
# AVX2 (16 ymm): nr * itemsize = 64 bytes, two 256-bit vectors per row;
# mr = 6 rows gives 12 accumulators, leaving room for two B vectors and the
# broadcast A value.  Measured on Zen 2, one core, 768^3: 6x16 float32
# 90 GF/s and 6x8 float64 45 GF/s (both ~ peak; 4x24 / 4x12 the same, the
# AVX-512 tiles 8x32 / 8x16 spill and reach 29 / 13 GF/s).  kc = 256 keeps a
# B micro-panel (kc * nr * itemsize = 16 KiB) in half of the 32 KiB L1.
#
# kc: the accumulator tile is copied in and out once per kc step, so a deep
# panel amortises that; mc * kc * itemsize stays well inside L2.
WIDE_VECTORS = _has_wide_vectors()

if WIDE_VECTORS:
    _B1 = Blocking(mr=8, nr=64, mc=128, nc=2048, kc=512)  # bool, int8, uint8
    _B2 = Blocking(mr=8, nr=64, mc=128, nc=2048, kc=512)  # int16, uint16
    _B4 = Blocking(mr=8, nr=32, mc=128, nc=2048, kc=512)  # float32, int32, uint32
    _B8 = Blocking(mr=8, nr=16, mc=64, nc=2048, kc=512)  # float64, int64, uint64, complex64
else:
    _B1 = Blocking(mr=6, nr=64, mc=144, nc=2048, kc=256)
    _B2 = Blocking(mr=6, nr=32, mc=144, nc=2048, kc=256)
    _B4 = Blocking(mr=6, nr=16, mc=144, nc=2048, kc=256)
    _B8 = Blocking(mr=6, nr=8, mc=96, nc=2048, kc=256)
_B16 = Blocking(mr=4, nr=8, mc=64, nc=1024, kc=256)  # complex128


#: Per-dtype blocking of the ``"auto"`` kernel (float16 is computed as float32).
AUTO_BLOCKING: dict[np.dtype, Blocking] = {
    np.dtype(t): blk
    for blk, ts in (
        (_B1, ("bool", "int8", "uint8")),
        (_B2, ("int16", "uint16")),
        (_B4, ("float32", "int32", "uint32")),
        (_B8, ("float64", "int64", "uint64", "complex64")),
        (_B16, ("complex128",)),
    )
    for t in ts
}

#: Tile sizes of the ``"tiled"`` kernel (all dtypes).
TILED = Tiling()

#: Below this many multiply-adds (B*M*N*K) every algorithm uses a plain
#: serial loop: starting threads or packing costs more than the product.
TINY_WORK = 16 * 16 * 16

#: Below this many multiply-adds per call, the ``"auto"`` kernel runs packed
#: but on one thread (a parallel launch costs ~10 us).
SERIAL_WORK = 64 * 64 * 64


def blocking_for(dtype) -> Blocking:
    """The blocking of the ``"auto"`` kernel for ``dtype``."""
    return AUTO_BLOCKING[np.dtype(dtype)]


#: From this many multiply-adds per call, a parallel product first counts the threads of the
#: process that are running (about 15 us on 2 cores; ``polymm_numba.neighbours``) and takes only
#: the cores they leave: right after a NumPy product, OpenBLAS's pool spins on its cores and a
#: 200^3 float64 product took 7.0 ms (median) instead of 0.13 ms (2-core Xeon, 2026-11-27).
NEIGHBOUR_MIN_WORK = 128 * 128 * 128

#: Matrix-vector paths: M or N at most this many (a vector, or a few columns
#: or rows) with at least ``NARROW_MIN_WORK`` multiply-adds per product.  The
#: product is memory-bound (each element of the big operand is used for at
#: most NARROW outputs), so it streams that operand once along its unit
#: stride instead of packing it into register tiles.
NARROW = 8
NARROW_MIN_WORK = 32 * 32 * 32
#: Rows of A per task of the dot-product path, columns per task of the
#: vector-matrix path (a slab of ``NARROW x NARROW_SLAB`` outputs stays in L1).
NARROW_ROWS = 64
NARROW_SLAB = 256
#: Few rows times a tall B (K >= NARROW_SPLITK_MIN_K): tasks are chunks of K
#: (at least NARROW_SPLITK_CHUNK rows of B, at most NARROW_SPLITK_PARTS of
#: them: a function of K only, so the chunked sum is deterministic), each
#: streaming whole rows of B; the partial rows are NARROW_SPLITK_ACC bytes
#: wide slabs (L1/L2).  Column slabs of 256 (1 KiB rows 16 KiB apart in B)
#: left the hardware prefetcher restarting on every row: gevm-4096 float32
#: 0.58x, float64 0.79x NumPy (loaded machine).
NARROW_SPLITK_MIN_K = 1024
NARROW_SPLITK_CHUNK = 256
NARROW_SPLITK_PARTS = 8
NARROW_SPLITK_ACC = 32 * 1024

#: Per-product work up to which products are computed whole, one per task,
#: by the unpacked slab kernel (batches of tiny matrices: packing and a
#: register tile cost more than they save).
SMALL_PRODUCT = 32 * 32 * 32

#: Per-product work up to which a single product runs as column slabs, one per thread, in one
#: parallel launch (``auto_slabs``), when it has at least SLABS_MIN_COLUMNS columns per thread.
SLABS_WORK = 320 * 320 * 320
SLABS_MIN_COLUMNS = 32

#: Split-K: K at least this deep (and at least 4x M and N), output at most
#: this many elements -- too few row/column tasks for the threads, and K steps
#: that would each need a parallel launch.  K is cut into chunks of
#: SPLITK_CHUNK (a multiple of every kc) summed in chunk order: the result
#: depends on the shape only, not on the thread count.
SPLITK_MIN_K = 8192
SPLITK_MAX_MN = 512 * 512
SPLITK_CHUNK = 4096
#: Multiply-adds per task of the small-products path (a few microseconds of
#: work, so a parallel hand-out is paid for).
SMALL_TASK = 32 * 32 * 32

#: Small products with register tiles (batches of tiny matrices, broadcast
#: batches, single small products): float32/float64 products with M and N at
#: most SMALL_MN and K at most SMALL_K.  One compiled kernel per dtype cuts
#: every M x N into full tiles of a few constant sizes (:func:`small_tiles`),
#: so the tile's accumulators are vector registers and each K step is one row
#: of B as vectors: the unpacked slab kernel's run-time inner loops (8 or 16
#: long) never vectorised (batch-4096x16 float32 ran at 7 GF/s, 0.45x NumPy,
#: batch-1024x32 float64 0.45x, broadcast-64x64x32 0.2x).
SMALL_MN = 64
SMALL_K = 256
#: Up to this many multiply-adds per call the small-product kernel runs on
#: one thread (~25 us float32, ~60 us float64 at 2M): a parallel launch
#: saves half of that on a quiet machine, but on a busy one waking the
#: second thread cost ~8 ms a call (broadcast-64x64x32, 64 calls of 2M each
#: from the core: 504 ms parallel vs 6-20 ms, load 4).
SMALL_SERIAL_WORK = 128 * 128 * 128
#: Vector registers (AVX2 16, AVX-512 32): the tile's accumulators, the row
#: of B and the broadcast A value must all fit, or they spill (a 3x32 float32
#: tile, 12 + 4 + 1 = 17 ymm, ran at 41 GF/s on one Zen 2 core).
SMALL_REGS = 32 if WIDE_VECTORS else 16
VECTOR_BYTES = 64 if WIDE_VECTORS else 32


def small_tiles(itemsize: int) -> tuple[int, int]:
    """``(mr, nr)`` of the small-product kernel's tiles for this element size: ``nr`` two
    vectors of columns (the rest of N in one masked tile of two vectors or one), ``mr`` as
    many rows as the vector registers hold beside a row of B and the broadcast A value (8
    with AVX-512, 6 with AVX2); fewer rows only where M itself is smaller."""
    vlen = max(1, VECTOR_BYTES // itemsize)
    per_row = 2
    return max(4, min(8, (SMALL_REGS - per_row - 2) // per_row)), 2 * vlen
