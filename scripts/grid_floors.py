#!/usr/bin/env python
"""Issue 30's floors on a GPU grid record, dtype by dtype: which hold, and the cells that do not.

    python scripts/grid_floors.py RECORD.json [--markdown]

Cells count where the reference takes at least 50 us (the issue's rule), as timed interleaved.
The float and complex dtypes and every precision mode: worst cell >= 0.8x, geometric mean >=
1.0x; squares from 2048 (from 1024 for complex64) at their own floors; the 8-bit integers >= 2x
on every cell and >= 10x on squares from 2048; the wider integers >= 1.2x.
"""

from __future__ import annotations

import argparse
import json
import re

from polymm.tools.cliffs import _geomean

MIN_REF_SECONDS = 50e-6
FLOATS = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
#: the every-cell floor of each integer dtype
INTEGER_FLOOR = {"int8": 2.0, "uint8": 2.0} | {
    t: 1.2 for t in ("int16", "uint16", "int32", "uint32", "int64", "uint64")
}
#: ``(smallest n, floor)`` of the squares of each group
SQUARE_FLOOR = {
    "float32": (2048, 0.95),
    "float16": (2048, 1.0),
    "bfloat16": (2048, 1.0),
    "float32 tf32x3": (2048, 1.0),
    "complex64": (1024, 0.9),
    "int8": (2048, 10.0),
    "uint8": (2048, 10.0),
}


def group(cell: dict) -> str:
    """The dtype, with the precision mode where it is not the default: the unit a floor applies to."""
    mode = cell.get("precision", "default")
    return cell["dtype"] if mode == "default" else f"{cell['dtype']} {mode}"


def square(cell: dict) -> int | None:
    """n where the cell is one n x n @ n x n product of contiguous operands (the squares' class;
    views of squares are a class of their own), else None."""
    dims = [int(x) for x in re.findall(r"\d+", cell["shape"])]
    plain = cell.get("layout", "c") == "c"
    return dims[0] if plain and len(dims) == 4 and len(set(dims)) == 1 else None


def floors(cells: list[dict]) -> list[dict]:
    """One row per group: its cells, worst, geometric mean, the floors it misses."""
    rows = []
    groups: dict[str, list[dict]] = {}
    for c in cells:
        if c.get("ratio") and c.get("ref_seconds", 0) >= MIN_REF_SECONDS:
            groups.setdefault(group(c), []).append(c)
    for name, cs in sorted(groups.items()):
        ratios = [c["ratio"] for c in cs]
        worst = min(cs, key=lambda c: c["ratio"])
        geo = _geomean(ratios)  # the suite's own, as its summaries use
        misses = []
        dtype = name.split()[0]
        if dtype in FLOATS:
            misses += [f"worst {worst['ratio']:.2f} < 0.8 ({worst['case']})"] if worst["ratio"] < 0.8 else []
            misses += [f"geomean {geo:.2f} < 1.0"] if geo < 1.0 else []
        elif dtype in INTEGER_FLOOR and worst["ratio"] < INTEGER_FLOOR[dtype]:
            misses.append(f"worst {worst['ratio']:.2f} < {INTEGER_FLOOR[dtype]:g} ({worst['case']})")
        if name in SQUARE_FLOOR:
            least, floor = SQUARE_FLOOR[name]
            low = [c for c in cs if (square(c) or 0) >= least and c["ratio"] < floor]
            misses += [f"{c['case']} {c['ratio']:.2f} < {floor:g}" for c in low]
        rows.append(
            {
                "group": name,
                "cells": len(cs),
                "worst": worst["ratio"],
                "worst_case": worst["case"],
                "geomean": geo,
                "misses": misses,
            }
        )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (for a note or a page)")
    args = ap.parse_args()
    rec = json.load(open(args.record))
    rows = floors(rec["cells"])
    if args.markdown:
        print("| dtype | cells | worst | geomean | misses |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        missed = "; ".join(r["misses"]) or "holds"
        if args.markdown:
            print(
                f"| {r['group']} | {r['cells']} | {r['worst']:.2f}x ({r['worst_case']}) | {r['geomean']:.2f}x | {missed} |"
            )
        else:
            print(
                f"{r['group']:16s} {r['cells']:4d} cells  worst {r['worst']:.3f} ({r['worst_case']})  geomean {r['geomean']:.3f}  {missed}"
            )


if __name__ == "__main__":
    main()
