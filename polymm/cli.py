"""The ``polymm`` command: ``polymm info`` and ``polymm bench``."""

from __future__ import annotations

import argparse
import json
import sys


def _info(args) -> int:
    from rich.console import Console
    from rich.table import Table

    import polymm

    infos = polymm.backends()
    if args.json:
        print(json.dumps([vars(i) for i in infos], indent=2))
        return 0
    table = Table(title=f"polymm {polymm.__version__} backends")
    for column in ("backend", "available", "algorithms", "dtypes", "devices / reason"):
        table.add_column(column, overflow="fold")
    for info in infos:
        table.add_row(
            info.name,
            "[green]yes[/]" if info.available else "[red]no[/]",
            ", ".join(info.algorithms),
            ", ".join(info.dtypes),
            "\n".join(info.devices) if info.available else (info.reason or ""),
        )
    Console().print(table)
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


def _bench(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    import polymm
    from polymm import bench

    console = Console(stderr=args.json)
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
    algorithms = args.algorithm.split(",") if args.algorithm else None
    dtypes = args.dtype.split(",")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        results = bench.run(names, algorithms, args.sizes, dtypes, repeat=args.repeat, progress=progress)
    if args.json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        table = Table(title="polymm bench (median of repeats; ratio = polymm speed / reference speed)")
        for column in ("backend", "algorithm", "dtype", "M x N x K", "ms", "GFLOP/s", "reference", "ref GFLOP/s",
                       "ratio", "check"):
            table.add_column(column, justify="right" if column in ("ms", "GFLOP/s", "ref GFLOP/s", "ratio") else "left")
        clblast = any(r.clblast_gflops for r in results)
        if clblast:
            table.add_column("CLBlast GFLOP/s", justify="right")
        for r in results:
            row = [r.backend, r.algorithm, r.dtype, f"{r.m}x{r.n}x{r.k}", f"{r.seconds * 1e3:.3f}",
                   f"{r.gflops:.1f}", r.reference, f"{r.reference_gflops:.1f}", f"{r.ratio:.2f}x",
                   "[green]ok[/]" if r.correct else f"[red]WRONG[/] {r.error}"]
            if clblast:
                row.append(f"{r.clblast_gflops:.1f}" if r.clblast_gflops else "-")
            table.add_row(*row)
        console.print(table)
    if args.plot:
        bench.plot(results, args.plot)
        console.print(f"plot written to {args.plot}")
    return 0 if all(r.correct for r in results) else 1


def _overhead(names, args, console) -> int:
    from rich.table import Table

    import polymm
    from polymm import bench

    rows = []
    for name in names:
        size = args.overhead_size or (64 if polymm.get_backend(name).array_library == "cupy" else 4)
        rows.append(bench.call_overhead(name, size, args.dtype.split(",")[0]))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title="call overhead: polymm.matmul vs the reference on tiny inputs (median us per call)")
    for column in ("backend", "size", "dtype", "polymm us", "reference", "reference us", "extra us", "ratio"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["backend"], str(r["size"]), r["dtype"], f"{r['polymm_us']:.2f}", r["reference"],
                      f"{r['reference_us']:.2f}", f"{r['extra_us']:.2f}", f"{r['ratio']:.2f}x")
    console.print(table)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="polymm", description="One matmul for every device.")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="list backends, availability (with reasons), devices, dtypes, algorithms")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=_info)
    b = sub.add_parser("bench", help="time backends against NumPy (or cuBLAS) measured in the same run")
    b.add_argument("--backend", default="all", help="backend name(s), comma-separated, or 'all' available (default)")
    b.add_argument("--algorithm", default=None, help="algorithm(s), comma-separated (default: every one listed)")
    b.add_argument("--sizes", type=_sizes, default=_sizes("256,512,1024"),
                   help="square sizes N or MxNxK shapes, comma-separated (default 256,512,1024)")
    b.add_argument("--dtype", default="float32", help="dtype(s), comma-separated (default float32)")
    b.add_argument("--repeat", type=int, default=5, help="timed samples per case; the median is reported")
    b.add_argument("--json", action="store_true", help="print results as JSON (table and progress go to stderr)")
    b.add_argument("--plot", metavar="FILE.png", help="also draw GFLOP/s against size (needs matplotlib)")
    b.add_argument("--overhead", action="store_true",
                   help="measure per-call overhead on tiny inputs (4x4 on host, 64x64 on CUDA) instead")
    b.add_argument("--overhead-size", type=int, default=None, help="matrix size for --overhead")
    b.set_defaults(func=_bench)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, RuntimeError) as exc:
        print(f"polymm {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
