"""complex128 kernels alone: polymm_dmmaz_* (B realified as read; DM_ZSEL variants of the odd rows'
select) against polymm_dmma_* on B2 written out (kernel only) and cuBLAS ZGEMM, squares. The
variants (0: neg.f64, 1: the sign flipped as bits, 2: two 8-byte loads) lived in the tree it ran
on only; dmma.cu keeps variant 1 and ignores -DDM_ZSEL.

    . .device/setup.sh && python .device/probe26.py
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import ktime  # noqa: E402

from polymm_cuda import tensorcore  # noqa: E402

i64 = np.int64
for n in (1024, 2048, 4096):
    a = cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))
    b = cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))
    bt = cp.ascontiguousarray(b.T).T  # K-contiguous view
    ref = cp.matmul(a, b)
    tref = ktime(lambda: cp.matmul(a, b), reps=5)
    b2 = cp.empty((2 * n, 2 * n))
    b2[0::2, 0::2], b2[0::2, 1::2], b2[1::2, 0::2], b2[1::2, 1::2] = b.real, b.imag, -b.imag, b.real
    ar = a.view(cp.float64)
    out = cp.empty_like(ref)
    outr = out.view(cp.float64)
    tiles = -(-n // 64) * -(-2 * n // 64)
    print(f"== complex128 {n}: cuBLAS {tref:.1f} us", flush=True)
    for mma in (1688, 1684):
        opts = ("-std=c++17", f"-DDM_MMA={mma}", "-DDM_VA=2", "-DDM_VB=2")
        fn = cp.RawModule(code=tensorcore.source("dmma"), options=opts).get_function("polymm_dmma_ak_bn")
        fn.max_dynamic_shared_size_bytes = sm = tensorcore.dmma_smem("polymm_dmma_ak_bn")
        args = (
            *map(np.int32, (n, 2 * n, 2 * n)),
            ar,
            i64(0),
            i64(0),
            i64(2 * n),
            i64(1),
            b2,
            i64(0),
            i64(0),
            i64(2 * n),
            i64(1),
            outr,
            i64(0),
        )
        out.fill(np.nan)
        t = ktime(lambda: fn((tiles, 1, 1), (128, 1, 1), args, shared_mem=sm), reps=5)
        err = float(cp.abs(out - ref).max() / cp.abs(ref).max())
        print(f"  m{mma} real on B2       {t:9.1f} us {tref / t:.2f}x err {err:.1e} regs {fn.num_regs}", flush=True)
        for sel in (0, 1, 2):
            mod = cp.RawModule(code=tensorcore.source("dmma"), options=(*opts, f"-DDM_ZSEL={sel}"))
            for lay, bb, sb in (("bn", b, (0, n, 1)), ("bk", bt, (0, 1, n))):
                if lay == "bk" and sel:
                    continue
                name = f"polymm_dmmaz_ak_{lay}"
                fz = mod.get_function(name)
                fz.max_dynamic_shared_size_bytes = smz = tensorcore.dmma_smem(name)
                zargs = (
                    *map(np.int32, (n, n, n)),
                    a,
                    i64(0),
                    i64(0),
                    i64(n),
                    i64(1),
                    bb,
                    i64(0),
                    *map(i64, sb),
                    out,
                    i64(0),
                )
                out.fill(np.nan)
                t = ktime(lambda: fz((tiles, 1, 1), (128, 1, 1), zargs, shared_mem=smz), reps=5)
                err = float(cp.abs(out - ref).max() / cp.abs(ref).max())
                print(
                    f"  m{mma} {name} sel{sel} {t:9.1f} us {tref / t:.2f}x err {err:.1e} regs {fz.num_regs}", flush=True
                )
    cp.get_default_memory_pool().free_all_blocks()
