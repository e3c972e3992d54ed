"""How many threads a CPU product should take beside NumPy's: team-sizing policies A/B, in one process.

    python scripts/cpu_team_ab.py 256x256x256:float32:3,4096x4096x1:float32:3   # MxKxN:dtype:seconds

Each round calls NumPy's product and then ``polymm.matmul`` under each policy, and NumPy's product
itself, each right after an untimed NumPy product, in a random order (``polymm.tools.timing.shuffled``;
a user's program: NumPy and polymm alternating, so OpenBLAS's threads are still spinning when
polymm starts). Policies:

- ``counted``: the backend's own sizing (``polymm_numba.neighbours.team_size``): the cores less
  the running threads of this process outside Numba's pool (OpenBLAS's spinners) and of others,
  the spinners not counted where the product outlasts their spin;
- ``spinners-shared``: the same, but this process's spinning threads counted as sharing a core
  (each yields it within a time slice), not holding it; ``spinners-half``: each as half a core;
- ``every-thread``: Numba's whole pool.

Prints each policy's median and best, and NumPy's, per shape, with the load average.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import polymm
from polymm.tools import timing
from polymm_numba import neighbours


def main() -> int:
    counted = neighbours.team_size

    def spinners_shared(limit, lock, share=0, **_):
        counted(limit, lock)  # learns the pool as the backend does
        tasks = neighbours.os.listdir(neighbours._TASKS)
        others = neighbours._running(tasks, neighbours._pool, False)
        own = 1 + others + neighbours._running(tasks, neighbours._pool, True)
        elsewhere = neighbours._running_elsewhere(own)
        return max(1, min(limit, int(neighbours._CPUS - elsewhere - share * others)))

    policies = {
        "counted": counted,
        "spinners-half": lambda limit, lock, **_: spinners_shared(limit, lock, 0.5),
        "spinners-shared": spinners_shared,
        "every-thread": lambda limit, lock, **_: limit,
    }
    teams = {name: [] for name in policies}

    def noted(name):
        def team(limit, lock, **options):
            size = policies[name](limit, lock, **options)
            teams[name].append(size)
            return size

        return team

    rng = np.random.default_rng(0)
    for item in sys.argv[1].split(","):
        shape, dtype, seconds = item.split(":")
        m, k, n = (int(v) for v in shape.split("x"))
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        for name in teams:
            teams[name].clear()
        for policy in policies.values():  # compiled before the clock, with and without NumPy's spinners
            neighbours.team_size = policy
            polymm.matmul(a, b)
            np.matmul(a, b)
            polymm.matmul(a, b)

        def under(name, a=a, b=b):
            def call():
                neighbours.team_size = noted(name)
                polymm.matmul(a, b)

            return call

        calls = {name: under(name) for name in policies} | {"numpy": lambda a=a, b=b: np.matmul(a, b)}
        times = timing.shuffled(calls, float(seconds), clock=time.perf_counter, before=lambda a=a, b=b: np.matmul(a, b))
        ref = times.pop("numpy")
        neighbours.team_size = counted
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        cells = "  ".join(
            f"{name} {statistics.median(t) * 1e6:.0f}/{min(t) * 1e6:.0f}"
            f" (team {statistics.median(teams[name]) if teams[name] else '-'})"
            for name, t in times.items()
        )
        print(
            f"{shape} {dtype} ({len(ref)} rounds, load {load}) us median/best: numpy {statistics.median(ref) * 1e6:.0f}/"
            f"{min(ref) * 1e6:.0f}  {cells}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
