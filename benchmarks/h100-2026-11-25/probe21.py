"""Diagnostic (session 3 of 2026-11-25): did the TF32 change (4e04308) move the float16 and
bfloat16 cells?  ``python probe21.py old|new``: with ``old``, the wgmma kernel text of 2635ec5
(``.device/wgmma_2635ec5.cu``) replaces this tree's; everything else is this tree.  Prints, per
case, the whole call against the reference (CUDA events, interleaved, medians) and the GPU's
time alone (calls queued behind a spinning kernel, so the host's time is hidden)."""

from __future__ import annotations

import sys
from pathlib import Path

import cupy as cp
import numpy as np

import polymm
from polymm.timing import cuda_clock, interleaved
from polymm_cuda import wgmma

if sys.argv[1] == "old":
    kernels = Path(wgmma.__file__).parent / "kernels"
    old = (kernels / "async_copy.cuh").read_text() + Path(".device/wgmma_2635ec5.cu").read_text()
    plain = wgmma._file_source
    wgmma._file_source = lambda name="tensorcore": old if name == "wgmma" else plain(name)
    wgmma.source.cache_clear()

_SPIN = cp.RawKernel(
    r'extern "C" __global__ void spin(long long c){long long t=clock64();while(clock64()-t<c);}', "spin"
)


def gpu_alone(fn, reps=20) -> float:
    fn()
    cp.cuda.Device().synchronize()
    best = 1e9
    for _ in range(3):
        _SPIN((1,), (1,), (np.int64(40_000_000),))
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(e0, e1) / reps * 1e3)
    return best


def case(name, a, b, ref):
    ours = lambda: polymm.matmul(a, b)  # noqa: E731
    (t_ours, t_ref), _ = interleaved((ours, cuda_clock()), (ref, cuda_clock()), 2.0)
    print(
        f"{sys.argv[1]} {name:14s} whole call {t_ours.median * 1e6:7.1f} us, reference {t_ref.median * 1e6:7.1f} "
        f"({t_ref.median / t_ours.median:.2f}x); GPU alone {gpu_alone(ours):7.1f} us, reference {gpu_alone(ref):7.1f}",
        flush=True,
    )


rng = np.random.default_rng(5)
for n in (1024, 2048, 4096):
    a, b = (cp.asarray(rng.standard_normal((n, n)).astype(np.float16)) for _ in range(2))
    case(f"float16 {n}", a, b, lambda a=a, b=b: cp.matmul(a, b))
import torch  # noqa: E402

for n in (2048,):
    a, b = (torch.randn(n, n, device="cuda").to(torch.bfloat16) for _ in range(2))
    case(f"bfloat16 {n}", a, b, lambda a=a, b=b: torch.matmul(a, b))
a = cp.asarray(rng.standard_normal((8192, 4096)).astype(np.float16))
b = cp.asarray(rng.standard_normal((4096, 256)).astype(np.float16))
case("f16 skinny", a, b, lambda: cp.matmul(a, b))
