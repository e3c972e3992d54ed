"""Blockings of the CPU backend's packed kernel against OpenBLAS, in one process.

    OPENBLAS_NUM_THREADS=1 python scripts/cpu_blockings.py --dtype float32 --sizes 512,1024,2048 \
        --blockings 8,32,128,2048,512:14,32,252,2048,256 [--seconds 12]
    OPENBLAS_NUM_THREADS=2 python scripts/cpu_blockings.py --threads 2 --sizes 2048,4096 \
        --blockings 8,32,128,2048,256:8,32,128,512,256

Each blocking (``mr,nr,mc,nc,kc``) runs the packed kernel alone, and ``numpy.matmul`` beside
them; every round calls each once, in a new random order. On one thread (``auto_serial``) a
call is timed by the thread's CPU clock (other processes on a shared machine then add no time
to a call, only cache misses, and to every candidate alike); on ``--threads`` N > 1 it is the
parallel driver the planner runs on large products (``auto_parallel``, loop iterations handed
out one at a time as the backend does), by the wall clock, each call after a pause that lets
the other side's threads sleep. Prints best and median per call and the ratio to NumPy's
best. The evidence of the ``cpu-blocking`` entries of the device database was taken with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numba
import numpy as np

import polymm
from polymm.tools import timing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--sizes", default="1024")
    parser.add_argument("--blockings", required=True, help="mr,nr,mc,nc,kc blockings, colon-separated")
    parser.add_argument("--seconds", type=float, default=12.0, help="per size")
    parser.add_argument("--threads", type=int, default=1, help="both sides' threads (default 1)")
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != str(args.threads):
        raise SystemExit(f"set OPENBLAS_NUM_THREADS={args.threads}: both sides on as many threads")
    numba.set_num_threads(args.threads)
    kind = "auto_serial" if args.threads == 1 else "auto_parallel"
    backend = polymm.get_backend("cpu")
    dt = np.dtype(args.dtype)
    blockings = [tuple(int(x) for x in b.split(",")) for b in args.blockings.split(":")]
    rng = np.random.default_rng(0)
    for n in (int(s) for s in args.sizes.split(",")):
        a, b = (rng.standard_normal((1, n, n)).astype(dt) for _ in range(2))
        out = np.empty((1, n, n), dt)
        expect = a[0].astype(np.float64) @ b[0]
        calls = {"numpy": lambda: np.matmul(a[0], b[0])}
        for mr, nr, mc, nc, kc in blockings:
            kernel = backend._packed(kind, dt, mr, nr)
            calls[f"{mr} x {nr}, mc {mc} nc {nc} kc {kc}"] = lambda k=kernel, p=(mc, nc, kc): k(
                a, b, out, *p, args.threads
            )
        for name, call in calls.items():
            call()
            if name != "numpy":
                error = np.abs(out[0] - expect).max() / np.abs(expect).max()
                assert error < 1e-4, (name, error)
        if args.threads == 1:
            times = timing.shuffled(calls, args.seconds)
        else:
            numba.set_parallel_chunksize(1)
            times = timing.shuffled(calls, args.seconds, clock=time.perf_counter, before=lambda: time.sleep(0.15))
        ref = min(times["numpy"])
        print(f"{dt.name} {n}^3, {args.threads} thread(s), {len(times['numpy'])} rounds:")
        for name, t in times.items():
            print(
                f"  {name:36s} best {min(t) * 1e3:9.3f} ms  median {statistics.median(t) * 1e3:9.3f}  {ref / min(t):.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
