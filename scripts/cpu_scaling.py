"""How the CPU backend scales with threads: polymm and NumPy alone, 1 to N threads, and what a launch costs.

    python scripts/cpu_scaling.py --sizes 256,512,1024,2048 --dtypes float32,float64 --json out.json
    python scripts/cpu_scaling.py --cases outer-k32,gemv-4096,transposed-1024 --threads 4,8,16

For each square size (or cliff-suite case, ``--cases``: its shapes and views), dtype and thread count ``t`` (powers of two up to the cores, and the
cores), ``polymm.matmul`` runs on ``t`` of Numba's threads (``numba.set_num_threads``) and
NumPy on ``t`` of its BLAS's (``threadpoolctl``), each timed alone, polymm both into ``out=`` and
into a new result (as NumPy's: a large one's first touch of fresh pages is part of the call) (:func:`polymm.tools.timing.measure`,
best and median), polymm first and only once OpenBLAS's threads have stopped spinning after the
last NumPy call (``--quiet-seconds``, 0.3 s: they spin for about 0.1 s): a scaling profile of
the kernels, not the interleaved figure of a user's program (``polymm bench --suite cliffs``). Beside them: the path ``"auto"`` takes at ``t`` threads (``polymm explain``'s), and the
cost of one empty parallel launch of ``t`` tasks in the threading layer polymm runs on, the
fixed price of every fork and join a parallel kernel makes. A kernel that does not scale shows
it here: its speedup over one thread against NumPy's, and against that launch price.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=_int_list, default=[256, 512, 1024, 2048], help="square sizes n (n x n @ n x n)")
    p.add_argument("--cases", default=None, help="cliff-suite case names instead of squares (polymm.tools.cliffs)")
    p.add_argument("--dtypes", default="float32,float64", help="comma-separated dtypes")
    p.add_argument(
        "--threads", type=_int_list, default=None, help="thread counts (default: 1, 2, 4, ... and the cores)"
    )
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timing per cell")
    p.add_argument("--most-seconds", type=float, default=0.5, help="skip cells whose one call takes longer than this")
    p.add_argument("--quiet-seconds", type=float, default=0.3, help="idle seconds before polymm's timing")
    p.add_argument("--json", type=Path, default=None, help="write the record here")
    return p.parse_args(argv)


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... below ``cores``, and ``cores``."""
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return counts + [cores]


def launch_seconds(threads: int, calls: int = 2000) -> float:
    """Median seconds of one parallel launch of ``threads`` empty tasks, on ``threads`` threads."""
    import numba

    @numba.njit(parallel=True, cache=False)
    def empty(out):
        for i in numba.prange(out.shape[0]):
            out[i] += 1.0

    out = np.zeros(threads)
    numba.set_num_threads(threads)
    empty(out)
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls // 5):
            empty(out)
        samples.append((time.perf_counter() - start) / (calls // 5))
    return statistics.median(samples)


def _loaded(word: str) -> list[str]:
    """The shared libraries of this process whose file name contains ``word`` (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if line.rstrip().endswith(".so") or ".so." in line}
    except OSError:
        return []
    return sorted({Path(p).name for p in paths if word in Path(p).name})


def _operands(args, dtype, rng):
    """``(name, x1, x2)`` per square of ``--sizes``, or per cliff-suite case of ``--cases`` (its
    shapes and views, :mod:`polymm.tools.cliffs`)."""
    from polymm.tools import cliffs

    if not args.cases:
        for n in args.sizes:
            yield f"square-{n}", *(rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
        return
    cases = {c.name: c for c in cliffs.CASES}
    for name in args.cases.split(","):
        case = cases[name]
        views = []
        for shape, layout in zip((case.x1, case.x2), case.operand_layouts):
            base = rng.standard_normal(cliffs._base_shape(shape, layout)).astype(dtype)
            views.append(cliffs._view(np, base, layout))
        yield name, *views


def main(argv=None) -> int:
    args = parse_args(argv)
    import numba
    from threadpoolctl import threadpool_limits

    import polymm
    from polymm.tools import timing
    from polymm.tools.explain import explain

    cores = numba.config.NUMBA_NUM_THREADS
    counts = args.threads or thread_counts(cores)
    rng = np.random.default_rng(0)
    record = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "load": os.getloadavg(),
        "numba_threads": cores,
        "launch_us": {},
        "cells": [],
    }
    # its pool starts as polymm starts it (passive on many cores), before any launch here
    record["pool"] = polymm.get_backend("cpu").devices()
    for t in counts:
        record["launch_us"][t] = launch_seconds(t) * 1e6
    record["threading_layer"] = numba.threading_layer()  # the one polymm's kernels run on too
    record["openmp_libraries"] = _loaded("omp")
    record["environment"] = {
        k: os.environ[k]
        for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OPENBLAS_THREAD_TIMEOUT")
        if k in os.environ
    }
    print(
        f"threading layer {record['threading_layer']} ({', '.join(record['openmp_libraries']) or 'no OpenMP library'}; "
        f"{record['environment'] or 'no OpenMP/OpenBLAS settings'}); {record['pool']}; empty launch (us): {record['launch_us']}",
        flush=True,
    )
    for dtype in args.dtypes.split(","):
        for name, a, b in _operands(args, dtype, rng):
            want = a.astype(np.float64) @ b.astype(np.float64)
            flops = 2 * want.size * a.shape[-1]
            out = np.full(want.shape, np.nan, dtype)
            for t in counts:
                numba.set_num_threads(t)
                with threadpool_limits(t, user_api="blas"):  # BLAS only: an OpenMP limit would reach Numba's pool too
                    polymm.matmul(a, b, out=out)
                    scale = np.sqrt(a.shape[-1])
                    assert np.allclose(out, want, rtol=1e-3, atol=1e-3 * scale), f"wrong values at {name} {dtype} t={t}"
                    start = time.perf_counter()
                    np.matmul(a, b)
                    once = time.perf_counter() - start
                    if once * max(1, t) / max(counts) > args.most_seconds * 4 or once > args.most_seconds:
                        print(f"{dtype} {name} t={t}: skipped (NumPy {once:.2f} s a call)", flush=True)
                        continue
                    time.sleep(args.quiet_seconds)  # OpenBLAS's threads stop spinning
                    mine = timing.measure(lambda: polymm.matmul(a, b, out=out), budget=args.budget)
                    fresh = timing.measure(lambda: polymm.matmul(a, b), budget=args.budget)
                    ref = timing.measure(lambda: np.matmul(a, b), budget=args.budget)
                    path = explain(a.shape, b.shape, dtype, backend="cpu").path
                cell = {
                    "dtype": dtype,
                    "case": name,
                    "threads": t,
                    "polymm_s": mine.best,
                    "polymm_median_s": mine.median,
                    "polymm_fresh_s": fresh.best,
                    "numpy_s": ref.best,
                    "numpy_median_s": ref.median,
                    "ratio": ref.best / mine.best,
                    "ratio_fresh": ref.best / fresh.best,
                    "gflops": flops / mine.best / 1e9,
                    "numpy_gflops": flops / ref.best / 1e9,
                    "path": path,
                }
                record["cells"].append(cell)
                print(
                    f"{dtype:8} {name:>16} t={t:2}  polymm {mine.best * 1e3:9.3f} ms ({cell['gflops']:7.1f} GFLOP/s), "
                    f"new result {fresh.best * 1e3:9.3f}  NumPy {ref.best * 1e3:9.3f} ms ({cell['numpy_gflops']:7.1f})  "
                    f"{cell['ratio']:.2f}x / {cell['ratio_fresh']:.2f}x  {path or ''}",
                    flush=True,
                )
            numba.set_num_threads(cores)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
