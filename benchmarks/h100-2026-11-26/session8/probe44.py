"""complex128 in the wide unswapped tiles (the planner's since 597d5b2 where the 64 x 64 tiles
would fill at most three waves): the MMA shape, stages and K slice of that tile. Kernels alone, as
``probe40.py``.

    . .device/setup.sh && python .device/probe44.py
"""

import sys

sys.path.insert(0, ".device")
import probe40  # noqa: E402, F401  (its shared-memory sizes)
import probe31  # noqa: E402

WIDE = dict(DM_SWAP=0, DM_WN=64, DM_MINB=2)
CONFIGS = {
    "16816 s3 (planner)": dict(DM_MMA=16816, DM_STAGES=3, **WIDE),
    "16816 s4": dict(DM_MMA=16816, DM_STAGES=4, **WIDE),
    "16816 s2": dict(DM_MMA=16816, DM_STAGES=2, **WIDE),
    "1688 s3": dict(DM_MMA=1688, DM_STAGES=3, **WIDE),
    "1684 s3": dict(DM_MMA=1684, DM_STAGES=3, **WIDE),
    "16816 k32 s2": dict(DM_MMA=16816, DM_STAGES=2, DM_BK=32, **WIDE),
    "1688 k32 s2": dict(DM_MMA=1688, DM_STAGES=2, DM_BK=32, **WIDE),
}
CASES = [
    ("complex128", 1024, 1024, 1024),
    ("complex128", 8192, 4096, 256),
    ("complex128", 1280, 1280, 1280),
]

if __name__ == "__main__":
    probe31.sweep(CASES, CONFIGS)
