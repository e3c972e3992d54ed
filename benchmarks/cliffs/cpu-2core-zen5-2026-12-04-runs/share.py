"""Session 32: on 2 cores, as an unprivileged process (the spinners cannot be idled:
neighbours.MAY_YIELD patched False), squares right after a NumPy product on the one core the
spinner leaves (share_spin_seconds out of reach) against the whole team sharing its core (from
0 s), three rounds of each in turn; medians and the program's ratio (NumPy alone over polymm's
call plus what it added to NumPy's next). The evidence of cpu-threads.share_from_cores.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/cliffs/cpu-2core-zen5-2026-12-04-runs/share.py
"""

import statistics
import time

import numpy as np

import polymm
from polymm_numba import neighbours, params

neighbours.MAY_YIELD = False
params.SHARE_FROM_CORES = 1  # sharing allowed here: the side under test
md = statistics.median
rng = np.random.default_rng(0)
for n in (512, 768, 1024, 1536):
    for dt in ("float32", "float64"):
        a = rng.standard_normal((n, n)).astype(dt)
        b = rng.standard_normal((n, n)).astype(dt)
        polymm.matmul(a, b)
        times = {}
        for _ in range(3):
            for side, share in (("free core", 1e9), ("shared", 0.0)):
                params.SHARE_SPIN_SECONDS = share
                ours, numpy_after = times.setdefault(side, ([], []))
                for i in range(10):
                    t0 = time.perf_counter()
                    np.matmul(a, b)
                    t1 = time.perf_counter()
                    polymm.matmul(a, b)
                    t2 = time.perf_counter()
                    if i >= 2:  # the first calls of a side meet the other side's last
                        numpy_after.append(t1 - t0)
                        ours.append(t2 - t1)
        time.sleep(0.2)
        alone = []
        for _ in range(10):
            t0 = time.perf_counter()
            np.matmul(a, b)
            alone.append(time.perf_counter() - t0)
        na = md(alone)
        cells = [
            f"{side}: polymm {md(p) * 1e3:.2f} ms, NumPy after {md(q) * 1e3:.2f}, program {na / (md(p) + max(0, md(q) - na)):.2f}x"
            for side, (p, q) in times.items()
        ]
        print(n, dt, f"NumPy alone {na * 1e3:.2f} ms |", " | ".join(cells), flush=True)
