"""The FP64 tensor-core kernel (``kernels/dmma.cu``) with Hopper's largest f64 MMA, m16n8k16 (half
the MMA instructions of m16n8k8 for the same work), and with K slices of 32 (half the barriers
and waits per multiply-add), against the planner's m16n8k8 / m16n8k4 in slices of 16: complex128,
where Nsight Compute finds the FP64 pipe 71% busy against cuBLAS ZGEMM's 85% (``ncu/ncu-z.txt``),
and float64 beside. Kernels alone, as ``../session7/probe31.py`` (its sweep, with this file's
shared-memory sizes, which know the K slice).

    . .device/setup.sh && python .device/probe40.py
"""

import sys

sys.path.insert(0, ".device")
import probe31  # noqa: E402


def smem(o: dict, cplx: bool) -> int:
    """Bytes of shared memory of the ak_bn kernels with -D options ``o`` (``DM_BK`` included)."""
    bm, bn = o.get("DM_WARPS_M", 2) * o.get("DM_WM", 32), o.get("DM_WARPS_N", 2) * o.get("DM_WN", 32)
    bk = o.get("DM_BK", 16)
    rows = bk // 2 if cplx else bk
    return o.get("DM_STAGES", 4) * (bm * (bk + 4) + rows * (bn + 4)) * 8


probe31.smem = smem

#: name -> -D options (64 x 64 tiles of 2 x 2 warps, four stages, three blocks per SM unless named)
CONFIGS = {
    "1688 k16 s4 b3 (planner)": dict(DM_MMA=1688),
    "1684 k16 s4 b3": dict(DM_MMA=1684),
    "16816 k16 s4 b3": dict(DM_MMA=16816),
    "16816 k32 s2 b3": dict(DM_MMA=16816, DM_BK=32, DM_STAGES=2),
    "1688 k32 s2 b3": dict(DM_MMA=1688, DM_BK=32, DM_STAGES=2),
    "16816 k32 s3 b2": dict(DM_MMA=16816, DM_BK=32, DM_STAGES=3, DM_MINB=2),
    "1688 64x128 s3 b2": dict(DM_MMA=1688, DM_WN=64, DM_STAGES=3, DM_MINB=2),
    "16816 64x128 s3 b2": dict(DM_MMA=16816, DM_WN=64, DM_STAGES=3, DM_MINB=2),
    "16816 64x128 k32 s2 b2": dict(DM_MMA=16816, DM_WN=64, DM_BK=32, DM_STAGES=2, DM_MINB=2),
}
CASES = [
    ("complex128", 1024, 1024, 1024),
    ("complex128", 2048, 2048, 2048),
    ("complex128", 4096, 4096, 4096),
    ("float64", 1024, 1024, 1024),
    ("float64", 2048, 2048, 2048),
    ("float64", 4096, 4096, 4096),
]

if __name__ == "__main__":
    probe31.sweep(CASES, CONFIGS)
