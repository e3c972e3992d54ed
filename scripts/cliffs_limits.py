#!/usr/bin/env python
"""What limits each cell of a host cliff-suite record that misses its floor, cell by cell.

    python scripts/cliffs_limits.py benchmarks/cliffs/cpu-2core-avx512-2026-12-01-SHA.json [--markdown]

A record times every cell twice against its reference: alone (polymm's calls in a loop of their
own, then the reference's) and interleaved (the two taking turns, as a user's program runs). The
floor applies to the interleaved figure. For each floor cell (the record's own floor: its dtypes,
references of at least its ``min_ref_seconds``) under the floor's worst ratio this prints both
figures and which one limits:

- ``neighbour``: alone at or above the floor, interleaved under it. The reference's threads
  (OpenBLAS's pool spins for about 0.1 s after each of NumPy's calls, one core each) hold cores
  that polymm's next call would use; alone, nothing does. Or polymm's threads, spinning after
  its call, hold the cores the reference's next call needs: the interleaved figure charges that
  (``ref_added``, shown where it is over 5% of the reference's time).
- ``kernel``: under the floor alone too: polymm's own code on this machine is the limit.

Noisy cells (the record's own flag: the spread of its samples) are marked; re-time them before
calling them either.
"""

from __future__ import annotations

import argparse
import json
import math


def limits(record: dict) -> tuple[list[dict], dict]:
    """The floor cells under the floor, each with its figures and what limits it, and a summary."""
    rows, ratios, alone = [], [], []
    for key, summary in record["summary"].items():
        floor = (summary.get("floor") or {}).get("floor")  # the floor cells' summary, then the floor itself
        if not floor:
            continue
        for cell in record["cells"]:
            if cell["backend"] != key.split(":")[0] or cell["dtype"] not in floor["dtypes"]:
                continue
            if not cell.get("ratio") or cell["ref_seconds"] < floor["min_ref_seconds"]:
                continue
            ratios.append(cell["ratio"])
            alone.append(cell.get("ratio_alone") or cell["ratio"])
            if cell["ratio"] >= floor["worst"]:
                continue
            limit = "kernel" if (cell.get("ratio_alone") or 0) < floor["worst"] else "neighbour"
            rows.append({**cell, "limit": limit, "floor": floor["worst"]})
    rows.sort(key=lambda c: c["ratio"])

    def geomean(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

    counts = {name: sum(r["limit"] == name for r in rows) for name in ("neighbour", "kernel")}
    return rows, {"cells": len(ratios), "geomean": geomean(ratios), "geomean_alone": geomean(alone), **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table (for a note or a page)")
    args = parser.parse_args()
    record = json.load(open(args.record))
    rows, s = limits(record)
    print(
        f"{args.record}: {record['date'][:16]} UTC, load {record['machine'].get('load_average')}; "
        f"{s['cells']} floor cells, geomean {s['geomean']:.2f}x interleaved, {s['geomean_alone']:.2f}x alone; "
        f"{len(rows)} under the floor: {s['neighbour']} by the neighbour, {s['kernel']} by the kernel"
    )
    if args.markdown:
        print("\n| cell | dtype | reference | interleaved | alone | limit |\n|---|---|---|---|---|---|")
    for r in rows:
        notes = " (noisy)" if r["noisy"] else ""
        ref = f"{r['ref_seconds'] * 1e3:.3f} ms"
        alone = f"{r['ratio_alone']:.2f}x" if r.get("ratio_alone") else "-"
        if (r.get("ref_added") or 0) > 0.05 * r["ref_seconds"]:  # our calls slow the reference's next
            notes += f" (the reference's next call {r['ref_added'] * 1e3:.3f} ms slower)"
        if args.markdown:
            print(f"| {r['case']} | {r['dtype']} | {ref} | {r['ratio']:.2f}x | {alone} | {r['limit']}{notes} |")
        else:
            print(
                f"  {r['case']:22s} {r['dtype']:8s} {ref:>12s}  {r['ratio']:.2f}x, alone {alone}: {r['limit']}{notes}"
            )


if __name__ == "__main__":
    main()
