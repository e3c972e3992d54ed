"""Diagnostic (kernel only): kernels/dmma.cu with 32 x 32 warp tiles (64 x 128 blocks, two per SM)
against 64 x 32 warp tiles (128 x 128 blocks, one per SM), shapes m16n8k4 / m16n8k8, 3 or 4
stages, against cuBLAS DGEMM, with the error against cuBLAS."""

import json
import sys
import numpy as np
import cupy as cp
from polymm_cuda import tensorcore

spin = cp.RawKernel(
    r"""extern "C" __global__ void spin(long long c){ long long t=clock64(); while(clock64()-t<c); }""", "spin"
)


def ktime(f, reps=10, cycles=20_000_000):
    f()
    cp.cuda.Device().synchronize()
    best = 1e9
    for _ in range(3):
        spin((1,), (1,), (np.int64(cycles),))
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps):
            f()
        e1.record()
        e1.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(e0, e1) / reps * 1e3)
    return best


src = tensorcore.source("dmma")
i64 = np.int64
configs = [(32, 2, 1684, 3), (64, 1, 1684, 3), (64, 1, 1684, 4), (64, 1, 1688, 3), (64, 1, 1688, 4)]
results = {}
for n in (1024, 2048, 4096, 8192):
    a = cp.random.standard_normal((n, n))
    b = cp.random.standard_normal((n, n))
    ref = cp.matmul(a, b)
    c = cp.empty_like(ref)
    tref = ktime(lambda: cp.matmul(a, b), reps=5)
    row = {"cublas_us": tref}
    for wm, minb, mma, stages in configs:
        bm = 2 * wm
        smem = stages * (bm * 20 + 16 * 132) * 8
        opts = ("-std=c++17", f"-DDM_WM={wm}", f"-DDM_MINB={minb}", f"-DDM_MMA={mma}", f"-DDM_STAGES={stages}")
        fn = cp.RawModule(code=src, options=opts).get_function("polymm_dmma_ak_bn")
        fn.max_dynamic_shared_size_bytes = smem
        args = (
            np.int32(n),
            np.int32(n),
            np.int32(n),
            a,
            i64(0),
            i64(0),
            i64(n),
            i64(1),
            b,
            i64(0),
            i64(0),
            i64(n),
            i64(1),
            c,
            i64(0),
        )

        def run():
            return fn((n // 128, n // bm, 1), (256, 1, 1), args, shared_mem=smem)

        c.fill(np.nan)
        t = ktime(run, reps=5)
        err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
        key = f"wm{wm}/minb{minb}/{mma}/st{stages}"
        row[key] = (t, err, fn.num_regs, fn.local_size_bytes)
        print(
            f"n={n} {key:22s}: {t:9.1f} us, {tref / t:4.2f}x cuBLAS ({tref:.1f}), err {err:.1e}, regs {fn.num_regs}, local {fn.local_size_bytes}",
            flush=True,
        )
    results[n] = row
json.dump(results, open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dmma3.json", "w"), indent=1)
