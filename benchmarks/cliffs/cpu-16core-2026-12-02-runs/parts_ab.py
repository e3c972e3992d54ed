"""A/B of cpu-narrow.splitk_parts (8 against 16) on the vector-matrix cells, each side alone."""

import time

import numba
import numpy as np

import polymm
from polymm_numba import params

rng = np.random.default_rng(0)
nth = numba.get_num_threads()
cases = []
for dt in ("float32", "float64"):
    for m in (1, 4):
        a = rng.standard_normal((m, 4096)).astype(dt)
        b = rng.standard_normal((4096, 4096)).astype(dt)
        cases.append((f"{m}x4096x4096 {dt}", a, b))
res = {}
for _ in range(5):
    for parts in (8, 16):
        params.NARROW_SPLITK_PARTS = parts
        for name, a, b in cases:
            polymm.matmul(a, b)
            ts = []
            end = time.perf_counter() + 0.25
            while time.perf_counter() < end:
                start = time.perf_counter()
                got = polymm.matmul(a, b)
                ts.append(time.perf_counter() - start)
            res.setdefault((name, parts), []).append(min(ts))
            ref = a.astype(np.float64) @ b.astype(np.float64)
            tight = a.dtype == np.float64
            assert np.allclose(got, ref, rtol=1e-10 if tight else 1e-3, atol=1e-9 if tight else 1e-2)
for name, *_ in cases:
    t8, t16 = min(res[(name, 8)]), min(res[(name, 16)])
    print(f"{nth} threads {name}: parts 8 {t8 * 1e3:.3f} ms, parts 16 {t16 * 1e3:.3f} ms ({t16 / t8:.2f})")
