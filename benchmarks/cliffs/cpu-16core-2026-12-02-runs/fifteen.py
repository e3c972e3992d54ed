"""Whether one of the host's cores is taken by something else: NumPy's BLAS and polymm on 16
threads against 15 (and 8), alone, medians of many calls on mid-size squares, interleaved."""

import statistics
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

import polymm

rng = np.random.default_rng(0)
cores = numba.config.NUMBA_NUM_THREADS
for n in (256, 512, 1024):
    a = rng.standard_normal((n, n)).astype(np.float32)
    polymm.matmul(a, a)
    times = {}
    for round in range(3):
        for t in sorted({min(8, cores), max(1, cores - 1), cores}):
            numba.set_num_threads(t)
            with threadpool_limits(t):
                for name, f in (("numpy", lambda: a @ a), ("polymm", lambda: polymm.matmul(a, a))):
                    f()
                    samples = []
                    for _ in range(max(5, int(0.3 / (2 * n**3 / 2e11)))):
                        s = time.perf_counter()
                        f()
                        samples.append(time.perf_counter() - s)
                    times.setdefault((name, t), []).append(statistics.median(samples))
                    time.sleep(0.2)  # OpenBLAS's threads stop spinning
    for (name, t), v in sorted(times.items()):
        print(f"n={n:5d} {name:7s} t={t:2d} medians {' '.join(f'{x * 1e3:7.3f}' for x in v)} ms")
