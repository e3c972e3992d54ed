"""Benchmark the OpenCL backend: square float32 GFLOP/s and ratios measured in one run.

    python backends/polymm-opencl/benchmarks/bench.py --sizes 512 1024 2048           # PoCL vs NumPy
    POLYMM_OPENCL_DEVICE=NVIDIA python .../bench.py --sizes 2048 4096 --cupy --tune   # GPU vs cuBLAS

Kernel time comes from OpenCL profiling events (median after warm-up).  The
reference is NumPy (wall clock, interleaved with our runs so that load on a
shared machine hits both alike) or, with ``--cupy``, ``cupy.matmul`` with TF32
off timed with CUDA events.  ``--tune`` first runs the tuner at the largest
size and stores its pick, so ``auto`` uses it.  ``--json`` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("CUPY_TF32", "0")

import numpy as np


def cupy_seconds(n, repeats):
    import cupy

    a = cupy.random.standard_normal((n, n), dtype=cupy.float32)
    b = cupy.random.standard_normal((n, n), dtype=cupy.float32)
    for _ in range(3):
        cupy.matmul(a, b)
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        cupy.matmul(a, b)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
    return statistics.median(times)


def profiling_queue():
    """A profiling-enabled queue on the backend's chosen device."""
    import pyopencl as cl

    from polymm_opencl.devices import _pick_device

    device = _pick_device()
    return cl.CommandQueue(cl.Context([device]), device, properties=cl.command_queue_properties.PROFILING_ENABLE)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--algorithms", nargs="+", default=["auto", "tiled"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cupy", action="store_true", help="compare with cupy.matmul (cuBLAS, TF32 off)")
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--json", help="write results here")
    args = parser.parse_args(argv)

    import pyopencl.array as cl_array

    import polymm
    import polymm_opencl
    from polymm.kernels import params, tune

    queue = profiling_queue()
    polymm_opencl.set_queue(queue)
    backend = polymm.get_backend("opencl")
    device = queue.device.name.strip()
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "device": device,
        "platform": queue.device.platform.name.strip(),
        "host": platform.node(),
        "command": " ".join(sys.argv),
        "rows": [],
    }
    print(f"device: {device} ({report['platform']})")
    if args.tune:
        device, best, results = tune.tune("opencl", "float32", max(args.sizes), repeats=5)
        params.save_tuned(device, "float32", best)
        report["tuned"] = {
            "best": repr(best),
            "candidates": [(repr(p), 2 * max(args.sizes) ** 3 / s / 1e9) for p, s in results],
        }
        print(f"tuned: {best}")

    rng = np.random.default_rng(0)
    for n in args.sizes:
        a_host = rng.standard_normal((n, n)).astype(np.float32)
        b_host = rng.standard_normal((n, n)).astype(np.float32)
        reference = a_host @ b_host
        a = cl_array.to_device(queue, a_host.reshape(1, n, n))
        b = cl_array.to_device(queue, b_host.reshape(1, n, n))
        out = cl_array.empty(queue, (1, n, n), np.float32)
        flops = 2.0 * n**3
        ref_name = "cuBLAS" if args.cupy else "NumPy"
        if args.cupy:
            ref_seconds = cupy_seconds(n, args.repeats * 3)
        for algorithm in args.algorithms:
            backend.matmul(a, b, out, algorithm)  # warm-up and build
            queue.finish()
            error = float(np.abs(out.get()[0] - reference).max() / np.abs(reference).max())
            ours, theirs = [], []
            for _ in range(args.repeats):
                if not args.cupy:
                    start = time.perf_counter()
                    np.matmul(a_host, b_host)
                    theirs.append(time.perf_counter() - start)
                backend.matmul(a, b, out, algorithm)
                event = backend.last_event
                event.wait()
                ours.append((event.profile.end - event.profile.start) * 1e-9)
            seconds = statistics.median(ours)
            if not args.cupy:
                ref_seconds = statistics.median(theirs)
            row = {
                "n": n,
                "algorithm": algorithm,
                "kernel": backend.last_choice[0],
                "params": repr(backend.last_choice[1]),
                "fast_path": backend.last_choice[2],
                "gflops": flops / seconds / 1e9,
                "reference": ref_name,
                "reference_gflops": flops / ref_seconds / 1e9,
                "ratio": ref_seconds / seconds,
                "max_rel_error": error,
            }
            report["rows"].append(row)
            print(
                f"n={n:5d} {algorithm:14s} {row['gflops']:9.1f} GFLOP/s   {ref_name} "
                f"{row['reference_gflops']:9.1f} GFLOP/s   ratio {row['ratio']:.3f}   "
                f"rel.err {error:.1e}   {row['kernel']}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
