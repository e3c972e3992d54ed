"""The float64 kernel's epilogue: one 16-byte store per pair of C values along n (DM_VSTORE=1,
the kept kernel; the switch lived in the tree it ran on only, 59f829f keeps the 16-byte stores
and ignores it) against one 8-byte store each (0), kernels alone (queued behind a spinning kernel,
best of 3) against cuBLAS, every result checked; and K = 32 / 64 outer products on the FP64
tensor cores against the SIMT kernel "auto" runs them on (K < DMMA_MIN_K).

    . .device/setup.sh && python .device/probe27.py
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import ktime  # noqa: E402

from polymm_cuda import CUDABackend, tensorcore  # noqa: E402

i64 = np.int64
be = CUDABackend()
CASES = [
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 256, 4096),
    (4096, 4096, 32),
    (4096, 4096, 64),
    (2048, 2048, 32),
]


def dmma(a, b, out, vstore, name="polymm_dmma_ak_bn", cplx=False):
    m, k = a.shape
    n = b.shape[1]
    tiles = -(-m // 64) * -(-n * (2 if cplx else 1) // 64)
    mma = tensorcore.dmma_shape(90, 132, tiles)
    opts = ("-std=c++17", f"-DDM_MMA={mma}", "-DDM_VA=2", "-DDM_VB=2", f"-DDM_VSTORE={vstore}")
    fn = cp.RawModule(code=tensorcore.source("dmma"), options=opts).get_function(name)
    fn.max_dynamic_shared_size_bytes = sm = tensorcore.dmma_smem(name)
    args = (
        *map(np.int32, (m, n, k)),
        a,
        i64(0),
        i64(0),
        i64(k),
        i64(1),
        b,
        i64(0),
        i64(0),
        i64(n),
        i64(1),
        out,
        i64(0),
    )
    return lambda: fn((tiles, 1, 1), (128, 1, 1), args, shared_mem=sm)


def check(out, ref):
    return float(cp.abs(out - ref).max() / cp.abs(ref).max())


for m, n, k in CASES:
    a, b = cp.random.standard_normal((m, k)), cp.random.standard_normal((k, n))
    ref = cp.matmul(a, b)
    out = cp.empty_like(ref)
    tref = ktime(lambda: cp.matmul(a, b), reps=5)
    line = f"float64 {m} x {k} @ {k} x {n}: cuBLAS {tref:8.1f} us"
    for vstore in (0, 1):
        f = dmma(a, b, out, vstore)
        out.fill(np.nan)
        t = ktime(f, reps=5)
        line += f" | vstore{vstore} {t:8.1f} ({tref / t:.2f}x, err {check(out, ref):.0e})"
    if k < tensorcore.DMMA_MIN_K:
        a3, b3, o3 = a[None], b[None], out[None]
        out.fill(np.nan)
        t = ktime(lambda: be.matmul(a3, b3, o3, "auto"), reps=5)
        line += f" | auto (SIMT) {t:8.1f} ({tref / t:.2f}x, err {check(out, ref):.0e}; {be.last_plan.kernel})"
    print(line, flush=True)
    cp.get_default_memory_pool().free_all_blocks()

n = 1024
a = cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))
b = cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))
ref = cp.matmul(a, b)
out = cp.empty_like(ref)
tref = ktime(lambda: cp.matmul(a, b), reps=5)
line = f"complex128 {n}: cuBLAS {tref:8.1f} us"
for vstore in (0, 1):
    f = dmma(a, b, out, vstore, "polymm_dmmaz_ak_bn", cplx=True)
    out.fill(np.nan)
    t = ktime(f, reps=5)
    line += f" | vstore{vstore} {t:8.1f} ({tref / t:.2f}x, err {check(out, ref):.0e})"
print(line, flush=True)
