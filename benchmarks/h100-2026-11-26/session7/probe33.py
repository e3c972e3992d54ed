"""The FP64 tensor cores' MMA shape for products of one wave of 64 x 64 tiles or fewer
(``polymm_cuda.tensorcore.DMMA_SHAPE_ONE_WAVE``): m16n8k4, chosen at b069838 (1024 squares 1.14x as
fast as on m16n8k8 then), against m16n8k8, which ``probe31.log`` found faster at 1024 on the kernel
of today (54.0 against 57.5 us). float64 and complex128 products of that size; whole calls and GPU
time as in probe32.

    . .device/setup.sh && python .device/probe33.py
"""

import sys

sys.path.insert(0, ".device")
from probe32 import compare  # noqa: E402

VARIANTS = {"m16n8k4": 1684, "m16n8k8": 1688}
FLOAT64 = [
    (1, 512, 512, 512, "c"),
    (1, 1000, 1000, 1000, "c"),
    (1, 1024, 1024, 1024, "c"),
    (1, 1024, 1024, 1024, "at"),
    (1, 1024, 1024, 1024, "bt"),
    (1, 128, 65536, 128, "c"),
    (1, 2048, 32, 2048, "c"),
    (8, 256, 256, 256, "c"),
]
COMPLEX128 = [
    (1, 256, 256, 256, "c"),
    (1, 512, 512, 512, "c"),
    (16, 128, 128, 128, "c"),
    (1, 1000, 100, 300, "c"),
]

if __name__ == "__main__":
    compare(FLOAT64, "DMMA_SHAPE_ONE_WAVE", VARIANTS)
    compare(COMPLEX128, "DMMA_SHAPE_ONE_WAVE", VARIANTS, dtype="complex128")
