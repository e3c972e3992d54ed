"""GFLOP/s of the CPU backend vs numpy.matmul (same thread count) and tiny-call overhead.

Run:  NUMBA_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 python bench/bench.py [algorithm] [sizes]

NumPy and the backend are timed in alternating blocks (so both see the same
machine load); medians and bests of the repetitions are printed.
"""

import os
import sys
import time

import numpy as np

from polymm_numba import CPUBackend


def interleaved(fns, reps, rounds=3, pause=0.3):
    """Median and best time of each function over ``rounds`` blocks of ``reps`` calls.

    Blocks of different functions alternate, with a pause before each block
    and one untimed call to open it.  Without the pause, whichever function
    runs right after OpenBLAS competes with OpenBLAS's worker threads, which
    keep spinning for a while after a call.
    """
    ts = [[] for _ in fns]
    for _ in range(rounds):
        for f, t in zip(fns, ts):
            time.sleep(pause)
            f()
            for _ in range(reps):
                t0 = time.perf_counter()
                f()
                t.append(time.perf_counter() - t0)
    return [(float(np.median(t)), min(t)) for t in ts]


def main():
    alg = sys.argv[1] if len(sys.argv) > 1 else "auto"
    sizes = [int(s) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else [512, 1024, 2048]
    be = CPUBackend()
    print(be.devices()[0], "| load average %.2f %.2f %.2f" % os.getloadavg())
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        for n in sizes:
            a = (rng.random((1, n, n)) + 0.5).astype(dt)
            b = (rng.random((1, n, n)) + 0.5).astype(dt)
            out = np.empty((1, n, n), dt)
            reps = 2 if n >= 2048 else 5
            (tn, bn), (tb, bb) = interleaved([lambda: np.matmul(a[0], b[0]), lambda: be.matmul(a, b, out, alg)], reps)
            gf = 2.0 * n**3 / 1e9
            print(
                f"{np.dtype(dt).name:8s} {n:5d}  median: polymm-numba {gf / tb:6.1f} GFLOP/s"
                f"  numpy {gf / tn:6.1f}  ratio {tn / tb:4.2f}   |  best: {gf / bb:6.1f}"
                f" vs {gf / bn:6.1f}  ratio {bn / bb:4.2f}",
                flush=True,
            )
    a = np.random.rand(1, 4, 4).astype(np.float32)
    b = np.random.rand(1, 4, 4).astype(np.float32)
    out = np.empty((1, 4, 4), np.float32)
    a2, b2 = a[0], b[0]
    n = 20000

    def loop_backend():
        for _ in range(n):
            be.matmul(a, b, out, alg)

    def loop_numpy():
        for _ in range(n):
            np.matmul(a2, b2)

    (tb, bb), (tn, bn) = interleaved([loop_backend, loop_numpy], 3)
    print(
        f"4x4 float32 (best of 9 x {n} calls): backend.matmul {bb / n * 1e6:.2f} us/call,"
        f" numpy.matmul {bn / n * 1e6:.2f} us/call"
    )
    print(be.devices()[0], "| load average %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
