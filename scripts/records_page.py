#!/usr/bin/env python
"""The docs' index of recorded measurements, generated from ``benchmarks/index.json``.

One row per record folder (what it holds, how a record is made, where the docs show it, how many
records and the dates they span, read from the files' names), then where the removed run logs
are read from. Writes ``docs/_generated/records.md``; a test checks that the committed page is
what this script writes and that every folder of ``benchmarks/`` is indexed.

    python scripts/records_page.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUNS = ROOT / "benchmarks"
INDEX = RUNS / "index.json"
PAGE = ROOT / "docs" / "_generated" / "records.md"
_DATE = re.compile(r"20\d\d-\d\d-\d\d")


def _span(folder: Path) -> tuple[int, str]:
    """How many records (JSON files) ``folder`` holds and the dates in their names."""
    records = sorted(folder.rglob("*.json"))
    dates = sorted({d for p in records for d in _DATE.findall(p.name)})
    return len(records), (f"{dates[0]} to {dates[-1]}" if len(dates) > 1 else "".join(dates) or "-")


def render() -> str:
    index = json.loads(INDEX.read_text())
    lines = [
        "| folder | what | a record is made by | shown in | records | dates |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    for entry in index["records"]:
        count, dates = _span(RUNS / entry["folder"])
        lines.append(
            f"| `benchmarks/{entry['folder']}/` | {entry['what']} | `{entry['command']}` | {entry['page']} "
            f"| {count} | {dates} |"
        )
    logs = index["run_logs"]
    folders = ", ".join(f"`{name}`" for name in logs["folders"])
    lines += ["", f"**Run logs** ({folders}): {logs['what']} Read them with `{logs['read_with']}`."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE.relative_to(ROOT)}")
