#!/usr/bin/env python
"""Copy an asv run from the scratch folder into the committed records, deliberately.

asv writes every run to ``asv_bench/scratch/results/`` (git-ignored): a run never changes a
tracked file. What is worth keeping is copied by this script into ``asv_bench/results/`` (the
records the published dashboard shows), and then committed by hand:

    python scripts/asv_keep.py polymm-2core-ci                 # every commit of that machine
    python scripts/asv_keep.py polymm-2core-ci --commit f8ceeb4   # only those commits
    python scripts/asv_keep.py polymm-h100 --from /tmp/unpacked/results   # another results folder
    git add asv_bench/results && git commit

It copies the machine's ``machine.json`` and result files and merges ``benchmarks.json`` (the
descriptions asv publishes the results by: the run's entries replace the records' of the same
name, the others stay, so older records of renamed benchmarks still publish). Quick runs (a
machine named ``*-quick``: one timed call per figure) are refused: they are not measurements.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "asv_bench" / "scratch" / "results"
RECORDS = ROOT / "asv_bench" / "results"


def merge_benchmarks(target: Path, *sources: Path) -> dict:
    """``target``'s benchmarks.json updated with each source's entries (later sources win)."""
    merged = {}
    for path in (target, *sources):
        if path.is_file():
            merged.update(json.loads(path.read_text(encoding="utf-8")))
    return merged


def keep(machine: str, commits=(), source: Path = SCRATCH, records: Path = RECORDS) -> list[Path]:
    """Copy ``machine``'s results (those of ``commits``, hash prefixes, or all) into ``records``."""
    if machine.endswith("-quick"):
        raise SystemExit(f"{machine}: a quick run (one timed call per figure) is not a record")
    folder = source / machine
    files = sorted(p for p in folder.glob("*.json") if p.name != "machine.json")
    if commits:
        files = [p for p in files if any(p.name.startswith(c[:8]) for c in commits)]
    if not files:
        raise SystemExit(f"no results of {machine}{' for ' + ', '.join(commits) if commits else ''} in {folder}")
    dest = records / machine
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in [folder / "machine.json", *files]:
        shutil.copy2(path, dest / path.name)
        copied.append(dest / path.name)
    merged = merge_benchmarks(records / "benchmarks.json", source / "benchmarks.json")
    (records / "benchmarks.json").write_text(json.dumps(merged, indent=4, sort_keys=True) + "\n", encoding="utf-8")
    copied.append(records / "benchmarks.json")
    return copied


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("machine", help="machine name (a folder of the results)")
    parser.add_argument("--commit", action="append", default=[], help="keep only this commit (repeatable)")
    parser.add_argument("--from", dest="source", type=Path, default=SCRATCH, help=f"results folder (default {SCRATCH})")
    args = parser.parse_args(argv)
    copied = keep(args.machine, args.commit, args.source.resolve())
    for path in copied:
        print(f"kept {path.relative_to(ROOT)}")
    print("now review and commit: git add asv_bench/results && git commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
