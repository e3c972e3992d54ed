"""Probe 18: one float64 4096 product by polymm (DMMA) and one by cuBLAS, for Nsight Compute."""

import sys
import cupy as cp
import numpy as np
from polymm_cuda import CUDABackend

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
be = CUDABackend()
rng = np.random.default_rng(0)
a = cp.asarray(rng.standard_normal((1, n, n)))
b = cp.asarray(rng.standard_normal((1, n, n)))
out = cp.empty((1, n, n))
for _ in range(2):
    be.matmul(a, b, out, "auto")
    cp.matmul(a[0], b[0])
cp.cuda.Device().synchronize()
