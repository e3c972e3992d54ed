#!/usr/bin/env python
"""Bytes moved between Dask workers by ``polymm.matmul`` on persisted Dask arrays: measured, and estimated.

A CPU ``LocalCluster`` of ``--workers`` processes (one thread each), NumPy chunks made on the
workers and persisted, then for each case ``polymm.matmul(a, b).persist()`` (and Dask's own
``a @ b`` for reference), each run's bytes moved read from every worker's transfer log
(``Worker.transfer_incoming_log``: what it received from other workers during the run).  Where
``polymm.dask.explain`` exists, its schedule and estimate are recorded beside the measurement.
Bytes moved do not depend on the machine's speed, so a small CPU run is a fair record of a
schedule; the arrays stay small (seconds in all).

    python scripts/dask_bytes.py --json benchmarks/dask/cpu-bytes.json
    python scripts/dask_bytes.py --before main --json out.json   # also the polymm of git ref main

``--before REF`` runs the same cases in a subprocess whose ``polymm`` package is the one of git
ref ``REF`` (extracted with ``git archive``), and records both.  Only public API is used:
``polymm.matmul``, ``polymm.dask.explain`` and ``distributed``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: name -> (x1 shape, x1 chunks, x2 shape, x2 chunks), float32; small enough for a busy laptop.
CASES = {
    "square-2x2": ((1024, 1024), (512, 512), (1024, 1024), (512, 512)),
    "square-4x4": ((1024, 1024), (256, 256), (1024, 1024), (256, 256)),
    "tall-x-square": ((4096, 512), (512, 256), (512, 512), (256, 256)),
    "deep-k": ((256, 16384), (256, 2048), (16384, 256), (2048, 256)),
    "small-x2-broadcast": ((4096, 512), (512, 512), (512, 128), (512, 128)),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2, help="worker processes (one thread each)")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    p.add_argument("--repeats", type=int, default=2, help="runs per case and implementation (bytes: the median)")
    p.add_argument("--before", default=None, metavar="REF", help="also measure the polymm of this git ref")
    p.add_argument("--label", default="after", help=argparse.SUPPRESS)
    p.add_argument("--emit", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, default=None, help="write the record here")
    p.add_argument("--seed", type=int, default=20261127)
    args = p.parse_args(argv)
    unknown = [c for c in args.cases.split(",") if c not in CASES]
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    if args.workers < 1 or args.repeats < 1:
        p.error("--workers and --repeats must be positive")
    return args


def _random_block(seed: int, i: int, j: int, shape):
    import numpy as np

    return np.random.default_rng(seed * 1_000_003 + 7919 * i + j).standard_normal(shape, "float32")


def operand(client, shape, chunks, seed: int, workers):
    """A random float32 Dask array persisted on the workers: block (i, j) made on (and left on) the worker of its
    run when the blocks, in row-major order, are cut into one contiguous run per worker (a fixed placement)."""
    import dask.array as da
    import numpy as np
    from dask.highlevelgraph import HighLevelGraph

    chunks = da.core.normalize_chunks(chunks, shape)
    name = f"operand-{seed}"
    counts = [len(c) for c in chunks]
    graph = {}
    for i, rows in enumerate(chunks[0]):
        for j, cols in enumerate(chunks[1]):
            worker = workers[(i * counts[1] + j) * len(workers) // (counts[0] * counts[1])]
            graph[(name, i, j)] = client.submit(
                _random_block, seed, i, j, (rows, cols), key=(name, i, j), workers=[worker], pure=False
            )
    layer = HighLevelGraph.from_collections(name, graph, dependencies=())
    return da.Array(layer, name, chunks, meta=np.empty((0, 0), "float32"))


def _received(dask_worker) -> int:
    return sum(entry.get("total", 0) for entry in dask_worker.transfer_incoming_log)


def moved(client, lazy) -> tuple[int, object]:
    """Bytes the workers received from each other while ``lazy`` was persisted, and the result."""
    import distributed

    before = sum(client.run(_received).values())
    result = lazy.persist()
    distributed.wait(result)
    return sum(client.run(_received).values()) - before, result


def measure(args) -> dict:
    import distributed
    import numpy as np

    import polymm

    explain = getattr(__import__("polymm.dask").dask, "explain", None)
    out = {}
    with (
        distributed.LocalCluster(
            n_workers=args.workers, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=40
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        workers = sorted(client.nthreads())
        for n, name in enumerate(args.cases.split(",")):
            s1, c1, s2, c2 = CASES[name]
            row = {"shape": [list(s1), list(s2)], "chunks": [list(c1), list(c2)], "dtype": "float32"}
            graphs = {"polymm": lambda a, b: polymm.matmul(a, b), "dask": lambda a, b: a @ b}
            for impl, graph in graphs.items():
                samples = []
                for repeat in range(args.repeats):
                    # fresh operands every run: a worker keeps the blocks it fetched, which would make a second
                    # run (or the other implementation) look free
                    seed = args.seed + 1000 * n + 10 * repeat + (0 if impl == "polymm" else 5)
                    a = operand(client, s1, c1, seed, workers)
                    b = operand(client, s2, c2, seed + 1, workers)
                    distributed.wait([a, b])
                    if "placement" not in row:
                        row["placement"] = {  # [block index, worker number] per operand
                            which: sorted((list(k[1:]), workers.index(w[0])) for k, w in client.who_has(x).items())
                            for which, x in (("x1", a), ("x2", b))
                        }
                    if impl == "polymm" and explain is not None and "schedule" not in row:
                        plan = explain(a, b)
                        row["schedule"] = plan.schedule
                        row["estimate_bytes"] = plan.bytes_moved
                        row["explain"] = str(plan)
                    nbytes, result = moved(client, graph(a, b))
                    samples.append(nbytes)
                    if impl == "polymm" and "check" not in row:
                        got = result.compute()
                        want = a.compute().astype("float64") @ b.compute().astype("float64")
                        row["check"] = bool(np.allclose(got, want, rtol=1e-4, atol=1e-3 * np.abs(want).max()))
                    del result, a, b
                row[f"{impl}_bytes"] = sorted(samples)[len(samples) // 2]
                row[f"{impl}_bytes_samples"] = samples
            operands_bytes = (np.prod(s1) + np.prod(s2)) * 4
            row["operand_bytes"] = int(operands_bytes)
            out[name] = row
            print(
                f"{args.label:6} {name:20} polymm {row['polymm_bytes'] / 1e6:8.2f} MB"
                + (f" (estimate {row['estimate_bytes'] / 1e6:.2f} MB, {row['schedule']})" if explain else "")
                + f"  dask a@b {row['dask_bytes'] / 1e6:8.2f} MB  operands {operands_bytes / 1e6:.2f} MB",
                file=sys.stderr,
                flush=True,
            )
    return out


def _pin() -> str:
    """The Dask config ``polymm.pin`` in force: how pinned tasks hold to their worker."""
    import dask

    return dask.config.get("polymm.pin", "loose")


def _versions() -> dict:
    import dask
    import distributed
    import numpy

    import polymm

    return {
        "python": platform.python_version(),
        "polymm": polymm.__version__,
        "polymm_file": polymm.__file__,
        "numpy": numpy.__version__,
        "dask": dask.__version__,
        "distributed": distributed.__version__,
    }


def _commit(ref: str = "HEAD") -> str | None:
    try:
        return subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", ref], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def before(args) -> dict:
    """The same cases measured with the ``polymm`` package of git ref ``args.before``."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.before, "polymm"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")]))
        emit = Path(tmp) / "before.json"
        command = [sys.executable, __file__, "--label", "before", "--emit", str(emit)]
        command += ["--workers", str(args.workers), "--cases", args.cases, "--repeats", str(args.repeats)]
        command += ["--seed", str(args.seed)]
        subprocess.run(command, env=env, check=True)
        record = json.loads(emit.read_text())
    record["ref"] = args.before
    record["commit"] = _commit(args.before)
    return record


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.emit:  # a --before subprocess: its measurements only
        args.emit.write_text(json.dumps({"cases": measure(args), "versions": _versions(), "pin": _pin()}))
        return 0
    record = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"LocalCluster of {args.workers} processes x 1 thread, tcp",
        "command": " ".join(["python", *sys.argv]) if argv is None else " ".join(["python", __file__, *argv]),
        "what": "bytes the workers received from each other while persisting polymm.matmul(a, b) (and a @ b) "
        "of float32 operands persisted on the workers; median of --repeats runs",
        "cases": {
            name: {"x1": [CASES[name][0], CASES[name][1]], "x2": [CASES[name][2], CASES[name][3]]}
            for name in args.cases.split(",")
        },
    }
    if args.before:
        record["before"] = before(args)
    record["after"] = {"cases": measure(args), "versions": _versions(), "commit": _commit(), "pin": _pin()}
    if args.before:
        record["table"] = [
            {
                "case": name,
                "before_bytes": record["before"]["cases"][name]["polymm_bytes"],
                "after_bytes": record["after"]["cases"][name]["polymm_bytes"],
                "estimate_bytes": record["after"]["cases"][name].get("estimate_bytes"),
                "schedule": record["after"]["cases"][name].get("schedule"),
                "dask_bytes": record["after"]["cases"][name]["dask_bytes"],
            }
            for name in args.cases.split(",")
        ]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
