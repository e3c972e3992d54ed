"""FP64 tensor-core tiles by shape: the float64 kernel (``kernels/dmma.cu``) and its complex128 form
(``polymm_dmmaz_*``) in 64 x 64 tiles, three blocks per SM (the planner's), against 128 x 64 and
64 x 128 tiles, two per SM, on the cells under 0.9x cuBLAS and their neighbours: the blocks a
wave holds differ, so do the waves a product takes. Kernels alone (behind a spinning kernel, best
of 3 x 5) against ``cupy.matmul`` (DGEMM / ZGEMM) on the same operands; every result checked.

    . .device/setup.sh && python .device/probe31.py
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import _error, ktime  # noqa: E402

from polymm_cuda import tensorcore  # noqa: E402

#: name -> -D options: MMA shape, warp tile, stages, blocks per SM (64 x 64 blocks of 2 x 2 warps of
#: 32 x 32 unless named)
CONFIGS = {
    "64x64-1684-s4-b3": dict(DM_MMA=1684),
    "64x64-1688-s4-b3": dict(DM_MMA=1688),
    "128x64-1684-s3-b2": dict(DM_MMA=1684, DM_WM=64, DM_STAGES=3, DM_MINB=2),
    "128x64-1688-s3-b2": dict(DM_MMA=1688, DM_WM=64, DM_STAGES=3, DM_MINB=2),
    "64x128-1688-s3-b2": dict(DM_MMA=1688, DM_WN=64, DM_STAGES=3, DM_MINB=2),
}
#: (dtype, M, K, N)
CASES = [
    ("complex128", 1024, 1024, 1024),
    ("complex128", 2048, 2048, 2048),
    ("complex128", 8192, 4096, 256),
    ("complex128", 64 * 512, 512, 512),
    ("float64", 1024, 1024, 1024),
    ("float64", 2048, 2048, 2048),
    ("float64", 4096, 4096, 4096),
    ("float64", 8192, 4096, 256),
]


def smem(o: dict, cplx: bool) -> int:
    """Bytes of shared memory of the ak_bn kernels with options ``o`` (``tensorcore.dmma_smem``)."""
    bm, bn = o.get("DM_WARPS_M", 2) * o.get("DM_WM", 32), o.get("DM_WARPS_N", 2) * o.get("DM_WN", 32)
    rows = 8 if cplx else 16
    return o.get("DM_STAGES", 4) * (bm * (16 + 4) + rows * (bn + 4)) * 8


def sweep(cases, configs) -> None:
    """Each (dtype, M, K, N) case in each named configuration of -D options, against cuBLAS."""
    for dtype, m, k, n in cases:
        cplx = dtype == "complex128"
        rng = cp.random.default_rng(7)
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        if cplx:
            a, b = a + 1j * rng.standard_normal((m, k)), b + 1j * rng.standard_normal((k, n))
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b), reps=5)
        print(f"== {dtype} {m}x{k} @ {k}x{n}: cuBLAS {tref:.1f} us", flush=True)
        name = "polymm_dmmaz_ak_bn" if cplx else "polymm_dmma_ak_bn"
        i64 = np.int64
        args = (np.int32(m), np.int32(n), np.int32(k), a, i64(0), i64(0), i64(k), i64(1))
        args += (b, i64(0), i64(0), i64(n), i64(1), out, i64(0))
        rn = 2 * n if cplx else n  # the real product's columns
        for cname, o in configs.items():
            bm, bn = o.get("DM_WARPS_M", 2) * o.get("DM_WM", 32), o.get("DM_WARPS_N", 2) * o.get("DM_WN", 32)
            threads = 32 * o.get("DM_WARPS_M", 2) * o.get("DM_WARPS_N", 2)
            opts = ("-std=c++17", *(f"-D{key}={v}" for key, v in o.items()), "-DDM_VA=2", "-DDM_VB=2")
            fn = cp.RawModule(code=tensorcore.source("dmma"), options=opts).get_function(name)
            fn.max_dynamic_shared_size_bytes = smem(o, cplx)
            tiles = -(-m // bm) * -(-rn // bn)
            out.fill(np.nan)
            t = ktime(lambda: fn((tiles, 1, 1), (threads, 1, 1), args, shared_mem=smem(o, cplx)), reps=5)
            err = _error(out, ref)
            waves = tiles / (132 * o.get("DM_MINB", 3))
            print(
                f"  {cname:20s} {t:9.1f} us {tref / t:5.2f}x  tiles {tiles:5d} ({waves:5.2f} waves)  err {err:.1e}"
                f"  regs {fn.num_regs} local {fn.local_size_bytes}",
                flush=True,
            )
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    sweep(CASES, CONFIGS)
