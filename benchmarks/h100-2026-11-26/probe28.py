"""Small complex128 squares: the SIMT kernel (what the planner picks below REALIFY_WORK multiply-adds
per matrix) against the FP64 tensor cores with B realified as it is read (polymm_dmmaz_*, no
scratch, so the scratch cost REALIFY_WORK stands for is not paid). Whole calls of the backend
(CUDA events around each call, interleaved with cuBLAS ZGEMM, median of 31) and GPU time (queued
behind a spinning kernel, best of 3); every result checked against cuBLAS's.

    . .device/setup.sh && python .device/probe28.py

Run at f7c49d9 (``probe28.log``; its headers then read ``1 x 256^3``; probe29 has since shared
this code). From 8abcdd5 on REALIFY_WORK no longer steers complex128 on Hopper, so there both
variants take polymm_dmmaz wherever the float64 kernel's limits allow.
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import call_and_gpu_times  # noqa: E402

from polymm.kernels import planner  # noqa: E402
from polymm_cuda import CUDABackend  # noqa: E402

#: one backend per variant, each keeping the plans made under its REALIFY_WORK
VARIANTS = {"simt": 1 << 25, "dmmaz": 0}
backends = {v: CUDABackend() for v in VARIANTS}
CASES = [(1, n, n, n) for n in (192, 224, 256, 288, 320)] + [(8, 256, 256, 256)]


def rnd(shape):
    return cp.random.standard_normal(shape) + 1j * cp.random.standard_normal(shape)


def compare(cases):
    """Time and check each (batch, M, K, N) product on both variants and cuBLAS; print a block each."""
    for bt, m, k, n in cases:
        _compare(bt, m, k, n)


def _compare(bt, m, k, n):
    a, b = rnd((bt, m, k)), rnd((bt, k, n))
    ref = cp.matmul(a, b)
    outs = {v: cp.full((bt, m, n), np.nan, dtype=cp.complex128) for v in VARIANTS}
    calls = {"cuBLAS": lambda: cp.matmul(a, b)}
    reasons = {}
    for v, work in VARIANTS.items():
        planner.REALIFY_WORK = work

        def call(v=v):
            backends[v].matmul(a, b, outs[v], "auto")

        calls[v] = call
        call()
        cp.cuda.Device().synchronize()
        err = float(cp.abs(outs[v] - ref).max() / cp.abs(ref).max())
        reasons[v] = f"{backends[v].last_plan.reason} | err {err:.1e}"
    planner.REALIFY_WORK = 1 << 25
    times, gpu = call_and_gpu_times(calls)
    ref_call, ref_gpu = times["cuBLAS"], gpu["cuBLAS"]
    print(f"== complex128 {bt} x {m}x{k} @ {k}x{n}: cuBLAS call {ref_call:.1f} us, GPU {ref_gpu:.1f} us", flush=True)
    for v in VARIANTS:
        t = times[v]
        print(
            f"  {v:6s} call {t:7.1f} us ({ref_call / t:.2f}x)  GPU {gpu[v]:7.1f} us ({ref_gpu / gpu[v]:.2f}x)  {reasons[v]}",
            flush=True,
        )


if __name__ == "__main__":
    compare(CASES)
