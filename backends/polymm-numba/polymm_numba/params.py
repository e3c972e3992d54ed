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

__all__ = ["Blocking", "Tiling", "AUTO_BLOCKING", "TILED", "TINY_WORK",
           "SERIAL_WORK", "blocking_for"]


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


# nr * itemsize = 128 bytes: two 512-bit (or four 256-bit) vectors per
# accumulator row; mr = 8 rows gives 16 vector accumulators in registers.
# Measured on Zen 4, one core, 1024^3: 8x32 float32 ~ 0.9x OpenBLAS, 8x16
# float64 ~ 0.9x (12x32, 6x64, 14x32 and 6x32, 12x16, 8x24 were no better).
# kc = 512: the accumulator tile is copied in and out once per kc step, so a
# deep panel amortises that; mc * kc * itemsize stays well inside L2 (1 MiB).
_B1 = Blocking(mr=8, nr=64, mc=128, nc=2048, kc=512)   # bool, int8, uint8
_B2 = Blocking(mr=8, nr=64, mc=128, nc=2048, kc=512)   # int16, uint16
_B4 = Blocking(mr=8, nr=32, mc=128, nc=2048, kc=512)   # float32, int32, uint32
_B8 = Blocking(mr=8, nr=16, mc=64, nc=2048, kc=512)    # float64, int64, uint64, complex64
_B16 = Blocking(mr=4, nr=8, mc=64, nc=1024, kc=256)    # complex128


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
