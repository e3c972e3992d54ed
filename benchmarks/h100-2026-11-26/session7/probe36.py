"""Four blocks per SM for the FP64 tensor cores (m16n8k4 fits 128 registers without spills, three or
two stages) against the planner's three, for complex128 around one wave of 64 x 64 tiles (a 1024
square: 512 tiles, 1.29 waves of three blocks per SM but 0.97 of four) and float64 beside. Kernels
alone, as probe31.

    . .device/setup.sh && python .device/probe36.py
"""

import sys

sys.path.insert(0, ".device")
from probe31 import sweep  # noqa: E402

CONFIGS = {
    "64x64-1688-s4-b3": dict(DM_MMA=1688),
    "64x64-1684-s4-b3": dict(DM_MMA=1684),
    "64x64-1684-s3-b4": dict(DM_MMA=1684, DM_STAGES=3, DM_MINB=4),
    "64x64-1684-s2-b4": dict(DM_MMA=1684, DM_STAGES=2, DM_MINB=4),
}
CASES = [
    ("complex128", 1024, 1024, 1024),
    ("complex128", 896, 896, 896),
    ("complex128", 1280, 1280, 1280),
    ("complex128", 2048, 2048, 2048),
    ("complex128", 8192, 4096, 256),
    ("float64", 1280, 1280, 1280),
    ("float64", 1500, 1500, 1500),
]

if __name__ == "__main__":
    sweep(CASES, CONFIGS)
