"""Why tc-skinny ((8192, 4096) @ (4096, 256), float64) ran slower at b266fc3 than at 433a05b:
the MMA shape and the block order of ``kernels/dmma.cu`` on that shape and on squares, each
launched directly and timed alone (behind a spinning kernel) against cuBLAS DGEMM (16-byte
copies; the configurations' defaults are the kernel's at the time of the run).

    . .device/setup.sh && python .device/probe19.py
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from dmma_sweep import smem  # noqa: E402
from sweep import _error, ktime  # noqa: E402

from polymm_cuda import tensorcore  # noqa: E402

CONFIGS = {
    "1684": dict(DM_MMA=1684),
    "1688": dict(DM_MMA=1688),
    "1684-group8": dict(DM_MMA=1684, DM_GROUP_M=8),
    "1684-group4": dict(DM_MMA=1684, DM_GROUP_M=4),
    "1684-nogroup": dict(DM_MMA=1684, DM_GROUP_M=0),
    "1688-nogroup": dict(DM_MMA=1688, DM_GROUP_M=0),
}

for m, n, k in (
    (8192, 256, 4096),
    (256, 8192, 4096),
    (1000, 1000, 1000),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
):
    a, b = cp.random.standard_normal((m, k)), cp.random.standard_normal((k, n))
    ref = a @ b
    tref = ktime(lambda: cp.matmul(a, b), reps=5)
    out = cp.empty_like(ref)
    for name, o in CONFIGS.items():
        opts = ("-std=c++17", *(f"-D{key}={v}" for key, v in o.items()), "-DDM_VA=2", "-DDM_VB=2")
        fn = cp.RawModule(code=tensorcore.source("dmma"), options=opts).get_function("polymm_dmma_ak_bn")
        fn.max_dynamic_shared_size_bytes = smem(o, "ak_bn")
        i64 = np.int64
        args = (np.int32(m), np.int32(n), np.int32(k), a, i64(0), i64(0), i64(k), i64(1))
        args += (b, i64(0), i64(0), i64(n), i64(1), out, i64(0))
        tm, tn = -(-m // 64), -(-n // 64)
        grid = (tm * tn, 1, 1) if o.get("DM_GROUP_M", 16) else (tn, tm, 1)
        out.fill(np.nan)
        t = ktime(lambda: fn(grid, (128, 1, 1), args, shared_mem=smem(o, "ak_bn")), reps=5)
        print(
            f"{m}x{n}x{k} {name:14s} {t:9.1f} us {tref / t:5.2f}x cuBLAS ({tref:.1f}) err {_error(out, ref):.1e}",
            flush=True,
        )
    cp.get_default_memory_pool().free_all_blocks()
