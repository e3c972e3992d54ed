"""float64 with A along K and B along N (both row-major, the common case): the FP64 tensor-core
kernel swapped as the planner runs it (C^T = B^T A^T: B^T's rows paired for 16-byte loads) against
the product as it is (``-DDM_SWAP=0``: A in K rows as the MMA's A operand), in both Hopper MMA
shapes, on products of one wave of 64 x 64 tiles or about (probe33: the row-major 1024 square ran
at 56.7 us of GPU time where A^T row-major took 45.9 and cuBLAS 41.7). Kernels alone, as probe31.

    . .device/setup.sh && python .device/probe34.py
"""

import sys

sys.path.insert(0, ".device")
from probe31 import sweep  # noqa: E402

CONFIGS = {
    "swap-1684": dict(DM_MMA=1684),
    "swap-1688": dict(DM_MMA=1688),
    "noswap-1684": dict(DM_MMA=1684, DM_SWAP=0),
    "noswap-1688": dict(DM_MMA=1688, DM_SWAP=0),
}
CASES = [("float64", n, n, n) for n in (512, 768, 1000, 1024, 1280, 2048)] + [("float64", 8192, 4096, 256)]

if __name__ == "__main__":
    sweep(CASES, CONFIGS)
