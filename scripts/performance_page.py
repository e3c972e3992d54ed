#!/usr/bin/env python
"""The top of the docs' performance page, generated from the recorded runs: today's figures per device.

For every device and backend with a whole cliff-suite run in ``benchmarks/cliffs/`` (the whole
suite, or a merge of parts that covers it, for every dtype or the floor's float32/float64: 50
cells or more; with the default settings, no ``POLYMM_TUNING`` or wait-policy variable in its
recorded environment; not a ``before`` baseline), the latest run gives one row: date, cells, worst
cell, geometric mean, the floor and whether it holds, the record and the command. Then the
latest heatmap per device, the scale-out records of ``benchmarks/dask/``, and the history of
every device's geometric mean and worst cell over its whole runs as a plot. Writes
``docs/_generated/today.md`` and ``docs/_static/history.png``; a test checks that the committed
page is what this script writes.

    python scripts/performance_page.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from pages import publish  # noqa: E402

from polymm.tools.cliffs import format_ratio  # noqa: E402

CLIFFS = ROOT / "benchmarks" / "cliffs"
DASK = ROOT / "benchmarks" / "dask"
PAGE = ROOT / "docs" / "_generated" / "today.md"
HISTORY = ROOT / "docs" / "_static" / "history.png"
#: Fewer cells than this: a run of some dtypes only (float64, the tensor-core dtypes), not a whole suite.
WHOLE = 50
#: Recorded environment variables that only choose a device or name the record
#: (``scripts/host_cliffs.sh``'s ``POLYMM_HOST_NAME``): a run with any other (a tuning file, a
#: thread pool's wait policy) is a diagnostic, not today's default figure.
DEVICE_CHOICE = {"POLYMM_OPENCL_DEVICE", "POLYMM_HOST_NAME"}


def _default_whole(doc: dict, summary: dict) -> bool:
    """Whether ``doc`` is a whole run with the default settings (see the module's docstring)."""
    every_case = "--cases " not in doc["command"] or "parts" in doc
    settings = set(doc["machine"].get("environment") or {}) - DEVICE_CHOICE
    return every_case and not settings and summary["cells"] >= WHOLE


def _short(name: str) -> str:
    """A processor's name without trademarks and filler."""
    for noise in ("(R)", "(TM)", " Processor", " CPU"):
        name = name.replace(noise, "")
    return " ".join(name.split())


#: OpenCL platforms by the names readers know them.
PLATFORMS = {"Portable Computing Language": "PoCL", "NVIDIA CUDA": "NVIDIA OpenCL"}


def _used_device(machine: dict, backend: str) -> str:
    """The listed device a run computed on: for OpenCL the one ``POLYMM_OPENCL_DEVICE`` named
    (``platform:device`` or a word of its name, as the backend matches it), else the first GPU,
    else the first device; for the others the first listed."""
    listed = machine.get("devices", {}).get(backend) or [""]
    if backend != "opencl":
        return listed[0]
    wanted = (machine.get("environment") or {}).get("POLYMM_OPENCL_DEVICE", "").strip().lower()
    if wanted:
        named = [
            d
            for d in listed
            if d.startswith(wanted + " ")
            or wanted in d.split(" on ", 1)[0].lower()
            or wanted in d.split(" on ", 1)[-1].lower()
        ]
        return (named or listed)[0]
    return next((d for d in listed if "[GPU]" in d), listed[0])


def command_line(doc: dict) -> str:
    """A run's command as typed, with the environment it recorded (``POLYMM_OPENCL_DEVICE=...``)."""
    env = " ".join(f"{k}={v}" for k, v in sorted((doc["machine"].get("environment") or {}).items()))
    return f"{env} {doc['command']}" if env else doc["command"]


#: Host kinds a record's name gives (``POLYMM_HOST_NAME``) where the processor's name does not:
#: every AMD EPYC guest reports "AMD EPYC", whether Zen 2, 3, 4 or 5.
HOST_KINDS = {"zen3": "Zen 3", "zen4": "Zen 4", "zen5": "Zen 5", "avx512": "AVX-512"}


def device_label(backend: str, doc: dict, stem: str = "") -> str:
    """Where a run ran, in a few words: the GPU's name, the OpenCL device and its platform, or the
    host's processor and cores (and the host kind the record's name ``stem`` gives)."""
    label = _device_label(backend, doc)
    kind = next((name for word, name in HOST_KINDS.items() if f"-{word}-" in f"{stem}-"), None)
    if kind and "cores" in label:
        label = label.replace(" cores", f" cores, {kind}", 1)
    return label


def _device_label(backend: str, doc: dict) -> str:
    m = doc["machine"]
    first = _used_device(m, backend)
    if backend == "cuda":
        found = re.match(r"cuda:\d+ (.+?) \(", first)
        return found.group(1) if found else first
    if backend == "opencl":
        found = re.match(r"\d+:\d+ (.+?) \[(\w+)\] on (.+?):", first)
        if found:
            name, kind, platform = found.groups()
            name = _short(name.removeprefix("pthread-").removeprefix("cpu-skylake-avx512-"))
            platform = PLATFORMS.get(platform, platform)
            return f"{name} ({platform})" if kind == "GPU" else f"{name}, {m.get('cpus')} cores ({platform})"
        return first
    return f"{_short(m.get('processor', '?'))}, {m.get('cpus')} cores"


def whole_runs() -> dict:
    """``(backend, device) -> [(date, stem, summary, doc)]`` of whole-suite runs, oldest first."""
    found: dict = {}
    for path in sorted(CLIFFS.glob("*.json")):
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("suite") != "cliffs" or "before" in path.stem:
            continue
        for backend, summary in doc["summary"].items():
            if _default_whole(doc, summary):
                found.setdefault((backend, device_label(backend, doc, path.stem)), []).append(
                    (doc["date"], path.stem, summary, doc)
                )
    return {key: sorted(runs) for key, runs in sorted(found.items())}


def ratio_kind(doc: dict) -> str:
    """How a record's ratios were timed: ``program`` (our call plus what it adds to the reference's
    next one, ``ref_added``), ``interleaved`` (call by call, the reference's calls as they came)
    or ``blocks`` (each side in blocks of its own calls: the records before the two were told apart)."""
    cells = doc.get("cells") or [{}]
    if any("ref_added" in c for c in cells):
        return "program"
    return "interleaved" if any(c.get("timing") == "interleaved" for c in cells) else "blocks"


def _today_rows(runs: dict):
    yield "| device | backend | date (UTC) | cells | worst cell | geomean | floor (its cells: worst / geomean) | ratio | record |"
    yield "|---|---|---|---:|---|---:|---|---|---|"
    for (backend, device), history in runs.items():
        date, stem, s, doc = history[-1]
        cells = f"{s['cells']} (cut short)" if doc.get("partial") else str(s["cells"])
        f = s.get("floor")
        floor = "-"
        if f:
            verdict = "holds" if f["holds"] else "does not hold"
            floor = (
                f"{verdict}: {format_ratio(f['worst'])} / {format_ratio(f['geomean'])} "
                f"(asks {f['floor']['worst']} / {f['floor']['geomean']})"
            )
        yield (
            f"| {device} | `{backend}` | {date[:16].replace('T', ' ')} | {cells} | "
            f"{format_ratio(s['worst'])} ({s['worst_case']}) | {format_ratio(s['geomean'])} | {floor} | "
            f"{ratio_kind(doc)} | `{stem}` |"
        )


def _dask_rows():
    yield "| machine | transport | date (UTC) | case | one GPU | more GPUs | polymm / Dask `a @ b` (most GPUs) | record |"
    yield "|---|---|---|---|---|---|---|---|"
    for path in sorted(DASK.glob("*.json")):
        doc = json.loads(path.read_text())
        rows = {(f["mode"], f["n"], f["workers"], f["impl"]): f for f in doc.get("figures", []) if "error" not in f}
        for mode in ("strong", "tall", "deep", "weak"):
            sizes = sorted({n for (m, n, w, i) in rows if m == mode and i == "polymm"}, key=str)
            for n in sizes:
                runs = {w: f for (m, size, w, i), f in rows.items() if (m, size, i) == (mode, n, "polymm")}
                one, more = runs.get(1), sorted(w for w in runs if w > 1)
                if not (one and more):
                    continue
                case = "x".join(map(str, one["shape"][0])) + " @ " + "x".join(map(str, one["shape"][1]))
                if mode == "weak":
                    case = f"weak: {one['shape'][0][0]} rows per GPU"
                kind = " ".join(x for x in (one.get("dtype", "float32"), one.get("precision")) if x)
                scaled = []
                for w in more:
                    f = runs[w]
                    gain = (
                        f"{f['tflops'] / (w * one['tflops']):.0%} efficient"
                        if mode == "weak"
                        else f"{one['median_s'] / f['median_s']:.2f}x"
                    )
                    scaled.append(f"{w}: {f['median_s']:.3f} s ({gain})")
                dask_most = rows.get((mode, n, more[-1], "dask"))
                versus = format_ratio(runs[more[-1]]["tflops"] / dask_most["tflops"]) if dask_most else "-"
                yield (
                    f"| {doc['device']} | {doc.get('protocol', 'tcp')} | {doc['date'][:16].replace('T', ' ')} | "
                    f"{case}, {kind} | {one['median_s']:.3f} s | {'; '.join(scaled)} | {versus} | `{path.stem}` |"
                )


def render() -> str:
    runs = whole_runs()
    lines = [
        "<!-- generated by scripts/performance_page.py from benchmarks/cliffs/ and benchmarks/dask/: do not edit -->",
        "",
        "Each row is the latest whole cliff-suite run of that device and backend (ratios against the",
        "reference library on the same device: NumPy on a CPU, cuBLAS through `cupy.matmul` on a GPU;",
        "above 1.00x polymm is faster). The floor is the one the issues set for that backend, over the",
        "cells it covers. *ratio* says how the record timed: `program`, each call right after one of",
        "the reference's, with what our calls add to the reference's next ones counted against us",
        "(since 2026-12-04, ce6fa4a); `interleaved`, call by call, the reference's calls as they came",
        "(a reference slowed by our spinning threads raised our ratio; before fc31867, 2026-12-04, a",
        "call could also follow one of its own side); `blocks`, each side in blocks of its own calls.",
        "Records of different kinds do not compare: the later kinds are the stricter.",
        "",
        *_today_rows(runs),
        "",
        "The commands:",
        "",
    ]
    for (backend, device), history in runs.items():
        lines.append(f"* {device}, `{backend}`: `{command_line(history[-1][3])}`")
    lines += ["", "### Latest heatmaps", ""]
    for (backend, device), history in runs.items():
        stem = history[-1][1]
        lines += [
            f"```{{figure}} _static/cliffs/{stem}.png",
            f":alt: cliff-suite heatmap of {backend} on {device}",
            "",
            f"{device}, `{backend}`, {history[-1][0][:10]} (`{stem}`).",
            "```",
            "",
        ]
    lines += ["### Several GPUs (Dask)", "", *_dask_rows(), "", "More in {doc}`scaling`.", ""]
    lines += [
        "### History",
        "",
        "```{figure} _static/history.png",
        ":alt: geometric mean and worst cell of every whole cliff-suite run, per device, over time",
        "",
        "Every whole run of the cliff suite, per device and backend: the geometric mean of its ratios",
        "(left) and its worst cell (right). Every run, with its heatmap and table: {doc}`runs`.",
        "```",
        "",
    ]
    return "\n".join(lines)


def plot_history(runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from datetime import datetime

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for (backend, device), history in runs.items():
        dates = [datetime.fromisoformat(date.replace("Z", "+00:00")) for date, *_ in history]
        label = f"{device} ({backend})"
        axes[0].plot(dates, [s["geomean"] for _, _, s, _ in history], "-o", markersize=3, label=label)
        axes[1].plot(dates, [s["worst"] for _, _, s, _ in history], "-o", markersize=3, label=label)
    for ax, title in zip(axes, ("geometric mean of the ratios", "worst cell")):
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(mdates.DayLocator())
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    axes[0].set_ylabel("polymm / reference (higher: faster)")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    publish(PAGE, render())
    plot_history(whole_runs(), HISTORY)
    print(f"wrote {PAGE.relative_to(ROOT)} and {HISTORY.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
