#!/usr/bin/env python
"""Scaling of ``polymm.matmul`` on Dask arrays, against Dask's own ``a @ b``, on one cluster per worker count.

On a machine with N GPUs: for w = 1..N, a dask-cuda ``LocalCUDACluster`` of w workers (one GPU
each; ``--protocol ucx`` by default where ``distributed-ucxx`` is installed: NVLink between the GPUs
of one host; ``tcp`` otherwise, said loudly), float32 operands of random CuPy chunks made and
persisted on the workers, then, interleaved, ``polymm.matmul(a, b).persist()`` and ``(a @ b).persist()``
(cuBLAS per block) timed until every worker's device has finished (a CuPy task returns when its
kernels are queued: ``wait`` alone stops the clock early), with the bytes the workers received
from each other during the run beside each time.  A throughput above the devices' peak for the
dtype is recorded as an error, not a figure.  Strong scaling: one ``n x n @ n x n`` problem per size, every w; the
same for a tall (``m x n @ n x n``) and a deep (``n x k @ k x n``) product.  Weak scaling:
``(w n0) x n0 @ n0 x n0``, the work per worker constant.  Beside each time, what explains it: the
bytes moved and the seconds the workers spent receiving them (their transfer logs), and the
compute time, the block products' work a worker runs (in whole-block equivalents) times one block
product's time on its GPU
(CUDA events, each implementation's own).  A sample of every polymm result is checked
against the higher-precision reference (and compared with the chunk library's own matmul).  Writes
JSON (date, device, command, versions, every timing) and a plot; ``docs/scaling.md`` explains both.

    python scripts/dask_scaling.py --json dask-h200x2.json --plot dask-h200x2.png   # every GPU
    python scripts/dask_scaling.py --cpu --strong 512 --weak 256 --chunk 128         # NumPy chunks, CPU
    python scripts/dask_scaling.py --dtype float32 --precision tf32x3 ...            # polymm's float32-accurate TF32

``NCCL_NVLS_ENABLE=0`` is set for this process and every worker (NVLink multicast stays off).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Every process this script starts inherits these (workers get them again through the nanny).
WORKER_ENV = {"NCCL_NVLS_ENABLE": "0"}
os.environ.update(WORKER_ENV)

REPO = Path(__file__).resolve().parents[1]


class NoGPU(RuntimeError):
    """No CUDA GPU can be used here (the message says why)."""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="NumPy chunks on a CPU LocalCluster (no GPU needed)")
    p.add_argument("--workers", type=_int_list, default=None, help="worker counts, e.g. 1,2 (default: 1..N GPUs)")
    p.add_argument("--strong", type=_int_list, default=[32768, 65536], help="strong-scaling sizes n (n x n @ n x n)")
    p.add_argument("--weak", type=_int_list, default=[16384], help="weak-scaling n0: (w*n0) x n0 @ n0 x n0")
    p.add_argument("--tall", type=_pair_list, default=[], help="tall products m:n (m x n @ n x n), e.g. 65536:4096")
    p.add_argument("--deep", type=_pair_list, default=[], help="deep products n:k (n x k @ k x n), e.g. 8192:65536")
    p.add_argument("--dtype", default="float32", choices=sorted(PEAK), help="operands' dtype (both)")
    p.add_argument("--precision", default=None, help="polymm precision= for the block products (e.g. tf32x3)")
    p.add_argument("--chunk", type=int, default=8192, help="square chunk edge, the same for both operands")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions per implementation (after a warm-up)")
    p.add_argument("--backend", default=None, help="polymm backend= for the block products (default: by device)")
    p.add_argument("--algorithm", default="auto", help="polymm algorithm= for the block products")
    p.add_argument(
        "--reduction",
        "--schedule",
        dest="reduction",
        default="auto",
        choices=["auto", "panel", "tree", "broadcast", "grid", "split-k"],
        help="polymm's schedule (polymm.dask.explain says what auto picks)",
    )
    p.add_argument(
        "--gpu",
        type=lambda text: [x for x in text.split(",") if x],
        default=None,
        help="how the workers' GPUs run polymm's block tasks, comma-separated: queueN (polymm.gpu-queue N, "
        "0: no bound) or private (polymm.gpu-stream private); the first is the 'polymm' row, each other a "
        "'polymm-<variant>' row, all interleaved (default: the library's settings)",
    )
    p.add_argument("--skip-dask", action="store_true", help="time polymm only (no Dask a @ b reference)")
    p.add_argument(
        "--protocol", choices=["auto", "ucx", "tcp"], default="auto", help="GPU transport (auto: ucx where installed)"
    )
    p.add_argument("--json", type=Path, default=None, help="write the record here")
    p.add_argument("--plot", type=Path, default=None, help="write a plot here (matplotlib)")
    p.add_argument("--seed", type=int, default=20261123)
    args = p.parse_args(argv)
    if args.chunk < 1 or args.repeats < 1:
        p.error("--chunk and --repeats must be positive")
    if args.workers is not None and min(args.workers) < 1:
        p.error("--workers must be positive")
    return args


def _pair_list(text: str) -> list[tuple[int, int]]:
    try:
        pairs = [tuple(int(x) for x in v.split(":")) for v in text.split(",") if v.strip()]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise argparse.ArgumentTypeError(f"expected comma-separated pairs of positive integers a:b, got {text!r}")
    return pairs


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


# -- the machine -----------------------------------------------------------------------------------


def gpu_count() -> int:
    """GPUs CuPy and dask-cuda can use here, or :class:`NoGPU` saying what is missing."""
    try:
        import cupy
    except ImportError as exc:
        raise NoGPU(f"CuPy is not installed ({exc}); run with --cpu for NumPy chunks on the CPU") from None
    try:
        import dask_cuda  # noqa: F401
    except ImportError as exc:
        raise NoGPU(f"dask-cuda is not installed ({exc}): pip install dask-cuda") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        raise NoGPU(f"no CUDA GPU found ({type(exc).__name__}: {exc}); run with --cpu for the CPU mode") from None
    if count < 1:
        raise NoGPU("no CUDA GPU found; run with --cpu for the CPU mode")
    return count


def describe_device(cpu: bool, gpus: int) -> str:
    if cpu:
        return f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    return f"{gpus} x {name}"


def versions() -> dict:
    out = {"python": platform.python_version()}
    for module in ("polymm", "numpy", "dask", "distributed", "dask_cuda", "cupy"):
        try:
            out[module] = __import__(module).__version__
        except Exception:
            out[module] = None
    try:
        out["polymm_commit"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out["polymm_commit"] = None
    return out


#: Dense peak of one device (TFLOP/s) per dtype, by a word of its name: a measured throughput
#: above ``workers`` times this is a clock stopped before the devices finished.  float32 is the
#: SIMT peak, or the TF32 tensor cores' under a ``tf32*`` precision (see :func:`peak`).
PEAK = {
    "float32": {"H100": 67.0, "H200": 67.0, "A100": 19.5, "L40": 91.6, "cpu": 10.0},
    "tf32": {"H100": 495.0, "H200": 495.0, "A100": 156.0, "L40": 181.0, "cpu": 10.0},
    "float16": {"H100": 990.0, "H200": 990.0, "A100": 312.0, "L40": 362.0, "cpu": 10.0},
    "bfloat16": {"H100": 990.0, "H200": 990.0, "A100": 312.0, "L40": 362.0, "cpu": 10.0},
}


def peak(device: str, workers: int, dtype: str = "float32", precision: str | None = None) -> float | None:
    """The summed peak of ``workers`` devices described by ``device`` (None: unknown)."""
    table = PEAK["tf32" if dtype == "float32" and (precision or "").startswith("tf32") else dtype]
    found = [v for k, v in table.items() if k.lower() in device.lower()]
    return workers * found[0] if found else None


def transport(protocol: str) -> str:
    """``ucx`` or ``tcp`` for a GPU cluster: ``auto`` is ucx where ``distributed-ucxx`` imports, else
    tcp with a warning (every block then crosses host memory and a socket)."""
    if protocol != "auto":
        return protocol
    try:
        import distributed_ucxx  # noqa: F401
    except ImportError:
        print(
            "dask_scaling: distributed-ucxx is not installed: the GPUs talk over tcp, through host memory "
            "(pip install 'polymm[dask-gpu-cu13]' or '-cu12'; see docs/scaling.md)",
            file=sys.stderr,
        )
        return "tcp"
    return "ucx"


def start_cluster(workers: int, cpu: bool, protocol: str = "tcp"):
    """A cluster of ``workers`` workers, one thread each: CPU processes, or one dask-cuda worker per GPU."""
    import distributed

    if cpu:
        cluster = distributed.LocalCluster(
            n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=":0", env=WORKER_ENV
        )
    else:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(
            n_workers=workers,
            CUDA_VISIBLE_DEVICES=list(range(workers)),
            protocol=protocol,
            threads_per_worker=1,
            dashboard_address=":0",
            env=WORKER_ENV,
        )
    client = distributed.Client(cluster)
    client.wait_for_workers(workers)
    return cluster, client


# -- operands, timing, checking ----------------------------------------------------------------------


def _random_block(library: str, seed: int, dtype: str = "float32", block_info=None):
    """One block of standard normals, made on the worker that will hold it (its own stream of numbers)."""
    xp = __import__(library)
    info = block_info[None]
    location = info["chunk-location"]
    block_seed = seed * 1_000_003 + 7919 * location[0] + location[1]
    return xp.random.default_rng(block_seed).standard_normal(info["chunk-shape"], dtype="float32").astype(dtype)


def random_operand(shape, chunk: int, library: str, seed: int, dtype: str = "float32"):
    import dask.array as da

    xp = __import__(library)
    chunks = tuple(tuple(min(chunk, n - i) for i in range(0, n, chunk)) for n in shape)
    return da.map_blocks(_random_block, library, seed, dtype, chunks=chunks, dtype=dtype, meta=xp.empty((0, 0), dtype))


def _device_sync() -> None:
    """Wait for every kernel queued on this worker's GPU (a no-op without CuPy)."""
    if "cupy" in sys.modules:
        sys.modules["cupy"].cuda.runtime.deviceSynchronize()


def _received(dask_worker) -> tuple[int, float]:
    """Bytes this worker has received from other workers so far, and the seconds those transfers took (its transfer log)."""
    log = dask_worker.transfer_incoming_log
    return sum(entry.get("total", 0) for entry in log), sum(entry.get("duration", 0.0) for entry in log)


def _transfers(client) -> tuple[int, float]:
    """Bytes received and seconds spent receiving, summed over the workers."""
    logs = client.run(_received).values()
    return sum(b for b, _ in logs), sum(s for _, s in logs)


def timed(client, lazy) -> tuple[float, int, float, object]:
    """Seconds to persist ``lazy`` on the cluster until every worker's device has finished, the
    bytes the workers received from each other meanwhile and the seconds they spent receiving
    them (summed over workers), and the persisted array."""
    import distributed

    bytes_before, seconds_before = _transfers(client)
    start = time.perf_counter()
    result = lazy.persist()
    distributed.wait(result)
    client.run(_device_sync)
    seconds = time.perf_counter() - start
    bytes_after, seconds_after = _transfers(client)
    return seconds, bytes_after - bytes_before, seconds_after - seconds_before, result


def _block_product_seconds(chunk: int, dtype: str, options: dict, repeats: int = 5) -> dict:
    """On this worker's GPU: the best time of one ``chunk x chunk @ chunk x chunk`` block product,
    polymm's (``options``) and the chunk library's, each timed with CUDA events around the call."""
    import cupy

    import polymm

    rng = cupy.random.default_rng(7)
    a, b = (rng.standard_normal((chunk, chunk), dtype="float32").astype(dtype) for _ in range(2))
    out = {}
    for name, call in (("polymm", lambda: polymm.matmul(a, b, **options)), ("dask", lambda: cupy.matmul(a, b))):
        call()
        best = float("inf")
        for _ in range(repeats):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            call()
            stop.record()
            stop.synchronize()
            best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        out[name] = best
    return out


def block_products(shape1, shape2, chunk: int) -> float:
    """How many ``chunk``-cube block products the work of this product equals (its flops over one block's)."""
    m, k = shape1
    return m * k * shape2[1] / chunk**3


def check_sample(c, a, b, library: str, seed: int, size: int = 64, precision: str | None = None) -> dict:
    """A ``size x size`` window of ``c`` against the reference oracle (float64 on the host), within
    the error bound of the ``precision`` mode it was computed in."""
    import numpy as np

    from polymm.testing.reference import assert_matches

    rng = np.random.default_rng(seed)
    i = int(rng.integers(0, max(c.shape[0] - size, 0) + 1))
    j = int(rng.integers(0, max(c.shape[1] - size, 0) + 1))
    window = c[i : i + size, j : j + size].compute()
    rows, cols = a[i : i + size].compute(), b[:, j : j + size].compute()
    xp = __import__(library)
    library_result = xp.matmul(rows, cols)
    to_host = (lambda x: x.get()) if library == "cupy" else np.asarray
    window, rows, cols, library_result = map(to_host, (window, rows, cols, library_result))
    assert_matches(window, rows, cols, precision=precision)  # raises AssertionError naming the worst element
    scale = float(np.abs(library_result).max()) or 1.0
    return {
        "window": [i, j, size],
        "passed": True,
        "max_rel_diff_vs_library": float(np.abs(window - library_result).max()) / scale,
    }


def measure(
    client, shape1, shape2, args, library: str, seed: int, device: str = "", block_seconds: dict | None = None
) -> list[dict]:
    """Interleaved timings of polymm and Dask's ``a @ b``, each run on a pair of operands persisted
    for it alone: a worker keeps the blocks it fetched while their keys live, so a run on the same
    operands as an earlier one (either implementation's) finds part of its transfers done, and moved
    2.7, 0.8 and 0.3 GB in three repeats of a 32768 square whose first run moves 5.6 (two H200s,
    2026-11-28). ``block_seconds`` (one block product's time per implementation) gives each its
    compute estimate."""
    import distributed

    def operands(run: int):
        x = random_operand(shape1, args.chunk, library, seed + 2 * run, args.dtype).persist()
        y = random_operand(shape2, args.chunk, library, seed + 2 * run + 1, args.dtype).persist()
        distributed.wait([x, y])
        return x, y

    a, b = operands(0)
    flops = 2.0 * shape1[0] * shape1[1] * shape2[1]
    options = {"algorithm": args.algorithm, "schedule": args.reduction}
    if args.backend:
        options["backend"] = args.backend
    if args.precision:
        options["precision"] = args.precision
    graphs = {}
    for i, variant in enumerate(args.gpu or [None]):
        graphs["polymm" if i == 0 else f"polymm-{variant}"] = functools.partial(_polymm_graph, options, variant)
    if not args.skip_dask:
        graphs["dask"] = lambda x, y: x @ y
    from polymm.dask import explain

    plan = explain(a, b, schedule=args.reduction)  # the schedule polymm builds here, and its bytes estimate
    reduction = plan.schedule
    seconds = {name: [] for name in graphs}
    moved = {name: [] for name in graphs}
    receiving = {name: [] for name in graphs}
    check = None
    run = 0
    for repeat in range(args.repeats + 1):  # the first round warms up (kernels, cuBLAS, pools) and is not kept
        for name, graph in graphs.items():
            if run:  # fresh operands: no replica of an earlier run's blocks on any worker
                del a, b
                a, b = operands(run)
            run += 1
            elapsed, received, receive_s, result = timed(client, graph(a, b))
            if repeat:
                seconds[name].append(elapsed)
                moved[name].append(received)
                receiving[name].append(receive_s)
            if name == "polymm" and check is None:
                check = check_sample(result, a, b, library, seed + 2 * (run - 1), precision=args.precision)
            del result
    del a, b
    client.run(_free_pools)
    workers = len(client.nthreads())
    block_s = block_seconds or {}
    rows = []
    for name, values in seconds.items():
        median = statistics.median(values)
        one_block = block_s.get(name)
        row = {
            "impl": name,
            "shape": [list(shape1), list(shape2)],
            "chunk": args.chunk,
            "seconds": values,
            "median_s": median,
            "tflops": flops / median / 1e12,
            "dtype": args.dtype,
            "precision": args.precision if name.startswith("polymm") else None,
            "gpu": _variant_of(name, args) if name.startswith("polymm") else None,
            "bytes_moved": moved[name],
            "receive_s": receiving[name],
            "block_product_s": one_block,
            "compute_estimate_s": (
                one_block * block_products(shape1, shape2, args.chunk) / workers if one_block else None
            ),
            "reduction": reduction if name.startswith("polymm") else "dask",
            "estimate_bytes": plan.bytes_moved if name.startswith("polymm") else None,
            "check": check if name == "polymm" else None,
        }
        rows.append(_above_peak(row, device, workers))
    return rows


def _gpu_config(variant: str | None) -> dict:
    """The Dask config of a ``--gpu`` variant: ``queueN`` or ``private`` (None: the library's defaults)."""
    if variant is None:
        return {}
    if variant == "private":
        return {"polymm.gpu-stream": "private"}
    if variant.startswith("queue") and variant[5:].isdigit():
        return {"polymm.gpu-queue": int(variant[5:])}
    raise ValueError(f"--gpu: unknown variant {variant!r} (queueN or private)")


def _polymm_graph(options: dict, variant, x, y):
    """polymm's lazy product, built with the Dask config of ``--gpu`` variant ``variant``."""
    import dask

    from polymm.dask import matmul as dask_matmul

    with dask.config.set(_gpu_config(variant)):
        return dask_matmul(x, y, **options)


def _variant_of(name: str, args) -> str:
    """The ``--gpu`` variant a polymm row ran with ("library default" without ``--gpu``)."""
    if name == "polymm":
        return (args.gpu or ["library default"])[0]
    return name.removeprefix("polymm-")


def _above_peak(row: dict, device: str, workers: int) -> dict:
    """``row``, made an error where its throughput exceeds the devices' peak (a clock stopped early)."""
    most = peak(device, workers, row.get("dtype", "float32"), row.get("precision"))
    if most is not None and row["tflops"] > most:
        return {**row, "error": f"{row['tflops']:.1f} TFLOP/s is above the peak of {workers} x {device} ({most:.1f})"}
    return row


def _free_pools():
    """Hand CuPy's cached device memory back between problems (a no-op without CuPy)."""
    import gc

    gc.collect()
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()


def run(args) -> dict:
    """Every configuration; a configuration that fails (out of memory) is recorded with its error, not fatal."""
    library = "numpy" if args.cpu else "cupy"
    gpus = 0 if args.cpu else gpu_count()
    worker_counts = args.workers or (list(range(1, gpus + 1)) if gpus else [1, 2])
    if gpus and max(worker_counts) > gpus:
        raise NoGPU(f"--workers asks for {max(worker_counts)} workers, this machine has {gpus} GPU(s)")
    protocol = "tcp" if args.cpu else transport(args.protocol)
    device = describe_device(args.cpu, gpus)
    record = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "protocol": protocol,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "versions": versions(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "figures": [],
    }
    for workers in worker_counts:
        cluster, client = start_cluster(workers, args.cpu, protocol)
        try:
            env = client.run(lambda: {k: os.environ.get(k) for k in WORKER_ENV})
            assert all(e == WORKER_ENV for e in env.values()), f"worker environment: {env}"
            block_seconds = None
            if not args.cpu:
                options = {"algorithm": args.algorithm, **({"precision": args.precision} if args.precision else {})}
                if args.backend:
                    options["backend"] = args.backend
                block_seconds = client.submit(
                    _block_product_seconds, args.chunk, args.dtype, options, pure=False
                ).result()
                print(f"w={workers} one {args.chunk}-block product: {block_seconds}", flush=True)
            for mode, shape1, shape2 in problems_for(args, workers):
                base = {"mode": mode, "workers": workers, "n": _size_key(mode, shape1, shape2)}
                try:
                    rows = measure(client, shape1, shape2, args, library, args.seed + workers, device, block_seconds)
                except Exception as exc:
                    rows = [{"impl": "polymm", "shape": [list(shape1), list(shape2)], "error": f"{exc!r}"}]
                    client.run(_free_pools)
                for row in rows:
                    record["figures"].append({**base, **row})
                    print(_line(record["figures"][-1]), flush=True)
        finally:
            client.close()
            cluster.close()
    record["summary"] = summary(record["figures"])
    return record


def problems_for(args, workers: int) -> list[tuple[str, tuple, tuple]]:
    """Every (mode, shape1, shape2) to run on ``workers`` workers."""
    problems = [("strong", (n, n), (n, n)) for n in args.strong]
    problems += [("tall", (m, n), (n, n)) for m, n in args.tall]
    problems += [("deep", (n, k), (k, n)) for n, k in args.deep]
    problems += [("weak", (workers * n0, n0), (n0, n0)) for n0 in args.weak]
    return problems


def _size_key(mode: str, shape1, shape2):
    """What names a problem across worker counts: n (strong, weak's n0), ``m:n`` (tall), ``n:k`` (deep)."""
    if mode == "tall":
        return f"{shape1[0]}:{shape1[1]}"
    if mode == "deep":
        return f"{shape1[0]}:{shape1[1]}"
    return shape2[0]


def _line(row: dict) -> str:
    head = f"{row['mode']:6} w={row['workers']} {row['shape'][0]}@{row['shape'][1]} {row['impl']:14}"
    if "error" in row:
        return f"{head} FAILED {row['error']}"
    rate = f"{row['tflops']:.2f} TFLOP/s" if row["tflops"] >= 1 else f"{row['tflops'] * 1e3:.2f} GFLOP/s"
    moved = statistics.median(row["bytes_moved"]) / 1e9
    receive = statistics.median(row.get("receive_s") or [0.0])
    compute = row.get("compute_estimate_s")
    compute = f", compute ~{compute:.3f} s" if compute else ""
    return (
        f"{head} {row['median_s']:.3f} s {rate}, {moved:.2f} GB between workers in {receive:.3f} s of receiving"
        f"{compute} ({row['reduction']})"
    )


def summary(figures: list[dict]) -> dict:
    """Speedups over one worker, polymm/Dask throughput ratios, weak-scaling efficiencies."""
    ok = {(f["mode"], f["n"], f["workers"], f["impl"]): f for f in figures if "error" not in f}
    out = {"strong_speedup": {}, "polymm_over_dask": {}, "weak_efficiency": {}}
    for (mode, n, workers, impl), f in ok.items():
        one = ok.get((mode, n, 1, impl))
        if mode in ("strong", "tall", "deep") and one and workers > 1:
            out["strong_speedup"][f"{impl} n={n} w={workers}"] = one["median_s"] / f["median_s"]
        if mode == "weak" and one:
            out["weak_efficiency"][f"{impl} n0={n} w={workers}"] = f["tflops"] / (workers * one["tflops"])
        dask_row = ok.get((mode, n, workers, "dask"))
        if impl.startswith("polymm") and dask_row:
            label = f"{mode} n={n} w={workers}" if impl == "polymm" else f"{impl} {mode} n={n} w={workers}"
            out["polymm_over_dask"][label] = f["tflops"] / dask_row["tflops"]
    return out


def write_json(record: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, mode in zip(axes, ("strong", "weak")):
        rows = [f for f in record["figures"] if f["mode"] == mode and "error" not in f]
        for impl, style in (("polymm", "-o"), ("dask", "--s")):
            for n in sorted({f["n"] for f in rows}):
                series = sorted((f["workers"], f["tflops"]) for f in rows if f["impl"] == impl and f["n"] == n)
                if series:
                    label = (
                        f"{'polymm' if impl == 'polymm' else 'Dask a @ b'} ({'n' if mode == 'strong' else 'n0'}={n})"
                    )
                    ax.plot(*zip(*series), style, label=label)
        ideal = [f for f in rows if f["impl"] == "polymm" and f["workers"] == 1]
        for f in ideal:
            workers = sorted({g["workers"] for g in rows})
            ax.plot(workers, [f["tflops"] * w for w in workers], ":", color="grey", linewidth=1)
        ax.set_xticks(sorted({f["workers"] for f in record["figures"]}))
        ax.set_xlabel("workers (GPUs)" if "cpu" not in record["device"] else "workers (processes)")
        ax.set_ylabel("TFLOP/s (float32)")
        ax.set_title(f"{mode} scaling" + (" (dotted: ideal)" if ideal else ""))
        ax.grid(alpha=0.3)
        if rows:
            ax.legend(fontsize=8)
    fig.suptitle(
        f"polymm on Dask: {record['device']} ({record.get('protocol', 'tcp')}), {record['date'][:10]}", fontsize=10
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        record = run(args)
    except NoGPU as exc:
        print(f"dask_scaling: {exc}", file=sys.stderr)
        return 2
    if args.json:
        write_json(record, args.json)
        print(f"wrote {args.json}")
    if args.plot:
        plot(record, args.plot)
        print(f"wrote {args.plot}")
    print(json.dumps(record["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
