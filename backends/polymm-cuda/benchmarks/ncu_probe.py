"""A few launches for Nsight Compute: polymm "auto" and cuBLAS on one size.

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats ... \\
        python3 backends/polymm-cuda/benchmarks/ncu_probe.py 4096
"""

import os
import sys

os.environ.setdefault("CUPY_TF32", "0")
import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from polymm_cuda import CUDABackend  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
be = CUDABackend()
rng = np.random.default_rng(0)
a = cp.asarray(rng.standard_normal((1, n, n), dtype=np.float32))
b = cp.asarray(rng.standard_normal((1, n, n), dtype=np.float32))
out = cp.empty((1, n, n), np.float32)
for _ in range(2):
    be.matmul(a, b, out, "auto")
    cp.matmul(a[0], b[0])
cp.cuda.Device().synchronize()
