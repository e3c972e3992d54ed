#!/usr/bin/env python
"""Whole calls on NumPy operands with a device backend: what a user of PoCL pays.

The cliff suite times a device backend on arrays already on its device. A user of an OpenCL CPU
device hands NumPy arrays to ``polymm.matmul(..., backend="opencl")`` and gets NumPy back: the
moves to and from the device are part of the call. This times that call against ``numpy.matmul``,
interleaved in one process (median of ``--repeat`` pairs), after checking the answer.

    python scripts/host_operands.py --backend opencl --shapes 128x128x65536,4096x4096x32 --dtype float32,float64
    python scripts/host_operands.py --out ...   # each call writes into an out= array (NumPy's too)
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import polymm
from polymm.testing import assert_matches, random_array


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in text.lower().split("x")) if "x" in text else (int(text),) * 3
    return m, n, k


def measure(backend: str, m: int, n: int, k: int, dtype: str, repeat: int, out: bool = False) -> dict:
    """Median of ``repeat`` interleaved pairs; ``out``: both write into an ``out=`` array of their own."""
    rng = np.random.default_rng(2026)
    a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
    ours_out = np.full((m, n), np.nan, dtype) if out else None  # poisoned: the check sees what was written
    ref_out = np.empty((m, n), dtype) if out else None
    got = polymm.matmul(a, b, backend=backend, out=ours_out)
    assert_matches(got, a, b)  # the project's oracle, before any clock
    ours, ref = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        polymm.matmul(a, b, backend=backend, out=ours_out)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        np.matmul(a, b, out=ref_out)
        ref.append(time.perf_counter() - t)
    ms, ref_ms = float(np.median(ours)) * 1e3, float(np.median(ref)) * 1e3
    return {"shape": [m, n, k], "dtype": dtype, "out": out, "ms": ms, "numpy_ms": ref_ms, "ratio": ref_ms / ms}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="opencl")
    parser.add_argument("--shapes", default="128x128x65536,4096x4096x32,2048,1024")
    parser.add_argument("--dtype", default="float32,float64")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", action="store_true", help="each call writes into an out= array (NumPy's too)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    rows = []
    for text in args.shapes.split(","):
        for dtype in args.dtype.split(","):
            row = measure(args.backend, *_shape(text), dtype, args.repeat, args.out)
            rows.append(row)
            m, n, k = row["shape"]
            print(
                f"{args.backend} {m}x{n}x{k} {dtype}{' out=' if args.out else ''}: {row['ms']:.2f} ms, "
                f"numpy {row['numpy_ms']:.2f} ms, "
                f"{row['ratio']:.2f}x",
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"backend": args.backend, "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
