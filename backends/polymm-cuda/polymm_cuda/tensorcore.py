"""The tensor-core path of ``"auto"``: when it applies, and how it is launched.

``kernels/tensorcore.cu`` multiplies float16 and bfloat16 matrices on the tensor cores
(``mma.sync``, float32 accumulation: what the contract asks of float16) in 128-row tiles.
It copies 16-byte chunks straight from global memory, so it needs operands laid out for that;
:func:`why_not` says which rule a call breaks, and the SIMT kernel serves it instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["KERNELS", "MIN_CC", "Params", "DEFAULT", "CANDIDATES", "why_not", "source"]

#: dtype name -> kernel name in ``kernels/tensorcore.cu``.
KERNELS = {"float16": "polymm_tc_float16", "bfloat16": "polymm_tc_bfloat16"}
BM = 128
BK = 32
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
        return self.stages * (BM * BK + BK * self.bn) * 2

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


def source() -> str:
    return (Path(__file__).parent / "kernels" / "tensorcore.cu").read_text()


def why_not(dtype: np.dtype, cc: int, shape, sa, sb, a_ptr: int, b_ptr: int) -> str | None:
    """None when the tensor-core kernel can run this call; else the rule it breaks (for ``explain``)."""
    if dtype.name not in KERNELS:
        return f"no tensor-core kernel for {dtype.name}"
    if cc < MIN_CC:
        return f"compute capability {cc / 10:.1f} < {MIN_CC / 10:.1f}"
    _, m, n, k = shape
    if -(-m // BM) > 65535:
        return f"more than 65535 tiles of {BM} rows"
    if sa[2] != 1 or sb[2] != 1:
        return "A must be unit-stride along K and B along N"
    if k % _CHUNK or n % _CHUNK:
        return f"K and N must be multiples of {_CHUNK} (16-byte copies)"
    if any(s % _CHUNK for s in (sa[0], sa[1], sb[0], sb[1])) or (a_ptr | b_ptr) % 16:
        return "row and batch strides and base addresses must be 16-byte multiples"
    return None
