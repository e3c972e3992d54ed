#!/usr/bin/env python
"""Cliff-suite records of one machine, run in parts (a device call is limited to 10 minutes: the
GPU grid runs as two ``--cases`` halves), as one record.

    python scripts/cliffs_merge.py OUT.json PART.json [PART.json ...] [--plot OUT.png]

The parts must come from one machine (the same devices); their cells are concatenated (a cell
measured twice keeps the later part's), the header is the first part's with every part's command,
date and note listed (its date the last part's), and the summary and floors are computed again
over all cells.  A part cut short (its ``partial`` note: the run was stopped before it ended)
leaves the merged record partial, naming the cells of its selection that no part measured; a
later part that measured them (``--cases`` of what was missing) makes the record whole.
"""

from __future__ import annotations

import argparse
import json

from polymm.tools import cliffs


def _cases(command: str) -> str:
    """The ``--cases`` patterns of a cliff-suite command."""
    return command.split("--cases ")[-1].split(" ")[0]


def _entry(part: dict) -> dict:
    """A part as the merged record lists it: when, how, how many cells, and its own note if it was cut short."""
    entry = {"date": part["date"], "command": part["command"], "cells": len(part["cells"])}
    return entry | ({"partial": part["partial"]} if part.get("partial") else {})


def _parts_of(merged: dict) -> list[dict]:
    """A merged record's parts; where only the record carries the note that parts were cut short
    (merged before the parts kept their own), every part carries it, so none is taken as whole."""
    note = merged.get("partial")
    if note and not any(q.get("partial") for q in merged["parts"]):
        return [q | {"partial": note} for q in merged["parts"]]
    return list(merged["parts"])


def _dtypes(command: str) -> list[str] | None:
    """The ``--dtype`` names of a cliff-suite command (None: each case's own)."""
    return command.split("--dtype ")[-1].split(" ")[0].split(",") if "--dtype " in command else None


def _missing(parts: list[dict], cells: dict) -> list[str]:
    """The cells that a part cut short selected and no part measured (``case dtype``): a merge whose
    later parts measured what the earlier ones missed is whole, whatever their notes say."""
    have = {(case, dtype, precision) for _, case, dtype, precision in cells}
    missing = []
    for part in parts:
        if not part.get("partial"):
            continue
        command = part["command"]
        for case, dtype in cliffs.select(_cases(command) if "--cases " in command else None, _dtypes(command)):
            if (case.name, dtype, case.precision) not in have and f"{case.name} {dtype}" not in missing:
                missing.append(f"{case.name} {dtype}")
    return missing


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
    # a part that is itself a merge brings its own parts (and their notes) as they are
    flat = [q for p in parts for q in (_parts_of(p) if "parts" in p else [_entry(p)])]
    missing = _missing(flat, cells)
    return {
        **{k: v for k, v in parts[0].items() if k not in ("cells", "summary", "partial", "date")},
        "date": max(q["date"] for q in flat),  # when the record was complete
        **(
            {"partial": f"{len(missing)} cells of the parts' selections never measured: {', '.join(missing[:20])}"}
            if missing
            else {}
        ),
        "command": " && ".join(p["command"] for p in parts),
        "parts": flat,
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
