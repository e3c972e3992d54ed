#!/usr/bin/env python
"""Where byte planes start to pay: 16- to 64-bit integer squares on a Hopper GPU, whole
``polymm.matmul`` calls on the uint8 tensor cores by byte planes against the SIMT kernels, the
evidence for the device database's ``byte-planes.min_work``.

    python scripts/planes_crossover.py [--sizes 128,256,...] [--dtypes int16,int32,int64] --json OUT.json

Each way runs in a process of its own, the plan decided by the environment the planner reads
(``POLYMM_PREFER=byte-planes`` with ``POLYMM_CUDA_PLANES_MIN_WORK=0``; or a minimum no product
reaches), taking turns over two rounds; a cell keeps its best median (CUDA events around each
call, after warm-up calls). Every product up to 512 is checked against NumPy's wrapped product,
and each process asserts the path it was meant to run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

WAYS = {
    "planes": {"POLYMM_PREFER": "byte-planes", "POLYMM_CUDA_PLANES_MIN_WORK": "0"},
    "simt": {"POLYMM_CUDA_PLANES_MIN_WORK": str(2**62)},
}


def _measure(sizes, dtypes, way: str, calls: int) -> dict:
    """{dtype: {size: median seconds}} of one way, in this process."""
    import cupy as cp
    import numpy as np

    import polymm
    from polymm.tools.explain import explain

    out = {}
    rng = np.random.default_rng(5)
    for dtype in dtypes:
        info = np.iinfo(dtype)
        out[dtype] = {}
        for n in sizes:
            a = rng.integers(info.min, info.max, (n, n), dtype=dtype, endpoint=True)
            b = rng.integers(info.min, info.max, (n, n), dtype=dtype, endpoint=True)
            x1, x2 = cp.asarray(a), cp.asarray(b)
            c = polymm.matmul(x1, x2)
            reason = explain((n, n), (n, n), dtype, backend="cuda").reason
            assert ("byte planes" in reason) == (way == "planes"), (way, dtype, n, reason)
            if n <= 512:
                want = np.matmul(a.astype(np.uint64), b.astype(np.uint64)).astype(dtype)
                np.testing.assert_array_equal(cp.asnumpy(c), want)
            for _ in range(3):
                polymm.matmul(x1, x2)
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            times = []
            for _ in range(calls):
                start.record()
                polymm.matmul(x1, x2)
                stop.record()
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
            out[dtype][str(n)] = sorted(times)[len(times) // 2]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="128,192,256,320,384,512,768,1024")
    parser.add_argument("--dtypes", default="int16,int32,int64")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", required=True)
    parser.add_argument("--way", choices=sorted(WAYS), help=argparse.SUPPRESS)  # one process's share
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    dtypes = args.dtypes.split(",")
    if args.way:
        json.dump(_measure(sizes, dtypes, args.way, args.calls), open(args.json, "w"))
        return 0
    best: dict = {way: {} for way in WAYS}
    for round_ in range(args.rounds):
        for way, env in WAYS.items():
            part = f"{args.json}.{way}{round_}"
            cmd = [sys.executable, __file__, "--way", way, "--json", part, "--sizes", args.sizes]
            cmd += ["--dtypes", args.dtypes, "--calls", str(args.calls)]
            subprocess.run(cmd, check=True, env={**os.environ, **env})
            for dtype, cells in json.load(open(part)).items():
                for n, seconds in cells.items():
                    kept = best[way].setdefault(dtype, {}).get(n)
                    best[way][dtype][n] = seconds if kept is None else min(kept, seconds)
            os.remove(part)
    rows = []
    print(f"{'dtype':7} {'n':>5} {'planes us':>10} {'simt us':>10} {'simt/planes':>11}")
    for dtype in dtypes:
        for n in sizes:
            p, s = best["planes"][dtype][str(n)], best["simt"][dtype][str(n)]
            rows.append({"dtype": dtype, "n": n, "planes_seconds": p, "simt_seconds": s, "multiply_adds": n**3})
            print(f"{dtype:7} {n:5} {p * 1e6:10.1f} {s * 1e6:10.1f} {s / p:11.2f}")
    command = "python scripts/planes_crossover.py " + " ".join(sys.argv[1:])
    json.dump({"command": command, "rows": rows}, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
