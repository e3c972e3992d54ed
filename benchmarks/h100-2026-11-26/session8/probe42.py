"""complex128 on the FP64 tensor cores unswapped (``-DDM_SWAP=0``: X = A as reals in K rows, Y =
B2 read from B's rows with one component and sign per lane: one 8-byte load and an XOR per value)
against swapped (the planner's: X = B2^T, a pair of B's components per 16-byte load, chosen and
sign-flipped per value), in each MMA shape and both tiles. Kernels alone, as ``probe40.py``.

    . .device/setup.sh && python .device/probe42.py
"""

import sys

sys.path.insert(0, ".device")
import probe40  # noqa: E402, F401  (its shared-memory sizes)
import probe31  # noqa: E402

CONFIGS = {
    "swapped 1688 (planner)": dict(DM_MMA=1688),
    "unswapped 1688": dict(DM_MMA=1688, DM_SWAP=0),
    "unswapped 1684": dict(DM_MMA=1684, DM_SWAP=0),
    "unswapped 16816": dict(DM_MMA=16816, DM_SWAP=0),
    "unswapped 1688 k32 s2": dict(DM_MMA=1688, DM_SWAP=0, DM_BK=32, DM_STAGES=2),
    "unswapped 16816 64x128 s3 b2": dict(DM_MMA=16816, DM_SWAP=0, DM_WN=64, DM_STAGES=3, DM_MINB=2),
    "swapped 16816 64x128 s3 b2": dict(DM_MMA=16816, DM_WN=64, DM_STAGES=3, DM_MINB=2),
}
CASES = [
    ("complex128", 1024, 1024, 1024),
    ("complex128", 2048, 2048, 2048),
    ("complex128", 4096, 4096, 4096),
    ("complex128", 8192, 4096, 256),
    ("complex128", 512, 512, 512),
    ("complex128", 896, 896, 896),
]

if __name__ == "__main__":
    probe31.sweep(CASES, CONFIGS)
