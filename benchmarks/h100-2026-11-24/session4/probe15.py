"""Diagnostic (session 4): PyTorch tensors seen through ForeignView (now) against CuPy views (the
former CupyKind.view_foreign, restored here), in one process, interleaved: host time per call and
whole calls under CUDA events beside torch.matmul; and whether a torch product just before
changes an int8 CuPy product's time (the int8 1024 cell read 47 us after the bfloat16 ones)."""

import time

import cupy as cp
import numpy as np
import torch

import polymm
from polymm.timing import cuda_clock, measure
from polymm_cuda import arrays as cuda_arrays

_new = cuda_arrays.CupyKind.view_foreign


def _old(self, x):  # the view of 2fef1d5..d6d4e97, for comparison
    dtype = cuda_arrays._torch_dtypes().get(x.dtype)
    if dtype is None or x.requires_grad:
        return None
    if x.is_conj() or x.is_neg():
        x = x.resolve_conj().resolve_neg()
    shape, strides = x.shape, x.stride()
    if 0 in shape:
        return None
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    memory = self.cp.cuda.UnownedMemory(x.data_ptr(), extent * dtype.itemsize, x, x.device.index)
    byte_strides = tuple(s * dtype.itemsize for s in strides)
    return self.cp.ndarray(tuple(shape), dtype, self.cp.cuda.MemoryPointer(memory, 0), byte_strides)


def host_per_call(f, n=20, reps=9):
    for _ in range(10):
        f()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best = min(best, (t1 - t0) / n * 1e6)
    return best


clock = cuda_clock()
for n in (1024, 2048):
    x = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    y = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    for rnd in range(3):
        row = []
        for label, view in (("ForeignView", _new), ("CuPy view", _old)):
            cuda_arrays.CupyKind.view_foreign = view
            h = host_per_call(lambda: polymm.matmul(x, y))
            e = measure(lambda: polymm.matmul(x, y), clock, samples=7, budget=0.3).best
            row.append(f"{label}: host {h:5.1f} us, call {e * 1e6:5.1f} us")
        t = measure(lambda: torch.matmul(x, y), clock, samples=7, budget=0.3).best
        th = host_per_call(lambda: torch.matmul(x, y))
        print(
            f"bf16 {n} round {rnd}: " + "; ".join(row) + f"; torch.matmul host {th:5.1f} us, call {t * 1e6:5.1f} us",
            flush=True,
        )
cuda_arrays.CupyKind.view_foreign = _new

a = cp.asarray(np.random.default_rng(0).integers(-100, 100, (1024, 1024)).astype(np.int8))
x = torch.randn(1024, 1024, device="cuda").to(torch.bfloat16)
for rnd in range(3):
    alone = measure(lambda: polymm.matmul(a, a), clock, samples=7, budget=0.3).best
    polymm.matmul(x, x)
    torch.matmul(x, x)
    after = measure(lambda: polymm.matmul(a, a), clock, samples=7, budget=0.3).best
    ref = measure(lambda: cp.matmul(a, a), clock, samples=3, budget=0.3).best
    h = host_per_call(lambda: polymm.matmul(a, a))
    print(
        f"int8 1024 round {rnd}: {alone * 1e6:.1f} us; after torch products {after * 1e6:.1f} us; host {h:.1f} us; "
        f"cupy.matmul {ref * 1e6:.1f} us",
        flush=True,
    )
