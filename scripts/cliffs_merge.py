#!/usr/bin/env python
"""Cliff-suite records of one machine, run in parts (a device call is limited to 10 minutes: the
GPU grid runs as two ``--cases`` halves), as one record.

    python scripts/cliffs_merge.py OUT.json PART.json [PART.json ...] [--plot OUT.png]

The parts must come from one machine (the same devices); their cells are concatenated (a cell
measured twice keeps the later part's), the header is the first part's with every part's command
and date listed, and the summary and floors are computed again over all cells.  A part cut short (its ``partial``
note: the run was stopped before it ended) leaves the merged record partial, saying which.
"""

from __future__ import annotations

import argparse
import json

from polymm.tools import cliffs


def merge(parts: list[dict]) -> dict:
    devices = {json.dumps(p["machine"].get("devices"), sort_keys=True) for p in parts}
    if len(devices) > 1:
        raise SystemExit(f"the parts come from different devices: {sorted(devices)}")
    cells: dict = {}
    keys: dict = {}
    for part in parts:
        for c in part["cells"]:
            cells[(c["backend"], c["case"], c["dtype"], c.get("precision", "default"))] = c
        for name, entry in part.get("summary", {}).items():
            if "floor" in entry:
                keys[name] = entry["floor"]["key"]
    merged = [cliffs.Cell(**c) for c in cells.values()]
    cut = [
        f"part {i + 1} ({p['command'].split('--cases ')[-1].split(' ')[0]}): {p['partial']}"
        for i, p in enumerate(parts)
        if p.get("partial")
    ]
    return {
        **{k: v for k, v in parts[0].items() if k not in ("cells", "summary", "partial")},
        **({"partial": "; ".join(cut)} if cut else {}),
        "command": " && ".join(p["command"] for p in parts),
        "parts": [{"date": p["date"], "command": p["command"], "cells": len(p["cells"])} for p in parts],
        "cells": list(cells.values()),
        "summary": cliffs.summarise(merged, keys),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("parts", nargs="+")
    parser.add_argument("--plot", help="also draw the merged heatmap (needs matplotlib)")
    args = parser.parse_args()
    document = merge([json.load(open(path)) for path in args.parts])
    with open(args.out, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
    if args.plot:
        cliffs.plot(document, args.plot)
    for name, entry in document["summary"].items():
        print(
            f"{name}: {len(document['cells'])} cells, worst {entry['worst']:.2f}x ({entry['worst_case']}), geomean {entry['geomean']:.2f}x"
        )


if __name__ == "__main__":
    main()
