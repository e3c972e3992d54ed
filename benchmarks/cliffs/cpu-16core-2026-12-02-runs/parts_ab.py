"""A/B of cpu-narrow.splitk_parts on the vector-matrix cells, each side alone (after OpenBLAS's spin)."""
import sys, time, numpy as np, numba, polymm
from polymm_numba import params
rng = np.random.default_rng(0)
nth = numba.get_num_threads()
cases = []
for dt in ("float32", "float64"):
    for m in (1, 4):
        a = rng.standard_normal((m, 4096)).astype(dt); b = rng.standard_normal((4096, 4096)).astype(dt)
        cases.append((f"{m}x4096x4096 {dt}", a, b))
res = {}
for rnd in range(5):
    for parts in (8, 16):
        params.NARROW_SPLITK_PARTS = parts
        for name, a, b in cases:
            f = lambda: polymm.matmul(a, b)
            f(); ts = []
            end = time.perf_counter() + 0.25
            while time.perf_counter() < end:
                s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
            res.setdefault((name, parts), []).append(min(ts))
            ref = a.astype(np.float64) @ b.astype(np.float64)
            assert np.allclose(f(), ref, rtol=1e-3 if a.dtype == np.float32 else 1e-10, atol=1e-2 if a.dtype == np.float32 else 1e-9)
for name, *_ in cases:
    t8, t16 = min(res[(name, 8)]), min(res[(name, 16)])
    print(f"{nth} threads {name}: parts 8 {t8*1e3:.3f} ms, parts 16 {t16*1e3:.3f} ms ({t16/t8:.2f})")
