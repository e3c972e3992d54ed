#!/usr/bin/env python
"""How many bytes of a row of B each vecmat work-item should read: whole calls on a GPU.

``vecmat`` (a row vector times a matrix, M = 1) streams B once; each work-item reads a run of a
row of B as one vector load. This times ``polymm.matmul(x, B)`` with the device database's
``vecmat.item_bytes`` and ``vecmat.wide_item_bytes`` set to one value (and ``wide_from_bytes`` to
zero, so every B takes it) against the reference (``cupy.matmul``; ``torch.matmul`` for
bfloat16), interleaved, CUDA events around whole calls, after checking the answer against a
float64 product (integers exactly). A process plans each shape once, so give each value a
process of its own:

    python scripts/vecmat_item_bytes.py --item-bytes 8 --json ib8.json
    python scripts/vecmat_item_bytes.py --item-bytes 16 --json ib16.json

The records behind ``vecmat.wide_item_bytes`` and ``vecmat.wide_from_bytes`` are
``benchmarks/cliffs/vecmat-ib{8,16}-h200-2026-11-28-44a71c6.json`` (made by this script's first
version, which set ``item_bytes`` alone).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def _operands(dtype: str, n: int):
    """``x`` (n,), ``B`` (n, n) on the GPU, the reference call, the exact answer, and a reader of results."""
    import cupy as cp

    if dtype == "bfloat16":
        import torch

        g = torch.Generator(device="cuda").manual_seed(n)
        x = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
        return (
            x,
            b,
            lambda: torch.matmul(x, b),
            (x.double() @ b.double()).cpu().numpy(),
            lambda r: r.double().cpu().numpy(),
        )
    rng = np.random.default_rng(n)
    if dtype.startswith(("int", "uint")):
        x = cp.asarray(rng.integers(-50, 50, n), dtype=dtype)
        b = cp.asarray(rng.integers(-50, 50, (n, n)), dtype=dtype)
        exact = (x.astype(cp.int64) @ b.astype(cp.int64)).astype(dtype).get()
        return x, b, lambda: cp.matmul(x, b), exact, cp.asnumpy
    x = cp.asarray(rng.standard_normal(n), dtype=dtype)
    b = cp.asarray(rng.standard_normal((n, n)), dtype=dtype)
    exact = (x.astype(cp.float64) @ b.astype(cp.float64)).get()
    return x, b, lambda: cp.matmul(x, b), exact, lambda r: cp.asnumpy(r).astype(np.float64)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--item-bytes", type=int, required=True, help="bytes of a row each work-item reads")
    parser.add_argument("--dtypes", default="float16,bfloat16,int8,float32,float64,int16")
    parser.add_argument("--sizes", default="4096,16384", help="n of 1 x n @ n x n")
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of interleaved timing per cell")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)

    import polymm
    from polymm.kernels import devices
    from polymm.tools import timing

    for name, value in (("item_bytes", args.item_bytes), ("wide_item_bytes", args.item_bytes), ("wide_from_bytes", 0)):
        devices.entry("any", "vecmat", name)["value"] = value
    clock = timing.cuda_clock()
    backend = polymm.get_backend("cuda")
    rows = []
    for dtype in args.dtypes.split(","):
        for n in (int(v) for v in args.sizes.split(",")):
            x, b, reference, exact, read = _operands(dtype, n)
            got = read(polymm.matmul(x, b))
            plan = backend.last_plan
            if dtype.startswith(("int", "uint")):
                error = 0.0 if np.array_equal(got, exact) else float("inf")
            else:
                error = float(np.max(np.abs(got - exact)) / (np.max(np.abs(exact)) or 1.0))
            (ours, ref), _ = timing.interleaved((lambda: polymm.matmul(x, b), clock), (reference, clock), args.budget)
            itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
            row = {
                "dtype": dtype,
                "n": n,
                "item_bytes": args.item_bytes,
                "ms": ours.best * 1e3,
                "ref_ms": ref.best * 1e3,
                "ratio": ref.best / ours.best,
                "TBps": n * n * itemsize / ours.best / 1e12,
                "relative_error": error,
                "plan": f"{plan.kernel} gvw={plan.params.gvw}: {plan.reason}",
            }
            rows.append(row)
            print(
                f"{dtype} 1 x {n} @ {n} x {n}, {args.item_bytes} bytes: {row['ms']:.3f} ms "
                f"({row['TBps']:.2f} TB/s), reference {row['ref_ms']:.3f} ms, {row['ratio']:.2f}x",
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
