"""The CPU backend's team sizing with and without the machine's other processes counted, A/B in one process.

    python scripts/cpu_neighbours_ab.py 200:float64:4,512:float32:6,2048:float64:20   # N:dtype:seconds

Each round calls both variants once, in a random order (``polymm.matmul``, whole calls, wall
clock); "process only" replaces the count of other processes' running threads by zero (the
sizing before 2026-11-27). Prints best and median per variant; run it while other work loads
the machine (on a quiet one both variants are the same code path).
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import numpy as np

import polymm
from polymm_numba import neighbours


def main() -> int:
    machine_aware = neighbours._running_elsewhere
    rng = np.random.default_rng(0)
    for item in sys.argv[1].split(","):
        n, dtype, seconds = item.split(":")
        a, b = (rng.standard_normal((int(n), int(n))).astype(dtype) for _ in range(2))

        def counted(a=a, b=b):
            neighbours._running_elsewhere = machine_aware
            polymm.matmul(a, b)

        def process_only(a=a, b=b):
            neighbours._running_elsewhere = lambda own, machine=None: 0
            polymm.matmul(a, b)

        calls = {"machine-aware": counted, "process only": process_only}
        times = {name: [] for name in calls}
        for call in calls.values():
            call()
        order = list(calls)
        end = time.perf_counter() + float(seconds)
        while time.perf_counter() < end:
            random.shuffle(order)
            for name in order:
                start = time.perf_counter()
                calls[name]()
                times[name].append(time.perf_counter() - start)
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        cells = "  ".join(
            f"{name}: best {min(t) * 1e3:.3f} ms, median {statistics.median(t) * 1e3:.3f}" for name, t in times.items()
        )
        print(f"{n} {dtype} ({len(times['process only'])} rounds, load {load}): {cells}", flush=True)
    neighbours._running_elsewhere = machine_aware
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
