"""8-bit products with B N-contiguous (as NumPy stores it) on Hopper: B read as stored through
registers (``polymm_wgmma_<type>_kn``, C^T = B^T A^T, one launch) against B first copied K-major
(``kernels/transpose.cu``, then ``polymm_wgmma_<type>_nk``: two launches). Whole calls of the
backend (CUDA events around each call, interleaved with ``cupy.matmul``, median of 31) and GPU time
(queued behind a spinning kernel, best of 10); every result compared exactly with CuPy's.

    . .device/setup.sh && python .device/probe30.py

Run on the working tree just before commit 73dbc1e (``probe30.log``), which still had the switch
``polymm_cuda.wgmma.SWAP_8BIT_MAX_WORK`` (8-bit products up to that many multiply-adds read B as
stored, larger ones copied it first). The swapped kernel was faster in every case, so the commit
dropped the switch: B is now copied only where its rows are not 16-byte aligned, and this script
needs that working tree to run again.
"""

import sys

import cupy as cp

sys.path.insert(0, ".device")
from sweep import call_and_gpu_times  # noqa: E402

from polymm_cuda import CUDABackend, wgmma  # noqa: E402

#: one backend per variant, each keeping the plans made under its SWAP_8BIT_MAX_WORK
VARIANTS = {"kn": 2**62, "copy+nk": 0}
backends = {v: CUDABackend() for v in VARIANTS}
CASES = [
    ("int8", 1, 1024, 1024, 1024),
    ("uint8", 1, 1024, 1024, 1024),
    ("int8", 1, 2048, 2048, 2048),
    ("int8", 1, 4096, 4096, 4096),
    ("int8", 1, 8192, 8192, 8192),
    ("int8", 1, 8192, 4096, 256),
    ("int8", 64, 512, 512, 512),
    ("int8", 1, 512, 512, 512),
    ("int8", 1, 256, 256, 256),
    ("uint8", 1, 4096, 4096, 4096),
]


def compare(cases):
    for dtype, bt, m, k, n in cases:
        lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
        a = cp.random.randint(lo, hi, (bt, m, k)).astype(dtype)
        b = cp.random.randint(lo, hi, (bt, k, n)).astype(dtype)
        ref = cp.matmul(a, b)
        calls = {"cupy": lambda: cp.matmul(a, b)}
        notes = {}
        for v, work in VARIANTS.items():
            wgmma.SWAP_8BIT_MAX_WORK = work
            out = cp.full((bt, m, n), 0x5A, dtype=dtype)  # poisoned

            def call(v=v, out=out):
                backends[v].matmul(a, b, out, "auto")

            call()
            cp.cuda.Device().synchronize()
            wrong = int((out != ref).sum())
            notes[v] = f"{backends[v].last_plan.kernel} | wrong {wrong}"
            calls[v] = call
        wgmma.SWAP_8BIT_MAX_WORK = 2**62
        times, gpu = call_and_gpu_times(calls)
        ref_call = times["cupy"]
        print(f"== {dtype} {bt} x {m}x{k} @ {k}x{n}: cupy call {ref_call:.1f} us, GPU {gpu['cupy']:.1f} us", flush=True)
        for v in VARIANTS:
            t = times[v]
            print(f"  {v:8s} call {t:8.1f} us ({ref_call / t:6.2f}x)  GPU {gpu[v]:8.1f} us  {notes[v]}", flush=True)


if __name__ == "__main__":
    compare(CASES)
