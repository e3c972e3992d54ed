"""Shallow products of one matrix on few tiles of the FP64 tensor cores: one block per tile (as
before) against K in slices (``polymm_cuda.tensorcore.DMMA_SHALLOW_SLICE_MIN``: slices at least
128 deep, as many as half a wave of tiles allows, summed in order by the planner's split-K), for
float64 and complex128 squares of 256 to 768 (probe33: float64 512 cubed 17.2 us of GPU time
against DGEMM's 8.9, complex128 256 cubed 17.2 against ZGEMM's 6.4). Whole calls and GPU time as
in probe32.

    . .device/setup.sh && python .device/probe35.py
"""

import sys

sys.path.insert(0, ".device")
from probe32 import compare  # noqa: E402

VARIANTS = {"whole K": 0, "slices": 128}
FLOAT64 = [(1, n, n, n, "c") for n in (256, 384, 512, 640, 768)] + [(1, 512, 512, 512, "bt")]
COMPLEX128 = [(1, n, n, n, "c") for n in (256, 320, 384, 512)]

if __name__ == "__main__":
    compare(FLOAT64, "DMMA_SHALLOW_SLICE_MIN", VARIANTS)
    compare(COMPLEX128, "DMMA_SHALLOW_SLICE_MIN", VARIANTS, dtype="complex128")
