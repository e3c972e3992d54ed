#!/usr/bin/env python
"""Tables and plots for the docs' performance page, from the recorded asv results.

For each machine under ``asv_bench/results/`` (or those named), takes the newest full result
file (see :func:`newest_result`) and writes

* ``docs/_generated/perf_<machine>.md``: what ran (machine, date, commit, command) and
  tables of GFLOP/s with the ratio to the reference library, per backend and algorithm;
* ``docs/_static/perf_<machine>.png``: GFLOP/s against n (log-log), one line per backend and
  algorithm, the reference library as its own dashed line.

    python scripts/perf_from_asv.py                       # every machine
    python scripts/perf_from_asv.py polymm-h100           # one
"""

from __future__ import annotations

import argparse
import ast
import datetime
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "asv_bench" / "results"
GENERATED = ROOT / "docs" / "_generated"
STATIC = ROOT / "docs" / "_static"

#: How each machine's results were recorded (the command on the performance page).
COMMANDS = {
    "polymm-2core-ci": "scripts/asv_record_local.sh  (asv.existing.conf.json, slices of asv run)",
    "polymm-2core-avx512": "ASV_MACHINE=polymm-2core-avx512 scripts/asv_record_local.sh --keep  (asv.existing.conf.json, slices of asv run)",
    "polymm-h100": ". .device/setup.sh && POLYMM_COMMIT=<sha> POLYMM_COMMIT_DATE=<unix time> ASV_GPU_BUDGET=330 bash scripts/asv_gpu_run.sh $OUT",
    "polymm-h200": ". .device/setup.sh && ASV_MACHINE=polymm-h200 POLYMM_COMMIT=<sha> POLYMM_COMMIT_DATE=<unix time> ASV_GPU_BUDGET=380 bash scripts/asv_gpu_run.sh $OUT; then, its results carried to a second call (asv_bench/scratch), ASV_GPU_SLICES='overhead cliffs_cuda_sq cliffs_cuda_mv cliffs_cuda_tc cliffs_cuda_tc2 cliffs_cuda_f64' ASV_GPU_BUDGET=280 the same (the budget ended in cliffs_cuda_tc)",
}


def _count(res) -> int:
    """The values a run recorded for this page's tables: the cliff suite's cells (a run of its
    slices alone, 2026-11-28) are not among them, so such a run never replaces the tables."""
    n = 0
    for key in res.get_all_result_keys():
        if key.startswith("cliffs."):
            continue
        values = res.get_result_value(key, res.get_result_params(key))
        n += sum(v is not None for v in (values if isinstance(values, list) else [values]))
    return n


def newest_result(machine_dir: Path):
    """The newest recording among the full ones (at least half the values of the fullest): history
    runs over many commits record a few benchmarks each and must not hide the full table, and an
    old full run must not stand in for today's code."""
    from asv.results import Results

    runs = []
    for path in machine_dir.glob("*.json"):
        if path.name == "machine.json":
            continue
        res = Results.load(str(path))
        runs.append((_count(res), res.date or 0, res))
    if not runs:
        return None
    fullest = max(count for count, _, _ in runs)
    return max((r for r in runs if 2 * r[0] >= fullest), key=lambda r: r[1])[2]


def square_gflops(res) -> dict:
    """``Square.track_gflops``, and where a run timed a square without it (a time-boxed GPU run
    keeps ``time_matmul`` only), the GFLOP/s of that time: 2 n^3 flops a call."""
    gflops = table_of(res, "matmul.Square.track_gflops")
    for (b, a, n, d), seconds in table_of(res, "matmul.Square.time_matmul").items():
        gflops.setdefault((b, a, n, d), 2 * n**3 / seconds / 1e9)
    return gflops


def cliff_lines(res) -> list[str]:
    """The cliff suite's cells of the run (``CliffCell.track_ratio``), per backend: how many, the
    worst and the geometric mean of the ratios to the reference."""
    cells = table_of(res, "cliffs.CliffCell.track_ratio")
    if not cells:
        return []
    lines = [
        "Cliff-suite cells (asv `CliffCell.track_ratio`: the reference's time over polymm's, interleaved):",
        "",
        "| backend | cells | worst | geometric mean |",
        "| --- | ---: | --- | ---: |",
    ]
    for backend in sorted({b for b, _ in cells}):
        mine = {c: v for (b, c), v in cells.items() if b == backend}
        worst = min(mine, key=mine.get)
        mean = statistics.geometric_mean(mine.values())
        lines.append(f"| `{backend}` | {len(mine)} | {mine[worst]:.2f}x ({worst}) | {mean:.2f}x |")
    return [*lines, ""]


def table_of(res, key):
    """{param tuple: value} of one benchmark (values None where skipped or failed)."""
    if key not in res.get_all_result_keys():
        return {}
    params = res.get_result_params(key)
    values = res.get_result_value(key, params)
    combos = itertools.product(*[[ast.literal_eval(v) for v in p] for p in params])
    return {c: v for c, v in zip(combos, values) if v is not None and not (isinstance(v, float) and math.isnan(v))}


ALGORITHM_ORDER = {"naive": 0, "tiled": 1, "tiled-dynamic": 2, "auto": 3}


def order(key):
    """Backend by name, then algorithms from the textbook to the fast path."""
    return tuple(ALGORITHM_ORDER.get(k, 9) if isinstance(k, str) and k in ALGORITHM_ORDER else k for k in key)


def fmt(gflops, ratio):
    if gflops is None:
        return "-"
    g = f"{gflops:,.0f}" if gflops >= 100 else f"{gflops:.3g}"
    if ratio is None:
        return g
    return f"{g} ({ratio:.2f}x)" if ratio >= 0.1 else f"{g} ({ratio:.2g}x)"


def write_machine(machine: str) -> bool:
    machine_dir = RESULTS / machine
    res = newest_result(machine_dir)
    if res is None:
        print(f"{machine}: no results")
        return False
    info = json.loads((machine_dir / "machine.json").read_text())
    started = [v for v in res.started_at.values() if v]
    when = datetime.datetime.fromtimestamp(max(started) / 1000, datetime.timezone.utc) if started else None
    lines = [
        f"**{machine}**: {info.get('cpu', '?')}, {info.get('ram', '?')} RAM, {info.get('os', '?')}.  ",
        f"Recorded {when:%Y-%m-%d %H:%M} UTC for commit `{res.commit_hash[:10]}` (environment `{res.env_name}`).  "
        if when
        else f"Commit `{res.commit_hash[:10]}`.  ",
        f"Command: `{COMMANDS.get(machine, 'asv run --config asv.existing.conf.json ...')}`",
        "",
    ]
    gflops = square_gflops(res)
    ratio = table_of(res, "matmul.Square.track_ratio_to_reference")
    refs = table_of(res, "matmul.Reference.track_gflops")
    for dtype in ("float32", "float64"):
        rows = sorted({(b, a) for (b, a, n, d) in gflops if d == dtype}, key=order)
        sizes = sorted({n for (b, a, n, d) in gflops if d == dtype})
        if not rows:
            continue
        lines += [f"Square `{dtype}`, GFLOP/s (ratio to the reference measured in the same process):", ""]
        lines.append("| backend | algorithm | " + " | ".join(f"n = {n}" for n in sizes) + " |")
        lines.append("| --- | --- | " + " | ".join("---:" for _ in sizes) + " |")
        for b, a in rows:
            cells = [fmt(gflops.get((b, a, n, dtype)), ratio.get((b, a, n, dtype))) for n in sizes]
            lines.append(f"| `{b}` | `{a}` | " + " | ".join(cells) + " |")
        for lib in ("numpy", "cupy"):
            cells = [fmt(refs.get((lib, n, dtype)), None) if (lib, n, dtype) in refs else "-" for n in sizes]
            if any(c != "-" for c in cells):
                lines.append(f"| {lib} (reference) | | " + " | ".join(cells) + " |")
        lines.append("")
    for key, label in (("Shapes", "shape"), ("Batched", "batch")):
        g = table_of(res, f"matmul.{key}.track_gflops")
        r = table_of(res, f"matmul.{key}.track_ratio_to_reference")
        if not g:
            continue
        lines += [
            f"{key} (float32), GFLOP/s (ratio to the reference):",
            "",
            f"| backend | algorithm | {label} | GFLOP/s (ratio) |",
            "| --- | --- | --- | ---: |",
        ]
        for (b, a, s), v in sorted(g.items(), key=lambda kv: order(kv[0])):
            lines.append(f"| `{b}` | `{a}` | {s} | {fmt(v, r.get((b, a, s)))} |")
        lines.append("")
    lines += cliff_lines(res)
    over = table_of(res, "matmul.CallOverhead.time_matmul")
    over_ref = table_of(res, "matmul.CallOverhead.time_reference")
    if over:
        lines += [
            "Call overhead, float32 (microseconds per call; the reference library beside it):",
            "",
            "| backend | n | polymm.matmul | reference |",
            "| --- | ---: | ---: | ---: |",
        ]
        for (b, n), v in sorted(over.items()):
            ref = over_ref.get((b, n))
            lines.append(
                f"| `{b}` | {n} | {v * 1e6:.1f} | {ref * 1e6:.1f} |" if ref else f"| `{b}` | {n} | {v * 1e6:.1f} | - |"
            )
        lines.append("")
    if plot(machine, gflops, refs):
        reference = "`cupy.matmul` (cuBLAS)" if any(k[0] == "cupy" for k in refs) else "NumPy (OpenBLAS)"
        lines += [
            f"```{{figure}} _static/perf_{machine}.png",
            f":alt: GFLOP/s against n on {machine}",
            ":width: 90%",
            "",
            f"GFLOP/s against n, float32, on {machine} (asv `Square.track_gflops`; the dotted line is "
            f"{reference} measured in the same run).",
            "```",
            "",
        ]
    GENERATED.mkdir(parents=True, exist_ok=True)
    (GENERATED / f"perf_{machine}.md").write_text("\n".join(lines), encoding="utf-8")
    print("wrote", (GENERATED / f"perf_{machine}.md").relative_to(ROOT))
    return True


def plot(machine, gflops, refs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = sorted({(b, a) for (b, a, n, d) in gflops if d == "float32"})
    if not lines:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.6))
    markers = {"naive": "v", "tiled": "s", "tiled-dynamic": "D", "auto": "o"}
    styles = {"cpu": "-", "opencl": "--", "cuda": "-."}
    for b, a in lines:
        pts = sorted((n, v) for (bb, aa, n, d), v in gflops.items() if (bb, aa, d) == (b, a, "float32"))
        if pts:
            ax.plot(*zip(*pts), styles.get(b, ":"), marker=markers.get(a, "x"), label=f"{b} {a}")
    for lib, color in (("numpy", "black"), ("cupy", "dimgray")):
        pts = sorted((n, v) for (library, n, d), v in refs.items() if library == lib and d == "float32")
        if pts:
            ax.plot(*zip(*pts), ":", color=color, lw=2.5, label=f"{lib}.matmul (reference)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (square n x n @ n x n, float32)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"polymm on {machine} (asv track_gflops)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    STATIC.mkdir(parents=True, exist_ok=True)
    fig.savefig(STATIC / f"perf_{machine}.png", dpi=110)
    plt.close(fig)
    print("wrote", (STATIC / f"perf_{machine}.png").relative_to(ROOT))
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("machines", nargs="*")
    args = parser.parse_args(argv)
    machines = args.machines or sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
    ok = [write_machine(m) for m in machines]
    return 0 if any(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
