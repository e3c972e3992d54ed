"""complex128 on the FP64 tensor cores: B realified as the kernel reads it (polymm_dmmaz_*) against
B realified into scratch first (realify + polymm_dmma_*), whole calls of the backend (CUDA events
around each call, interleaved with cuBLAS ZGEMM, median of 15) and GPU time (queued behind a
spinning kernel, best of 3); every result checked against cuBLAS's.

    . .device/setup.sh && python .device/probe25.py
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import ktime  # noqa: E402

from polymm.kernels import planner  # noqa: E402
from polymm_cuda import CUDABackend, tensorcore  # noqa: E402

#: one backend per variant: each keeps the plans made under its setting
backends = {"as-read": CUDABackend(), "into-scratch": CUDABackend()}
CASES = [
    ("square-256*", 1, 256, 256, 256, "c"),
    ("square-512", 1, 512, 512, 512, "c"),
    ("square-1024", 1, 1024, 1024, 1024, "c"),
    ("square-1024 B k-major", 1, 1024, 1024, 1024, "bt"),
    ("square-2048", 1, 2048, 2048, 2048, "c"),
    ("square-4096", 1, 4096, 4096, 4096, "c"),
    ("skinny", 1, 8192, 256, 4096, "c"),
    ("batched", 64, 512, 512, 512, "c"),
    ("deep 128x128x65536", 1, 128, 128, 65536, "c"),
]
VARIANTS = {"as-read": 90, "into-scratch": 1000}


def event_time(f) -> float:
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    f()
    e1.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) * 1e3


def rnd(shape):
    return cp.random.standard_normal(shape) + 1j * cp.random.standard_normal(shape)


for name, bt, m, n, k, lay in CASES:
    planner.REALIFY_WORK = 0 if name.endswith("*") else 1 << 25
    a = rnd((bt, m, k) if bt > 1 else (m, k))
    b = rnd((bt, n, k) if bt > 1 else (n, k)).swapaxes(-1, -2) if lay == "bt" else rnd((bt, k, n) if bt > 1 else (k, n))
    ref = cp.matmul(a, b)
    a3, b3 = (x if x.ndim == 3 else x[None] for x in (a, b))
    outs = {v: cp.full(a3.shape[:2] + (b3.shape[2],), np.nan, dtype=cp.complex128) for v in VARIANTS}
    calls = {"cuBLAS": lambda: cp.matmul(a, b)}
    for v in VARIANTS:

        def call(v=v):
            backends[v].matmul(a3, b3, outs[v], "auto")

        calls[v] = call
    reasons = {}
    for v, cc in VARIANTS.items():
        tensorcore.DMMAZ_MIN_CC = cc
        backends[v]._plans.clear()
        calls[v]()
        cp.cuda.Device().synchronize()
        reasons[v] = backends[v].last_plan.reason
        err = float(cp.abs(outs[v].reshape(ref.shape) - ref).max() / cp.abs(ref).max())
        reasons[v] += f" | err {err:.1e}"
    times = {c: [] for c in calls}
    for f in calls.values():
        f()
    for _ in range(15):
        for c, f in calls.items():
            times[c].append(event_time(f))
    gpu = {c: ktime(f, reps=5) for c, f in calls.items()}
    ref_call, ref_gpu = np.median(times["cuBLAS"]), gpu["cuBLAS"]
    print(
        f"== complex128 {name} ({bt}, {m}, {n}, {k}): cuBLAS call {ref_call:.1f} us, GPU {ref_gpu:.1f} us", flush=True
    )
    for v in VARIANTS:
        t = np.median(times[v])
        print(
            f"  {v:13s} call {t:9.1f} us ({ref_call / t:.2f}x)  GPU {gpu[v]:9.1f} us ({ref_gpu / gpu[v]:.2f}x)  {reasons[v]}",
            flush=True,
        )
    cp.get_default_memory_pool().free_all_blocks()
