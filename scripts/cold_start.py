"""The README's first snippet ("## Using it") on a cold start: a fresh Python process with empty caches.

Issue 35 ("the first hour of a user"): the first thing a user runs should not stall.  Each run is
a new interpreter whose Numba cache (``NUMBA_CACHE_DIR``), tuning file (``POLYMM_TUNING``),
per-user cache folder (``XDG_CACHE_HOME``: platformdirs' ``user_cache_dir``) and PoCL kernel cache
(``POCL_CACHE_DIR``) are new empty folders, so every kernel the snippet runs is compiled.  The
snippet is read from README.md as ``tests/test_docs.py`` reads the docs (so it stays in sync).

Prints each run's wall time (interpreter start to exit) and the median run's breakdown: Python's
start and exit, ``import numpy``, ``import polymm``, each kernel compile (polymm logs one record
per compile at DEBUG on the ``polymm`` logger: :func:`polymm.compilation.compiled`), and the rest
of the snippet (its products, imports of Numba and PyOpenCL, cache loads).  ``--warm`` times runs
that share one cache folder filled by a first, untimed run.

    python scripts/cold_start.py -n 3
    flock /tmp/polymm-bench.lock python scripts/cold_start.py -n 5   # on a shared machine
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Using it"
MARK = "COLD_START_JSON "

#: Run in the child: imports and the snippet timed, compile records collected from the logger.
CHILD = (
    """
import json, logging, sys, time
t0 = time.perf_counter()
compiles = []
class _Compiles(logging.Handler):
    def emit(self, record):
        facts = getattr(record, "polymm_compile", None)
        if facts:
            compiles.append(facts)
        elif record.levelno >= logging.WARNING:
            sys.stderr.write(record.getMessage() + "\\n")
log = logging.getLogger("polymm")
log.addHandler(_Compiles())
log.setLevel(logging.DEBUG)
t1 = time.perf_counter()
import numpy
t2 = time.perf_counter()
import polymm
t3 = time.perf_counter()
path = sys.argv[1]
code = compile(open(path, encoding="utf-8").read(), sys.argv[2], "exec")
exec(code, {"__name__": "__main__"})
t4 = time.perf_counter()
print("%s" + json.dumps({"setup": t1 - t0, "numpy": t2 - t1, "polymm": t3 - t2, "snippet": t4 - t3,
                         "compiles": compiles}))
"""
    % MARK
)


def readme_snippet(readme: Path = ROOT / "README.md") -> tuple[str, int]:
    """The first Python block after the heading ``## Using it``, and its line, parsed by the docs test's parser."""
    spec = importlib.util.spec_from_file_location("_polymm_test_docs", ROOT / "tests" / "test_docs.py")
    docs = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(docs)
    lines = readme.read_text(encoding="utf-8").splitlines()
    heading = next(i + 1 for i, line in enumerate(lines) if line.strip() == SECTION)
    block = next(b for b in docs.parse_blocks(readme) if b.line > heading and b.language in ("python", "py"))
    return block.code, block.line


def fresh_env(folder: Path) -> dict:
    """The environment of a run whose caches all live (empty at first) in ``folder``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYMM_")}  # the defaults, as a user has them
    env.update(
        NUMBA_CACHE_DIR=str(folder / "numba"),
        POLYMM_TUNING=str(folder / "polymm" / "tuning.json"),
        XDG_CACHE_HOME=str(folder / "xdg"),
        POCL_CACHE_DIR=str(folder / "pocl"),
    )
    return env


def run_once(snippet: Path, where: str, folder: Path) -> dict:
    """One run in a new interpreter with caches in ``folder``: its wall time and the child's timings."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(snippet), where],
        env=fresh_env(folder),
        capture_output=True,
        text=True,
        cwd=folder,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"the snippet failed:\n{proc.stdout}\n{proc.stderr}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith(MARK))
    facts = json.loads(line[len(MARK) :])
    facts["wall"] = wall
    return facts


def breakdown(run: dict) -> list[tuple[str, float]]:
    """``(label, seconds)`` parts of one run that add up to its wall time."""
    compiles = [(f"compile {c['backend']} {c['kernel']} ({c['dtype']})", c["seconds"]) for c in run["compiles"]]
    measured = run["setup"] + run["numpy"] + run["polymm"] + run["snippet"]
    return [
        ("python start and exit", run["wall"] - measured + run["setup"]),
        ("import numpy", run["numpy"]),
        ("import polymm", run["polymm"]),
        *compiles,
        ("rest of the snippet", run["snippet"] - sum(s for _, s in compiles)),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=3, help="timed runs (default 3); the median is reported")
    parser.add_argument("--warm", action="store_true", help="share one cache, filled by a first untimed run")
    parser.add_argument("--json", metavar="PATH", help="also write every run's timings here")
    args = parser.parse_args(argv)

    code, line = readme_snippet()
    runs = []
    with tempfile.TemporaryDirectory(prefix="polymm-cold-") as tmp:
        snippet = Path(tmp) / "snippet.py"
        snippet.write_text(code, encoding="utf-8")
        where = f"README.md:{line}"
        shared = Path(tmp) / "warm"
        if args.warm:
            shared.mkdir()
            run_once(snippet, where, shared)
        for i in range(args.runs):
            folder = shared if args.warm else Path(tmp) / f"run{i}"
            folder.mkdir(exist_ok=True)
            runs.append(run_once(snippet, where, folder))
            print(f"run {i + 1}: {runs[-1]['wall']:.2f} s", flush=True)
    walls = [r["wall"] for r in runs]
    median = sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]
    kind = "warm" if args.warm else "cold"
    print(f"\n{kind} start of the README snippet ({where}): median {statistics.median(walls):.2f} s of {len(runs)}")
    print(f"  runs: {', '.join(f'{w:.2f}' for w in walls)} s")
    print("  the median run:")
    for label, seconds in breakdown(median):
        print(f"    {seconds:6.2f} s  {label}")
    if args.json:
        Path(args.json).write_text(json.dumps({"kind": kind, "where": where, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
