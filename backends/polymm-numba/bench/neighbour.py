"""polymm beside NumPy: a product timed alone, right after a NumPy product, and NumPy right after it.

A user's program alternates the two; OpenBLAS's threads spin for a while after each NumPy call
and Numba's after each polymm call, so a loop that times one library alone never sees what the
user pays. Median and best of ``--repeat`` calls each, in milliseconds.

    python backends/polymm-numba/bench/neighbour.py --sizes 200:float64,700:float32,1536:float32
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import polymm


def _times(call, before=None, repeat=15):
    out = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return statistics.median(out) * 1e3, min(out) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200:float64,700:float32,1536:float32", help="N:dtype, comma-separated")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for item in args.sizes.split(","):
        n, dtype = item.split(":")
        a, b = (rng.standard_normal((int(n), int(n))).astype(dtype) for _ in range(2))
        ours, theirs = (lambda: polymm.matmul(a, b)), (lambda: np.matmul(a, b))
        ours(), theirs()
        time.sleep(0.5)  # let both pools go to sleep
        alone = _times(ours, repeat=args.repeat)
        after = _times(ours, theirs, args.repeat)
        time.sleep(0.5)
        numpy_alone = _times(theirs, repeat=args.repeat)
        numpy_after = _times(theirs, ours, args.repeat)
        print(
            f"{n} {dtype}: polymm alone {alone[0]:.3f} ms (best {alone[1]:.3f}), right after numpy {after[0]:.3f} "
            f"(best {after[1]:.3f}); numpy alone {numpy_alone[0]:.3f}, right after polymm {numpy_after[0]:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
