"""probe28 on other complex128 products under REALIFY_WORK multiply-adds per matrix: batches of
small matrices, thin ones (whole calls and GPU time, SIMT against polymm_dmmaz, cuBLAS beside).

    . .device/setup.sh && python .device/probe29.py
"""

import sys

sys.path.insert(0, ".device")
from probe28 import compare  # noqa: E402

CASES = [
    (1024, 64, 64, 64),
    (256, 96, 96, 96),
    (64, 128, 128, 128),
    (16, 200, 200, 200),
    (2, 256, 256, 256),
    (1, 1000, 300, 40),
    (1, 300, 1000, 100),
    (1, 128, 2048, 128),
    (1, 512, 128, 512),
]
compare(CASES)
