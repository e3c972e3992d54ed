#!/usr/bin/env python
"""What packing costs a GPU product: whole calls on aligned operands against the same operands
read through views that the vector path cannot take as they are.

The SIMT products read A and B as aligned vectors; an operand whose row stride is odd (a slice
of a wider array), or whose sizes are odd, is first copied by the shared ``pack`` kernel into
zero-padded scratch. This times ``polymm.matmul`` on contiguous operands and on the same values
as odd-stride views, interleaved with CUDA events around whole calls, and reports the
difference as the packing's cost and its bandwidth (bytes read plus written), beside a
``cupy.ascontiguousarray`` of the same views (the device's copy, for scale). Every answer is
checked against the project's oracle first (for float32, a float64 product). The device
database's ``cost.pack_bandwidth`` (NVIDIA GPU) comes from this figure.

    python scripts/pack_bandwidth.py --json pack.json
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

#: (M, N, K) of the products timed: a square, the odd square of the cliff grid's class, and
#: the deep product of the database's first evidence (B of 65536 rows).
SHAPES = ((4096, 4096, 4096), (2043, 2043, 2043), (64, 4096, 65536))


def _views(cp, rng, rows, cols, dtype):
    """A contiguous (rows, cols) operand and the same values as a view with row stride cols + 1."""
    wide = cp.asarray(rng.standard_normal((rows, cols + 1)), dtype=dtype)
    view = wide[:, :cols]
    return cp.ascontiguousarray(view), view


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dtypes",
        default="float32",
        help="comma-separated (float64's check against a longer-precision product of 4096 squares takes minutes on the host)",
    )
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of interleaved timing per pair")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)

    import cupy as cp

    import polymm
    from polymm.testing import assert_matches
    from polymm.tools import timing

    clock = timing.cuda_clock()
    backend = polymm.get_backend("cuda")
    rng = np.random.default_rng(7)
    rows = []
    for dtype in args.dtypes.split(","):
        for M, N, K in SHAPES:
            a, a_view = _views(cp, rng, M, K, dtype)
            b, b_view = _views(cp, rng, K, N, dtype)
            assert_matches(cp.asnumpy(polymm.matmul(a_view, b_view)), cp.asnumpy(a), cp.asnumpy(b))
            plan = backend.last_plan
            (aligned, strided), _ = timing.interleaved(
                (lambda: polymm.matmul(a, b), clock), (lambda: polymm.matmul(a_view, b_view), clock), args.budget
            )
            copies = timing.measure(lambda: (cp.ascontiguousarray(a_view), cp.ascontiguousarray(b_view)), clock)
            moved = 2 * (a.nbytes + b.nbytes)  # read and written once each
            cost = strided.best - aligned.best
            row = {
                "dtype": dtype,
                "shape": f"{M}x{K} @ {K}x{N}",
                "aligned_ms": aligned.best * 1e3,
                "strided_ms": strided.best * 1e3,
                "packing_us": cost * 1e6,
                "packing_GBps": moved / cost / 1e9 if cost > 0 else None,
                "cupy_copy_GBps": moved / copies.best / 1e9,
                "plan": f"{plan.kernel}, pack_a={plan.pack_a}, pack_b={plan.pack_b!r}: {plan.reason}",
            }
            rows.append(row)
            rate = f"{row['packing_GBps']:.0f} GB/s" if row["packing_GBps"] else "no measurable cost"
            print(
                f"{dtype} {row['shape']}: aligned {row['aligned_ms']:.3f} ms, odd strides "
                f"{row['strided_ms']:.3f} ms: packing {row['packing_us']:.1f} us ({rate}; "
                f"cupy's copy {row['cupy_copy_GBps']:.0f} GB/s)",
                flush=True,
            )
            if args.json:  # after every row: a run stopped by a time limit keeps what it measured
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
