"""Two trees of the CPU backend cell by cell of the cliff suite, on one thread, in one process.

    git archive OLD backends/polymm-numba | tar -x -C /tmp/old
    mv /tmp/old/backends/polymm-numba/polymm_numba /tmp/old/polymm_numba_old
    OPENBLAS_NUM_THREADS=1 python scripts/cpu_backend_ab.py /tmp/old [--cases 'square-*'] [--seconds 2]

The old tree is imported as ``polymm_numba_old`` and registered as backend ``cpu-old``; every
round calls it, this tree's ``cpu`` and ``numpy.matmul`` once each, in a new random order, on
one thread each (Numba's and OpenBLAS's), timed by the thread's CPU clock: on a machine that
other work shares, a call then counts only its own time (and the cache misses the others
cause), so kernel and blocking changes show where the whole-suite figures are noise. What it
cannot show is the threading: compare ``polymm bench --suite cliffs`` runs for that.
"""

from __future__ import annotations

import argparse
import os
import sys

import numba
import numpy as np

import polymm
from polymm.testing.reference import random_array
from polymm.tools import cliffs, timing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="folder holding the old tree's package as polymm_numba_old")
    parser.add_argument("--cases", default=None, help="cliff-suite case patterns (default: all host cases)")
    parser.add_argument("--seconds", type=float, default=2.0, help="per cell")
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        raise SystemExit("set OPENBLAS_NUM_THREADS=1: every side on one thread")
    sys.path.insert(0, args.old)
    from polymm_numba_old.backend import CPUBackend as Old

    polymm.register_backend("cpu-old", Old)
    numba.set_num_threads(1)
    rng = np.random.default_rng(2026)
    for case, dtype in cliffs.select(args.cases, ("float32", "float64")):
        if case.gpu_only:
            continue
        layouts = case.operand_layouts
        host = [
            random_array(rng, cliffs._base_shape(s, lay), np.dtype(dtype))
            for s, lay in zip((case.x1, case.x2), layouts)
        ]
        a, b = (cliffs._view(np, h, lay) for h, lay in zip(host, layouts))
        calls = {
            "old": lambda: polymm.matmul(a, b, backend="cpu-old"),
            "new": lambda: polymm.matmul(a, b, backend="cpu"),
            "numpy": lambda: np.matmul(a, b),
        }
        for call in calls.values():
            call()
        times = timing.shuffled(calls, args.seconds)
        best = {name: min(t) for name, t in times.items()}
        print(
            f"{case.name:20s} {dtype:8s} numpy {best['numpy'] * 1e3:9.3f} ms  old {best['numpy'] / best['old']:5.2f}x  "
            f"new {best['numpy'] / best['new']:5.2f}x  new/old time {best['new'] / best['old']:5.2f}  "
            f"({len(times['new'])} rounds)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
