"""The float64 wide tiles (64 x 128, two blocks per SM) in m16n8k8 against m16n8k16 on the other
products the planner gives them (``polymm_cuda.tensorcore.dmma_wide``): 8192 squares, the cliff
suite's skinny product, 2000 and 3000 squares. Kernels alone, as ``probe40.py``.

    . .device/setup.sh && python .device/probe41.py
"""

import sys

sys.path.insert(0, ".device")
import probe40  # noqa: E402, F401  (its shared-memory sizes)
import probe31  # noqa: E402

CONFIGS = {k: v for k, v in probe40.CONFIGS.items() if k in ("1688 64x128 s3 b2", "16816 64x128 s3 b2")}
CASES = [
    ("float64", 8192, 8192, 8192),
    ("float64", 8192, 4096, 256),
    ("float64", 2000, 2000, 2000),
    ("float64", 3000, 3000, 3000),
    ("float64", 2048, 2048, 2048),
]

if __name__ == "__main__":
    probe31.sweep(CASES, CONFIGS)
