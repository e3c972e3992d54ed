"""Session 31: a batch broadcast along two axes, (64, 1, 32, 32) @ (1, 64, 32, 32), its 64 outer
indices handed to the CPU backend at once (matmul_groups: the team counted once, each call's small
products on it) against one call per outer index (the method removed), and NumPy; each call right
after an untimed NumPy product (a user's program), 60 rounds in turn, medians and bests.
    python benchmarks/cliffs/cpu-16core-2026-12-04-runs/groups-ab.py
"""

import statistics
import time

import numpy as np

import polymm
from polymm_numba import backend as cpu

rng = np.random.default_rng(0)
groups = cpu.CPUBackend.matmul_groups
for dt in ("float32", "float64"):
    a = rng.standard_normal((64, 1, 32, 32)).astype(dt)
    b = rng.standard_normal((1, 64, 32, 32)).astype(dt)
    assert np.allclose(polymm.matmul(a, b), a @ b)
    times = {}
    for _ in range(60):
        for name in ("numpy", "one call per index", "matmul_groups"):
            if name == "one call per index":
                del cpu.CPUBackend.matmul_groups
            np.matmul(a, b)
            start = time.perf_counter()
            np.matmul(a, b) if name == "numpy" else polymm.matmul(a, b)
            times.setdefault(name, []).append(time.perf_counter() - start)
            cpu.CPUBackend.matmul_groups = groups
    ref = statistics.median(times["numpy"])
    for name, v in times.items():
        med = statistics.median(v)
        print(f"{dt} {name:20} median {med * 1e3:7.3f} ms ({ref / med:.2f}x NumPy)  best {min(v) * 1e3:7.3f} ms")
