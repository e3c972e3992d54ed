"""Session 32: a user's program on 2 cores, NumPy and polymm products of one shape in turn. For
each size: NumPy alone, NumPy right after polymm, polymm right after NumPy (medians), and the
program's ratio: NumPy alone over polymm's call plus what it added to NumPy's next. Run once with
the pool spinning (no OMP_WAIT_POLICY) and once passive (OMP_WAIT_POLICY=PASSIVE, what
cpu-threads.passive_from_cores sets where it applies); the last argument 1/0 idles or keeps
NumPy's spinning threads (cpu-threads.yield_spinners).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/cliffs/cpu-2core-zen5-2026-12-04-runs/pair.py 128,256,512,1024 float32 1
"""

import statistics
import sys
import time

import numpy as np

import polymm
from polymm_numba import params

if len(sys.argv) > 3:
    params.YIELD_SPINNERS = sys.argv[3] == "1"
rng = np.random.default_rng(0)
md = statistics.median
for n in [int(x) for x in sys.argv[1].split(",")]:
    a = rng.standard_normal((n, n)).astype(sys.argv[2])
    b = rng.standard_normal((n, n)).astype(sys.argv[2])
    polymm.matmul(a, b), np.matmul(a, b)
    ours, numpy_after = [], []
    end = time.perf_counter() + 4
    while time.perf_counter() < end or len(ours) < 10:
        t0 = time.perf_counter()
        np.matmul(a, b)
        t1 = time.perf_counter()
        polymm.matmul(a, b)
        t2 = time.perf_counter()
        numpy_after.append(t1 - t0)
        ours.append(t2 - t1)
    alone = []
    for _ in ours:
        t0 = time.perf_counter()
        np.matmul(a, b)
        alone.append(time.perf_counter() - t0)
    added = max(0.0, md(numpy_after) - md(alone))
    print(
        f"{n} numpy alone {md(alone) * 1e3:.3f} ms | after polymm {md(numpy_after) * 1e3:.3f} | polymm after numpy "
        f"{md(ours) * 1e3:.3f} (best {min(ours) * 1e3:.3f}) | program ratio {md(alone) / (md(ours) + added):.2f}x",
        flush=True,
    )
