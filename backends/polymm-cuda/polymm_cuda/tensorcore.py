"""The tensor-core path of ``"auto"``: when it applies, and how it is launched.

``kernels/tensorcore.cu`` multiplies float16 and bfloat16 matrices on the tensor cores
(``mma.sync``, float32 accumulation: what the contract asks of float16) in 128 x 128 tiles.
It copies 16-byte chunks straight from global memory, so it needs operands laid out for that;
:func:`why_not` says which rule a call breaks, and the SIMT kernel serves it instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["KERNELS", "BM", "BN", "THREADS", "STAGES", "MIN_CC", "why_not", "geometry", "source", "smem_bytes"]

#: dtype name -> kernel name in ``kernels/tensorcore.cu``.
KERNELS = {"float16": "polymm_tc_float16", "bfloat16": "polymm_tc_bfloat16"}
BM = BN = 128
BK = 32
THREADS = 256
STAGES = 3
#: ``mma.sync.m16n8k16`` with float32 accumulation, ``ldmatrix`` and ``cp.async``: Ampere and later.
MIN_CC = 80
_CHUNK = 8  # elements per 16-byte copy


def source() -> str:
    return (Path(__file__).parent / "kernels" / "tensorcore.cu").read_text()


def smem_bytes(stages: int = STAGES) -> int:
    return stages * (BM * BK + BK * BN) * 2


def why_not(dtype: np.dtype, cc: int, shape, sa, sb, a_ptr: int, b_ptr: int) -> str | None:
    """None when the tensor-core kernel can run this call; else the rule it breaks (for ``explain``)."""
    if dtype.name not in KERNELS:
        return f"no tensor-core kernel for {dtype.name}"
    if cc < MIN_CC:
        return f"compute capability {cc / 10:.1f} < {MIN_CC / 10:.1f}"
    _, m, n, k = shape
    if sa[2] != 1 or sb[2] != 1:
        return "A must be unit-stride along K and B along N"
    if k % _CHUNK or n % _CHUNK:
        return f"K and N must be multiples of {_CHUNK} (16-byte copies)"
    if any(s % _CHUNK for s in (sa[0], sa[1], sb[0], sb[1])) or (a_ptr | b_ptr) % 16:
        return "row and batch strides and base addresses must be 16-byte multiples"
    return None


def geometry(shape, batch_limit: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block): one block per 128 x 128 tile of C, the batch along z."""
    bt, m, n, _ = shape
    return (-(-n // BN), -(-m // BM), min(bt, batch_limit)), (THREADS, 1, 1)
