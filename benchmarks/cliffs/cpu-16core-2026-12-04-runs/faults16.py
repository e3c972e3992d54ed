"""Session 31: what a new result's first touch costs polymm against NumPy on many threads.

A large result (64 MiB for outer-k32) is new memory each call: the kernel zeroes its pages as
they are first written. Per case, in turn over rounds (with --beside-numpy each right after an
untimed NumPy product, a user's program; else alone, OpenBLAS's threads asleep): NumPy; polymm into a new result (as users call it); into an out= already touched;
into a new out= first touched by one page write per 4 KiB in even contiguous shares per
thread; and (auto_slabs plans) into a new result with the slab grid turned to row groups only,
so that each thread first touches its own rows. Medians and bests, ms.
    python benchmarks/cliffs/cpu-16core-2026-12-04-runs/faults16.py [CASES] [--beside-numpy]
"""

import statistics
import sys
import time

import numpy as np

import polymm
from polymm.tools import cliffs
from polymm_numba import backend as cpu

print(polymm.get_backend("cpu").devices(), flush=True)  # the pool starts as polymm starts it
import numba  # noqa: E402
from numba import prange  # noqa: E402


@numba.njit(parallel=True)
def touch(flat, step):
    n = flat.shape[0]
    nt = numba.get_num_threads()
    chunk = (n + nt - 1) // nt
    for t in prange(nt):
        for i in range(t * chunk, min(n, (t + 1) * chunk), step):
            flat[i] = 0


grid = cpu._slab_grid
rows_only = lambda m, n, nth, blk, p, k=None: (1, max(1, min(nth, m // blk.mr)))  # noqa: E731
rng = np.random.default_rng(0)
cases = {c.name: c for c in cliffs.CASES}
beside = "--beside-numpy" in sys.argv
args = [a for a in sys.argv[1:] if not a.startswith("--")]
names = args[0].split(",") if args else ["outer-k32", "square-4096", "square-2048", "transposed-1024", "square-1024"]
for dt in ("float32", "float64"):
    for name in names:
        case = cases[name]
        x1, x2 = (
            cliffs._view(np, rng.standard_normal(cliffs._base_shape(s, lay)).astype(dt), lay)
            for s, lay in zip((case.x1, case.x2), case.operand_layouts)
        )
        want = x1 @ x2
        warm = np.empty_like(want)
        touch(warm.reshape(-1), 1024)
        step = 4096 // want.itemsize

        def touched():
            o = np.empty_like(want)
            touch(o.reshape(-1), step)
            polymm.matmul(x1, x2, out=o)

        def by_rows():
            cpu._slab_grid = rows_only
            try:
                polymm.matmul(x1, x2)
            finally:
                cpu._slab_grid = grid

        variants = {
            "numpy": lambda: np.matmul(x1, x2),
            "polymm": lambda: polymm.matmul(x1, x2),
            "out= touched": lambda: polymm.matmul(x1, x2, out=warm),
            "new out= touched first": touched,
            "row groups": by_rows,
        }
        for f in variants.values():
            f()
        assert np.allclose(polymm.matmul(x1, x2), want, rtol=1e-3, atol=1e-3 * np.sqrt(x1.shape[-1]))
        times = {}
        once = time.perf_counter()
        np.matmul(x1, x2)
        rounds = max(3, min(25 if beside else 8, int(1.5 / (5 * (time.perf_counter() - once) + 1e-9))))
        for _ in range(rounds):
            for v, f in variants.items():
                if beside:
                    np.matmul(x1, x2)
                else:
                    time.sleep(0.15)  # OpenBLAS's threads stop spinning (about 0.1 s)
                start = time.perf_counter()
                f()
                times.setdefault(v, []).append(time.perf_counter() - start)
        ref = statistics.median(times["numpy"])
        line = ", ".join(
            f"{v} {statistics.median(t) * 1e3:.3f}/{min(t) * 1e3:.3f} ({ref / statistics.median(t):.2f}x)"
            for v, t in times.items()
        )
        print(
            f"{dt} {name} ({rounds} rounds{', beside NumPy' if beside else ', alone'}; median/best ms): {line}",
            flush=True,
        )
