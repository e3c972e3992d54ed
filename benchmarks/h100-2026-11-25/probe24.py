"""DMMA tiles on the kernel of 047ed1e: warp tiles, warps per block, stages, K slice, blocks per SM,
float64 squares (and 512), kernels alone against cuBLAS DGEMM, every result checked.

    . .device/setup.sh && python .device/probe24.py OUT.json
"""

import json
import sys

import cupy as cp

sys.path.insert(0, ".device")
from dmma_sweep import run  # noqa: E402
from sweep import ktime  # noqa: E402

CONFIGS = {
    "64x64-1688-s4-b3": dict(DM_MMA=1688),
    "64x64-1684-s4-b3": dict(DM_MMA=1684),
    "w64x32-1688-s3-b2": dict(DM_MMA=1688, DM_WM=64, DM_STAGES=3, DM_MINB=2),
    "w64x32-1684-s3-b2": dict(DM_MMA=1684, DM_WM=64, DM_STAGES=3, DM_MINB=2),
    "w32x64-1688-s3-b2": dict(DM_MMA=1688, DM_WN=64, DM_STAGES=3, DM_MINB=2),
    "4x2w-1688-s4-b1": dict(DM_MMA=1688, DM_WARPS_M=4, DM_STAGES=4, DM_MINB=1),
    "2x4w-1688-s4-b1": dict(DM_MMA=1688, DM_WARPS_N=4, DM_STAGES=4, DM_MINB=1),
    "64x64-bk32-1688-s3-b2": dict(DM_MMA=1688, DM_BK=32, DM_STAGES=3, DM_MINB=2),
    "64x64-1688-s4-b2": dict(DM_MMA=1688, DM_MINB=2),
    "64x64-1688-s6-b2": dict(DM_MMA=1688, DM_STAGES=6, DM_MINB=2),
    "32x64-1684-s4-b4": dict(DM_MMA=1684, DM_WARPS_M=1, DM_MINB=4),
}


def main() -> None:
    path = sys.argv[1]
    names = sys.argv[2:] or list(CONFIGS)
    results = {}
    for n in (512, 1024, 2048, 4096, 8192):
        a = cp.random.standard_normal((n, n))
        b = cp.random.standard_normal((n, n))
        bt = cp.ascontiguousarray(b.T)
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b), reps=5)
        rows = {"cublas_us": tref}
        for name in names:
            try:
                rows[f"{name}/ak_bn"] = run(
                    name, CONFIGS[name], n, "ak_bn", 2, ((a, (n, 1)), (b, (n, 1))), ref, tref, out
                )
                if n == 2048:
                    rows[f"{name}/ak_bk"] = run(
                        name, CONFIGS[name], n, "ak_bk", 2, ((a, (n, 1)), (bt, (1, n))), ref, tref, out
                    )
            except Exception as e:  # a config that does not compile or launch
                print(f"n={n} {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                rows[name] = repr(e)[:300]
        results[n] = rows
        cp.get_default_memory_pool().free_all_blocks()
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
