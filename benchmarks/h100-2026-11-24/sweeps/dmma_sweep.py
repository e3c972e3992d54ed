"""Diagnostic (kernel only): kernels/dmma.cu's MMA shapes (m8n8k4, m16n8k4, m16n8k8) and register
budgets against cuBLAS DGEMM on this GPU, with the error against cuBLAS."""

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
smem = tensorcore.DMMA_SMEM
results = {}
i64 = np.int64
for n in (1024, 2048, 4096, 8192):
    a = cp.random.standard_normal((n, n))
    b = cp.random.standard_normal((n, n))
    ref = cp.matmul(a, b)
    c = cp.empty_like(ref)
    tref = ktime(lambda: cp.matmul(a, b), reps=5)
    row = {"cublas_us": tref}
    for shape in (884, 1684, 1688):
        for minb in (2, 1):
            mod = cp.RawModule(code=src, options=("-std=c++17", f"-DDM_MMA={shape}", f"-DDM_MINB={minb}"))
            fn = mod.get_function("polymm_dmma_ak_bn")
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
                return fn((n // 128, n // 64, 1), (256, 1, 1), args, shared_mem=smem)

            c.fill(np.nan)
            t = ktime(run, reps=5)
            err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
            row[f"{shape}/{minb}"] = (t, err)
            print(
                f"n={n} mma {shape} minb {minb}: {t:9.1f} us, {tref / t:4.2f}x cuBLAS ({tref:.1f}), err {err:.1e}, regs {fn.num_regs}, spill {fn.local_size_bytes}",
                flush=True,
            )
    results[n] = row
json.dump(results, open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dmma.json", "w"), indent=1)
