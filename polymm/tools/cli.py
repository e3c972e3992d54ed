"""The ``polymm`` command: ``polymm info``, ``bench``, ``explain``, ``fuzz``, ``soak`` and ``warmup``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _info(args) -> int:
    """Each backend as a block of labelled lines, wrapped at the terminal's width (80 columns
    when piped): a table of seven columns broke words mid-way in an 80-column terminal."""
    import shutil
    import textwrap

    import polymm

    from polymm.registry import DEFAULTS_ENV_VAR, defaults_in_use

    infos = polymm.backends()
    used = defaults_in_use()
    if args.json:
        document = [i.as_dict() | {"used_for": [lib for lib, (n, _) in used.items() if n == i.name]} for i in infos]
        print(json.dumps(document, indent=2))
        return 0
    width = max(60, shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80)
    lines = [f"polymm {polymm.__version__} backends", "", "used when a call names no backend:"]
    pad = max(map(len, used)) + 9
    lines += [f"  {lib + ' arrays':<{pad}}{name or '-'} ({why})" for lib, (name, why) in used.items()]
    for info in infos:
        claims = []
        for lib in info.default_for:
            who = used.get(lib, (None,))[0]
            if who == info.name:
                claims.append(f"default for {lib}: used")
            else:
                hint = f"; opt in: {DEFAULTS_ENV_VAR}={lib}={info.name}" if not info.first_party else ""
                claims.append(f"declares default for {lib}: not used, {who!r} computes them{hint}")
        served = f" ({'; '.join(claims)})" if claims else ""
        algorithms = ", ".join(
            f"{a} ({', '.join(info.algorithm_dtypes[a]) or 'not on this device'})" if a in info.algorithm_dtypes else a
            for a in info.algorithms
        )
        plugin = (
            (f"{info.distribution} {info.version}" if info.distribution else "no distribution")
            + f", {info.entry_point or info.origin}"
            + (", first-party" if info.first_party else ", third-party")
        )
        fields = [("from", plugin), ("priority", str(info.priority))]
        fields += [("arrays", info.array_library + served), ("algorithms", algorithms)]
        if info.available:
            fields += [("dtypes", ", ".join(info.dtypes)), ("precisions", ", ".join(info.precisions) or "-")]
            fields += [("device", device) for device in info.devices]
        else:
            fields.append(("reason", info.reason or ""))
        lines += ["", f"{info.name}: {'available' if info.available else 'unavailable'}"]
        for label, text in fields:
            lines += textwrap.wrap(
                text, width, initial_indent=f"  {label:<11}", subsequent_indent=" " * 13, break_on_hyphens=False
            ) or [f"  {label}"]
    print("\n".join(lines))
    return 0


def _sizes(text: str):
    """'512,1024' -> squares; '4095x4097x4099' -> M x N x K."""
    shapes = []
    for item in text.split(","):
        parts = [int(p) for p in item.lower().split("x")]
        if len(parts) == 1:
            parts *= 3
        if len(parts) != 3 or min(parts) < 1:
            raise argparse.ArgumentTypeError(f"bad size {item!r}: use N or MxNxK with positive integers")
        shapes.append(tuple(parts))
    return shapes


def _contractions(names, args, console) -> int:
    """``polymm bench --suite contractions``: the table of :func:`polymm.tools.contractions.run`."""
    from rich.table import Table

    from polymm.tools import contractions

    cases = args.cases.split(",") if args.cases else None
    results = contractions.run(names, cases, quick=args.quick, budget=args.budget)
    if args.json:
        from polymm.tools.cliffs import record

        command = "polymm " + " ".join(sys.argv[1:])
        _write_json(record("contractions", names, command, results=[r.as_dict() for r in results]), args.json)
    if args.json != "-":
        table = Table(title="polymm contractions (best of samples; x library = its time / polymm's)")
        for column in (
            "backend",
            "case",
            "dtype",
            "polymm us",
            "library",
            "library us",
            "x library",
            "matmul us",
            "/ matmul",
            "check",
        ):
            table.add_column(column)
        for r in results:
            table.add_row(
                r.backend,
                r.case,
                r.dtype,
                f"{r.polymm_us:.1f}",
                r.library or "-",
                f"{r.library_us:.1f}" if r.library_us else "-",
                f"{r.vs_library:.2f}" if r.vs_library else "-",
                f"{r.matmul_us:.1f} ({r.products})",
                f"{r.vs_matmul:.2f}",
                r.check,
            )
        console.print(table)
    return 0 if all(r.check == "ok" for r in results) else 1


def _bench(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    import polymm
    from polymm.tools import bench

    console = Console(stderr=args.json == "-")
    if not console.is_terminal:
        console.width = max(console.width, 150)
    if args.backend == "all":
        names = [i.name for i in polymm.backends() if i.available]
    else:
        names = args.backend.split(",")
        for name in names:
            polymm.get_backend(name)  # clear error for unknown / unavailable names
    if args.overhead:
        return _overhead(names, args, console)
    if args.suite == "cliffs":
        return _cliffs(names, args, console)
    if args.suite == "contractions":
        return _contractions(names, args, console)
    algorithms = args.algorithm.split(",") if args.algorithm else None
    dtypes = args.dtype.split(",")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        # Piped to a log (no live progress bar there), each measurement gets a line as it ends.
        log = (
            None
            if console.is_terminal
            else lambda r: console.print(
                f"{r.backend}/{r.algorithm} {r.dtype} {r.m}x{r.n}x{r.k}: {r.seconds * 1e3:.3f} ms, "
                f"{r.ratio:.2f}x {r.reference}{'' if r.correct else ' WRONG: ' + str(r.error)}",
                markup=False,
                highlight=False,
            )
        )
        results = bench.run(names, algorithms, args.sizes, dtypes, args.repeat, progress, on_result=log)
    if args.json:
        _write_json([r.as_dict() for r in results], args.json)
    if args.json != "-":
        table = Table(title="polymm bench (median of repeats; ratio = polymm speed / reference speed)")
        for column in (
            "backend",
            "algorithm",
            "dtype",
            "M x N x K",
            "ms",
            "GFLOP/s",
            "reference",
            "ref GFLOP/s",
            "ratio",
            "check",
        ):
            table.add_column(column, justify="right" if column in ("ms", "GFLOP/s", "ref GFLOP/s", "ratio") else "left")
        clblast = any(r.clblast_gflops for r in results)
        if clblast:
            table.add_column("CLBlast GFLOP/s", justify="right")
        for r in results:
            row = [
                r.backend,
                r.algorithm,
                r.dtype,
                f"{r.m}x{r.n}x{r.k}",
                f"{r.seconds * 1e3:.3f}",
                f"{r.gflops:.1f}",
                r.reference,
                f"{r.reference_gflops:.1f}",
                f"{r.ratio:.2f}x",
                "[green]ok[/]" if r.correct else f"[red]WRONG[/] {r.error}",
            ]
            if clblast:
                row.append(f"{r.clblast_gflops:.1f}" if r.clblast_gflops else "-")
            table.add_row(*row)
        console.print(table)
    if args.plot:
        bench.plot(results, args.plot)
        console.print(f"plot written to {args.plot}")
    return 0 if all(r.correct for r in results) else 1


def _write_json(document, where: str) -> None:
    """``--json``: to standard output (``-``, the bare flag) or to a file."""
    text = json.dumps(document, indent=2)
    if where == "-":
        print(text)
    else:
        with open(where, "w") as f:
            f.write(text + "\n")


def _cliffs(names, args, console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from polymm.tools import cliffs

    if args.sizes_given or args.algorithm:
        raise ValueError(
            "--suite cliffs runs its own fixed matrix with algorithm 'auto'; "
            "narrow it with --cases and --dtype instead of --sizes/--algorithm"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5 * (os.cpu_count() or 1):
        console.print(
            f"[yellow]warning:[/] load average {load:.1f} on {os.cpu_count()} CPUs: "
            "other work shares this machine, so host timings will be noisy"
        )
    dtypes = args.dtype.split(",") if args.dtype_given else None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        command = "polymm " + " ".join(sys.argv[1:])
        done = []

        def on_cell(c):
            # Piped to a log (no live progress bar there), each cell gets a line as it ends; a JSON
            # file is rewritten after every cell, so a run stopped early keeps what it measured.
            if not console.is_terminal:
                console.print(
                    f"{c.backend} {c.case} {c.dtype}: {cliffs.format_ratio(c.ratio)} ({c.seconds * 1e3:.3f} ms, "
                    f"{c.reference} {c.ref_seconds * 1e3:.3f} ms; alone {cliffs.format_ratio(c.ratio_alone)})"
                    f"{'' if c.correct else ' WRONG: ' + str(c.error)}"
                )
            done.append(c)
            if args.json and args.json != "-":
                partial = cliffs.report(done, names, command)
                partial["partial"] = f"{len(done)} cells so far: the run had not ended when this was written"
                _write_json(partial, args.json)

        cells = cliffs.run(
            names, cases=args.cases, dtypes=dtypes, budget=args.budget, progress=progress, on_cell=on_cell
        )
    document = cliffs.report(cells, names, command)
    if args.json:
        _write_json(document, args.json)
    if args.json != "-":
        table = Table(
            title="polymm cliff suite: polymm.matmul speed / reference speed (best whole call; ratio: calls "
            "interleaved one by one with the reference, alone: each side in blocks of its own calls)"
        )
        columns = (
            "backend",
            "case",
            "dtype",
            "shape",
            "ms",
            "GFLOP/s",
            "reference",
            "ref ms",
            "ratio",
            "alone",
            "check",
        )
        for column in columns:
            table.add_column(
                column, justify="right" if column in ("ms", "GFLOP/s", "ref ms", "ratio", "alone") else "left"
            )
        clblast = any(c.clblast_ratio for c in cells)
        if clblast:
            table.add_column("vs CLBlast", justify="right")
        for c in cells:
            ratio = cliffs.format_ratio(c.ratio) + (" ~" if c.noisy else "")
            colour = "red" if c.ratio < 0.5 else "yellow" if c.ratio < 0.8 else "green"
            row = [
                c.backend,
                c.case,
                c.dtype,
                c.shape,
                f"{c.seconds * 1e3:.3f}",
                f"{c.gflops:.1f}",
                c.reference,
                f"{c.ref_seconds * 1e3:.3f}",
                f"[{colour}]{ratio}[/]",
                cliffs.format_ratio(c.ratio_alone) if c.ratio_alone else "-",
                "[green]ok[/]" if c.correct else f"[red]WRONG[/] {c.error}",
            ]
            if clblast:
                row.append(f"{c.clblast_ratio:.2f}x" if c.clblast_ratio else "-")
            table.add_row(*row)
        console.print(table)
        for name, s in document["summary"].items():
            console.print(
                f"[bold]{name}[/]: worst cell {cliffs.format_ratio(s['worst'])} ({s['worst_case']}), "
                f"geomean {cliffs.format_ratio(s['geomean'])} over {s['cells']} cells"
                + (f"; {len(s['noisy'])} noisy (~)" if s["noisy"] else "")
            )
            floor = s.get("floor")
            if floor:
                f = floor["floor"]
                console.print(
                    f"  floor ({f['source']}): cells of {'/'.join(f['dtypes'])} with reference "
                    f">= {f['min_ref_seconds'] * 1e6:.0f} us: worst {cliffs.format_ratio(floor['worst'])} "
                    f"({floor['worst_case']}) vs {f['worst']}, geomean {cliffs.format_ratio(floor['geomean'])} vs "
                    f"{f['geomean']}: " + ("[green]holds[/]" if floor["holds"] else "[red]not met[/]")
                )
                if "alone" in floor:
                    alone = floor["alone"]
                    console.print(
                        f"  the same cells timed alone: worst {cliffs.format_ratio(alone['worst'])} "
                        f"({alone['worst_case']}), geomean {cliffs.format_ratio(alone['geomean'])}"
                    )
    if args.plot:
        cliffs.plot(document, args.plot)
        console.print(f"heatmap written to {args.plot}")
    return 0 if all(c.correct for c in cells) else 1


def _overhead(names, args, console) -> int:
    from rich.table import Table

    import polymm
    from polymm.tools import bench

    rows = []
    for name in names:
        size = args.overhead_size or (4 if polymm.get_backend(name).array_library == "numpy" else 64)
        rows.append(bench.call_overhead(name, size, args.dtype.split(",")[0]))
    if args.json:
        _write_json(rows, args.json)
        if args.json == "-":
            return 0
    table = Table(title="call overhead: polymm.matmul vs the reference on tiny inputs (median us per call)")
    for column in ("backend", "size", "dtype", "polymm us", "reference", "reference us", "extra us", "ratio"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["backend"],
            str(r["size"]),
            r["dtype"],
            f"{r['polymm_us']:.2f}",
            r["reference"],
            f"{r['reference_us']:.2f}",
            f"{r['extra_us']:.2f}",
            f"{r['ratio']:.2f}x",
        )
    console.print(table)
    return 0


def _fuzz(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    import polymm
    from polymm.backend import CONTRACT_DTYPES, optional_dtypes
    from polymm.tools import fuzz, fuzz_contractions

    err = Console(stderr=True)
    report = Console(stderr=args.json, highlight=False, soft_wrap=True)  # never wrap a reproducer
    if args.backend == "all":
        names = [i.name for i in polymm.backends() if i.available]
    else:
        names = [n.strip() for n in args.backend.split(",") if n.strip()]
        for name in names:
            polymm.get_backend(name)  # clear error for unknown / unavailable names
    dtypes = None
    if args.dtypes:
        drawable = CONTRACT_DTYPES + optional_dtypes()  # optional_dtypes() also makes "bfloat16" a NumPy name
        by_name = {str(d): d for d in drawable}
        asked = [d.strip() for d in args.dtypes.split(",") if d.strip()]
        outside = [d for d in asked if d not in by_name]
        if outside:
            raise ValueError(f"--dtypes: {', '.join(outside)} not in the contract ({', '.join(by_name)})")
        dtypes = [by_name[d] for d in asked]
    if args.case is not None and args.case < 0 or args.cases < 0:
        raise ValueError("--case and --cases must not be negative")
    total = len(names) * (1 if args.case is not None else args.cases)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[failures]} failed"),
        console=err,
        transient=True,
        disable=args.case is not None,
    ) as progress:
        task = progress.add_task("fuzz", total=total, failures=0)
        step = max(1, args.cases // 20)
        failed = 0

        def on_case(name, index, outcome):
            nonlocal failed
            failed += outcome.status == "fail"
            progress.update(task, advance=1, description=f"fuzz {name}", failures=failed)
            if not err.is_terminal and (index + 1) % step == 0:  # a log gets a line per 5%
                err.print(f"fuzz {name}: {index + 1}/{args.cases} cases, {failed} failed", highlight=False)

        summary = fuzz.run(
            names,
            args.cases,
            args.seed,
            dtypes=dtypes,
            case=args.case,
            time_budget=args.time_budget,
            max_failures=args.max_failures,
            on_case=on_case,
            precision=args.precision,
        )
    if args.case is not None:
        for name in names:
            algorithms = polymm.get_backend(name).algorithms
            drawn = fuzz.draw_case(args.seed, args.case, dtypes, algorithms, large=args.precision != "default")
            report.print(f"case {args.case} of seed {args.seed} on {name}: {drawn.describe()}", markup=False)
            code = fuzz.case_code(drawn, name, polymm.get_backend(name).algorithms, precision=args.precision)
            report.print(code, markup=False)
            contraction = fuzz_contractions.draw(args.seed, args.case, dtypes)
            if contraction is not None:
                report.print(f"and beside it: {contraction.describe()}", markup=False)
                report.print(fuzz_contractions.code(contraction, name), markup=False)
    for f in summary.failures:
        report.print(f"[red]FAIL[/] {f.backend} case {f.index} (seed {f.seed}): {f.check}: ", end="")
        report.print(f.message, markup=False)
        report.print(f"  drawn:  {f.case}", markup=False)
        report.print(f"  replay: {f.replay}", markup=False)
        if f.reproducer:
            verdict = "fails when run" if f.replays else "did NOT fail when run again (flaky?)"
            report.print(f"  shrunk: {f.shrunk}; reproducer ({verdict}):", markup=False)
            report.print("    " + f.reproducer.rstrip().replace("\n", "\n    "), markup=False)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(summary.per_kind.items())) or "-"
    per_dtype = ", ".join(f"{k} {v}" for k, v in sorted(summary.per_dtype.items())) or "-"
    state = "[red]{} failed[/]".format(len(summary.failures)) if summary.failures else "[green]no failures[/]"
    report.print(
        f"polymm fuzz: seed {args.seed}, {', '.join(names)}: {summary.cases} cases "
        f"({summary.valid} valid, {summary.invalid} invalid, {summary.refused} refused dtypes) "
        f"and {summary.contractions} contractions "
        f"in {summary.seconds:.1f} s; {state}" + (f" (stopped early: {summary.stopped})" if summary.stopped else "")
    )
    report.print(f"  valid, by result dtype: {per_dtype}", markup=False)
    report.print(f"  invalid, and contractions, by kind: {kinds}", markup=False)
    if summary.own_arrays:
        report.print(
            f"  on the backends' own arrays: {summary.own_arrays} cases, {summary.own_out} with out= of that library",
            markup=False,
        )
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
    return 1 if summary.failures else 0


def _soak(args) -> int:
    from rich.console import Console

    from polymm.tools import soak

    if args.minutes is None and args.products is None:
        args.minutes = 1.0
    if args.minutes is not None and args.minutes <= 0:
        raise ValueError("--minutes must be positive")
    err = Console(stderr=True, highlight=False)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()] if args.dtypes else None
    last = [0.0]

    def on_sample(run, sample):  # a line every ten seconds: long runs show progress, piped or not
        if sample.seconds - last[0] >= 10:
            last[0] = sample.seconds
            device = f", device {sample.device / 2**20:.0f} MB" if sample.device is not None else ""
            err.print(
                f"soak {run.backend}: {sample.products:,} products in {sample.seconds:.0f} s, "
                f"resident {sample.resident / 2**20:.0f} MB{device}; {run.wrong} wrong, {run.errors} errors"
            )

    err.print(
        f"soak {args.backend}: compiling (or loading) its kernels first, so that the run measures memory, not compiles"
    )
    run = soak.run(
        args.backend,
        seconds=args.minutes * 60 if args.minutes is not None else None,
        products=args.products,
        threads=args.threads,
        dtypes=dtypes,
        max_side=args.max_side,
        seed=args.seed,
        on_sample=on_sample,
    )
    command = "polymm " + " ".join(sys.argv[1:])
    document = soak.report(run, command, args.warmup)
    v = document["verdict"]
    for line in run.refused:
        err.print(f"  refused here: {line}")
    for line in run.messages:
        err.print(f"  {line}", markup=False)
    device = (
        f"; device {v['device_growth_mb']} MB ({v['device_mb_per_10k']} MB / 10k)" if "device_growth_mb" in v else ""
    )
    if "note" in v:
        err.print(f"  {v['note']}")
    summary = err.print if args.json == "-" else print  # stdout holds the JSON then
    summary(
        f"polymm soak {run.backend}: {run.products:,} products ({run.checked:,} checked) on {run.threads} threads "
        f"in {run.seconds:.0f} s: {run.wrong} wrong, {run.errors} errors; resident {v['start_mb']} -> "
        f"{v['end_mb']} MB; after the first {v['warmup_products']:,} products {v['growth_mb']} MB over "
        f"{v['measured_products']:,} ({v['mb_per_10k']} MB / 10k){device}"
    )
    if args.json:
        _write_json(document, args.json)
    if args.plot:
        soak.plot(document, args.plot)
    return 1 if run.wrong or run.errors else 0


def _warmup(args) -> int:
    """Compile ahead of time, a plain line per kernel as it is ready (a log shows progress too)."""
    import polymm

    jobs = args.jobs or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    start = time.perf_counter()
    spent = polymm.warmup(args.dtypes, backend=args.backend, progress=lambda line: print(line, flush=True), jobs=jobs)
    print(f"polymm warmup: {', '.join(spent)} ready in {time.perf_counter() - start:.1f} s")
    return 0


def _precision_name(text: str) -> str:
    from polymm.precision import check_precision

    try:
        return check_precision(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a shape: {text!r} (write it as 4096x4096, or 4096 for a vector)")


def _explain(args) -> int:
    if args.chunks is not None:
        return _explain_dask(args)
    from .explain import explain

    print(explain(args.x1, args.x2, args.dtype, args.backend, args.algorithm, run=args.run, device=args.device))
    return 0


def _explain_dask(args) -> int:
    """``polymm explain X1 X2 --chunks C``: the Dask schedule on a cluster of ``--workers`` workers, each operand's
    blocks laid out in row-major order in one contiguous run per worker (``--layout rows``) or not yet
    placed (``--layout none``: as for operands that are not persisted)."""
    try:
        import dask.array as da

        from polymm.dask import explain
    except ImportError as exc:
        raise SystemExit(f"polymm explain --chunks needs Dask ({exc}): pip install 'polymm[dask]'") from None
    chunks1 = args.chunks[0] if len(args.chunks) == 1 else args.chunks
    chunks2 = args.chunks2 if args.chunks2 is not None else args.chunks
    chunks2 = chunks2[0] if len(chunks2) == 1 else chunks2
    a = da.empty(args.x1, chunks=chunks1, dtype=args.dtype)
    b = da.empty(args.x2, chunks=chunks2, dtype=args.dtype)
    workers = [f"worker-{n}" for n in range(args.workers)]
    placement = {}
    if args.layout == "rows" and a.ndim == 2 and b.ndim == 2:
        for which, x in (("x1", a), ("x2", b)):
            rows, cols = (len(c) for c in x.chunks)
            placement[which] = {
                (i, j): workers[(i * cols + j) * len(workers) // (rows * cols)]
                for i in range(rows)
                for j in range(cols)
            }
    print(explain(a, b, schedule=args.schedule, workers=workers, placement=placement))
    return 0


def main(argv=None) -> int:
    import polymm
    from polymm.compilation import DEFAULT_DTYPES

    parser = argparse.ArgumentParser(prog="polymm", description="One matmul for every device.")
    parser.add_argument("--version", action="version", version=f"polymm {polymm.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="list backends, availability (with reasons), devices, dtypes, algorithms")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=_info)
    b = sub.add_parser("bench", help="time backends against NumPy (or cuBLAS) measured in the same run")
    b.add_argument("--backend", default="all", help="backend name(s), comma-separated, or 'all' available (default)")
    b.add_argument("--algorithm", default=None, help="algorithm(s), comma-separated (default: every one listed)")
    b.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        help="square sizes N or MxNxK shapes, comma-separated (default 256,512,1024)",
    )
    b.add_argument(
        "--dtype", default=None, help="dtype(s), comma-separated (default float32; the cliff suite: its own per case)"
    )
    b.add_argument("--repeat", type=int, default=5, help="timed samples per case; the median is reported")
    b.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="write results as JSON to FILE, or to standard output when no FILE is given "
        "(table and progress then go to stderr)",
    )
    b.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also draw GFLOP/s against size, or the cliff suite's heatmap (needs matplotlib)",
    )
    b.add_argument(
        "--suite",
        choices=["cliffs", "contractions"],
        help="run a fixed matrix of cases instead of --sizes: 'cliffs' (squares, batches, broadcasts, "
        "matrix-vector, deep K, outer products, views; see polymm.tools.cliffs), 'contractions' "
        "(einsum, tensordot, vecdot against the input library's own and the matmul they reduce to; "
        "see polymm.tools.contractions)",
    )
    b.add_argument(
        "--quick", action="store_true", help="with --suite contractions: tiny shapes, to check the tool works"
    )
    b.add_argument(
        "--cases",
        metavar="PATTERNS",
        help="with --suite: only cases whose name matches one of these comma-separated patterns "
        "(shell-style, e.g. 'square-*,gemv-*')",
    )
    b.add_argument(
        "--budget",
        type=float,
        default=0.8,
        help="with --suite: seconds of timing per cell, split between polymm and the reference",
    )
    b.add_argument(
        "--overhead",
        action="store_true",
        help="measure per-call overhead on tiny inputs instead: 4x4 NumPy against numpy.matmul, 64x64 "
        "CuPy against cupy.matmul, 64x64 OpenCL arrays against one elementwise kernel on their queue",
    )
    b.add_argument("--overhead-size", type=int, default=None, help="matrix size for --overhead")
    b.set_defaults(func=_bench)
    ex = sub.add_parser(
        "explain",
        help="what a product would run and why: path, kernel, tiles, grid, memory, registers, "
        "occupancy, arithmetic intensity and roofline bound (--run: and the measured time)",
    )
    ex.add_argument("x1", type=_shape, help="shape of x1, e.g. 4096x4096 (a vector: 4096; a batch: 8x64x64)")
    ex.add_argument("x2", type=_shape, help="shape of x2")
    ex.add_argument("--dtype", default="float32")
    ex.add_argument(
        "--backend", default=None, help="default: the backend polymm.matmul would choose for NumPy arrays here"
    )
    ex.add_argument("--algorithm", default="auto")
    ex.add_argument("--run", action="store_true", help="also time the call (median of several)")
    ex.add_argument(
        "--device",
        default=None,
        help="plan for a GPU that is not here (H100, H200) with --backend cuda or opencl; registers from nvcc",
    )
    ex.add_argument(
        "--chunks",
        type=_shape,
        default=None,
        help="explain the product of Dask arrays of these chunks instead (e.g. 1024 or 1024x512): the schedule "
        "polymm.dask picks, why, and the bytes it moves between workers",
    )
    ex.add_argument("--chunks2", type=_shape, default=None, help="with --chunks: x2's chunks (default: --chunks)")
    ex.add_argument("--workers", type=int, default=2, help="with --chunks: the number of Dask workers (default 2)")
    ex.add_argument(
        "--layout",
        choices=["rows", "none"],
        default="rows",
        help="with --chunks: where the operands' blocks live: 'rows' (each operand's blocks in row-major order, one "
        "contiguous run per worker, as persisted), 'none' (not persisted: Dask places the tasks)",
    )
    ex.add_argument(
        "--schedule",
        default=None,
        help="with --chunks: a schedule to explain instead of the one 'auto' picks (panel, tree, broadcast, grid, "
        "split-k)",
    )
    ex.set_defaults(func=_explain)
    fz = sub.add_parser(
        "fuzz",
        help="check a backend on random valid and invalid problems against the reference; "
        "failures are shrunk into runnable reproducers",
    )
    fz.add_argument(
        "--backend", default="cpu", help="backend name(s), comma-separated, or 'all' available (default cpu)"
    )
    fz.add_argument("--cases", type=int, default=1000, help="cases per backend (default 1000)")
    fz.add_argument("--seed", type=int, default=0, help="run seed; case I of seed S is the same on every run")
    fz.add_argument(
        "--case", type=int, default=None, metavar="I", help="replay only case I of --seed, and print its code"
    )
    fz.add_argument(
        "--dtypes",
        default=None,
        help="operand dtypes to draw, comma-separated (default: every contract dtype, and bfloat16 with ml_dtypes)",
    )
    fz.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop drawing new cases after this many seconds",
    )
    fz.add_argument("--max-failures", type=int, default=10, help="stop after this many failures (default 10)")
    fz.add_argument(
        "--precision",
        default="default",
        type=_precision_name,
        help="compute and check every case in this precision mode (default, tf32x3, tf32; see polymm.precision)",
    )
    fz.add_argument("--json", action="store_true", help="print the summary as JSON (the report goes to stderr)")
    fz.set_defaults(func=_fuzz)
    sk = sub.add_parser(
        "soak",
        help="a long stream of varied random products on one backend, values sampled and checked, "
        "memory watched: does it stay flat?",
    )
    sk.add_argument("--backend", default="cpu")
    sk.add_argument("--minutes", type=float, default=None, help="run this long (default 1, unless --products)")
    sk.add_argument("--products", type=int, default=None, help="stop after this many products")
    sk.add_argument("--threads", type=int, default=1, help="threads calling polymm at once (default 1)")
    sk.add_argument(
        "--dtypes", default=None, help="comma-separated (default: polymm.tools.soak.DEFAULT_DTYPES, six of them)"
    )
    sk.add_argument("--max-side", type=int, default=300, help="largest M, N and K drawn (default 300)")
    sk.add_argument("--warmup", type=int, default=5000, help="products before growth is measured (default 5000)")
    sk.add_argument("--seed", type=int, default=0)
    sk.add_argument("--json", default=None, metavar="FILE", help="write the run and its samples as JSON ('-': stdout)")
    sk.add_argument("--plot", default=None, metavar="PNG", help="plot memory against products")
    sk.set_defaults(func=_soak)
    wu = sub.add_parser(
        "warmup", help="compile a backend's kernels for chosen dtypes now, so that no later call waits on a compile"
    )
    wu.add_argument("--backend", default=None, help="default: the backend polymm.matmul would choose for NumPy arrays")
    wu.add_argument(
        "--dtypes",
        default=",".join(DEFAULT_DTYPES),
        help=f"comma-separated, or 'all' the backend computes (default {','.join(DEFAULT_DTYPES)})",
    )
    wu.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="worker processes compiling at once, where the backend groups its kernels (default: one per core)",
    )
    wu.set_defaults(func=_warmup)
    sub.add_parser(
        "tune",
        add_help=False,
        help="time a backend's kernel parameters on this machine and record the fastest "
        "(polymm tune --backend cpu|opencl|cuda; polymm tune --help)",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["tune"]:  # its own options: polymm.tools.tune's parser
        from polymm.tools import tune

        return tune.main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "bench":
        args.sizes_given, args.dtype_given = args.sizes is not None, args.dtype is not None
        args.sizes = args.sizes or _sizes("256,512,1024")
        args.dtype = args.dtype or "float32"
    try:
        return args.func(args)
    except (ValueError, TypeError, RuntimeError) as exc:
        print(f"polymm {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
