#!/usr/bin/env python
"""Two cliff-suite records of one machine side by side: before and after a change.

    python scripts/cliffs_compare.py BEFORE.json AFTER.json [--show 8]

Prints the geometric mean of each cell's ratio (polymm against its reference) after over
before, how many cells moved less than 10%, whether every cell was correct in both, and the
cells that moved most either way with their times and noise flags. Ratios, not times: each is
interleaved with its reference in its own run, so a machine that is slower in one run moves
both. A cell outside 10% wants re-timing before it is called a change.
"""

from __future__ import annotations

import argparse
import json
import math


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--show", type=int, default=8, help="cells shown at each end (default 8)")
    args = parser.parse_args()
    runs = [json.load(open(path)) for path in (args.before, args.after)]
    before, after = ({(c["backend"], c["case"], c["dtype"], c.get("precision")): c for c in r["cells"]} for r in runs)
    rows = sorted((after[k]["ratio"] / before[k]["ratio"], k) for k in before if k in after)
    if not rows:
        raise SystemExit("no cell is in both records")
    mean = math.exp(sum(math.log(r) for r, _ in rows) / len(rows))
    steady = sum(0.9 <= r <= 1.1 for r, _ in rows)
    correct = all(c["correct"] for r in runs for c in r["cells"])
    print(
        f"{len(rows)} cells: ratio after/before geometric mean {mean:.3f}, {steady} within 10%, all correct: {correct}"
    )
    shown = rows if len(rows) <= 2 * args.show else rows[: args.show] + rows[-args.show :]
    for change, key in shown:
        b, a = before[key], after[key]
        noisy = " (noisy)" if b["noisy"] or a["noisy"] else ""
        print(
            f"{change:6.3f}  {' '.join(str(x) for x in key[:3]):40s} {b['ratio']:.2f}x -> {a['ratio']:.2f}x, "
            f"{b['seconds'] * 1e3:.3f} -> {a['seconds'] * 1e3:.3f} ms{noisy}"
        )


if __name__ == "__main__":
    main()
