"""GFLOP/s of the CPU backend vs numpy.matmul (same thread count) and tiny-call overhead.

Run: NUMBA_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 python bench/bench.py [algorithm]
"""
import sys
import time

import numpy as np

from polymm_numba import CPUBackend


def median_time(f, reps):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main():
    alg = sys.argv[1] if len(sys.argv) > 1 else "auto"
    sizes = [int(s) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else [512, 1024, 2048]
    be = CPUBackend()
    print(be.devices()[0])
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        for n in sizes:
            a = (rng.random((1, n, n)) + 0.5).astype(dt)
            b = (rng.random((1, n, n)) + 0.5).astype(dt)
            out = np.empty((1, n, n), dt)
            reps = 3 if n >= 2048 else 7
            tn = median_time(lambda: np.matmul(a[0], b[0]), reps)
            tb = median_time(lambda: be.matmul(a, b, out, alg), reps)
            gf = 2.0 * n ** 3 / 1e9
            print(f"{np.dtype(dt).name:8s} {n:5d}  polymm-numba {gf / tb:7.1f} GFLOP/s"
                  f"  numpy {gf / tn:7.1f} GFLOP/s  ratio {tn / tb:5.2f}", flush=True)
    a = np.random.rand(1, 4, 4).astype(np.float32)
    b = np.random.rand(1, 4, 4).astype(np.float32)
    out = np.empty((1, 4, 4), np.float32)
    for _ in range(1000):
        be.matmul(a, b, out, alg)
    n = 100000
    t = time.perf_counter()
    for _ in range(n):
        be.matmul(a, b, out, alg)
    tb = (time.perf_counter() - t) / n
    a2, b2 = a[0], b[0]
    t = time.perf_counter()
    for _ in range(n):
        np.matmul(a2, b2)
    tn = (time.perf_counter() - t) / n
    print(f"4x4 float32: backend.matmul {tb * 1e6:.2f} us/call, numpy.matmul {tn * 1e6:.2f} us/call")


if __name__ == "__main__":
    main()
