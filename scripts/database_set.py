#!/usr/bin/env python
"""Set one value of the device database in this checkout: the on/off side of an A/B run on a
lent machine (the run scripts under ``benchmarks/cliffs/*-runs/`` copy the file aside first and
put it back after).

    python scripts/database_set.py NODE FEATURE KEY VALUE

``VALUE`` is JSON (``true``, ``16``, ``[128, 64]``); the entry's ``why`` and ``evidence`` stay,
and an entry the node lacks is made with the value alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DATABASE = Path(__file__).resolve().parents[1] / "polymm" / "kernels" / "devices.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("node", "feature", "key", "value"):
        parser.add_argument(name)
    args = parser.parse_args()
    data = json.loads(DATABASE.read_text())
    node = data["settings"].setdefault(args.node, {})
    node.setdefault(args.feature, {}).setdefault(args.key, {})["value"] = json.loads(args.value)
    DATABASE.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
