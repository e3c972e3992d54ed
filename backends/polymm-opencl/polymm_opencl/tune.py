"""Time candidate regblock parameters on the current OpenCL device and cache the best.

    python -m polymm_opencl.tune [--size 2048] [--dtype float32] [--dry-run]

Picks the device like the backend does (``POLYMM_OPENCL_DEVICE``), times each
candidate with OpenCL profiling events (median of several runs after a
warm-up), checks its answer, and stores the fastest in the tuning file
(:func:`polymm_opencl.params.tuning_path`, under ``platformdirs``' user cache
directory) where ``"auto"`` finds it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys

import numpy as np

from polymm import timing
from polymm.kernels import KernelParams

from . import params as _params

#: CPU shape candidates: (rows per work-item, mr, columns, vw, mdimc, kwg[, nr, pack_b]),
#: columns and nr in 4-byte floats.
_CPU_SHAPES = [
    (96, 6, 16, 8, 1, 256, 0, True),
    (48, 6, 64, 8, 1, 256, 16, True),
    (48, 6, 16, 8, 4, 256, 0, True),
    (48, 6, 16, 8, 4, 256),
    (48, 6, 16, 8, 1, 256),
    (96, 6, 16, 8, 1, 256),
    (24, 6, 16, 8, 4, 256),
    (48, 6, 16, 8, 4, 128),
    (48, 6, 16, 8, 4, 512),
    (48, 4, 16, 8, 4, 256),
    (48, 6, 24, 8, 4, 256),
    (6, 6, 16, 8, 4, 4096),
]

#: GPU shape candidates for 4-byte floats: (mwg, nwg, kwg, mdimc, ndimc, pad, maxrreg).
_GPU_SHAPES = [
    (128, 128, 16, 16, 16, 0, 0),
    (128, 128, 8, 16, 16, 0, 0),
    (128, 128, 16, 16, 16, 0, 128),
    (128, 128, 8, 16, 16, 0, 128),
    (128, 128, 32, 16, 16, 0, 0),
    (128, 128, 16, 16, 16, 4, 0),
    (128, 64, 16, 16, 8, 0, 0),
    (64, 128, 16, 8, 16, 0, 0),
    (256, 128, 16, 32, 16, 0, 0),
    (128, 256, 16, 16, 32, 0, 0),
    (64, 64, 16, 16, 16, 0, 0),
    (64, 64, 16, 8, 8, 0, 0),
]


def candidates(device, dtype) -> list[KernelParams]:
    """Parameter sets worth timing for ``dtype`` on ``device`` (table entry first)."""
    dtype = np.dtype(dtype)
    found = [_params.table_params(device, dtype)]
    if _params._is_cpu(device):
        width = max(1, 32 // dtype.itemsize)  # PoCL wheels target 256-bit vectors
        for rows, mr, cols, vw, mdimc, kwg, *rest in _CPU_SHAPES:
            nr, pack_b = rest or (0, False)
            found.append(
                KernelParams(
                    mwg=rows * mdimc,
                    nwg=cols * width // 8,
                    kwg=kwg,
                    mdimc=mdimc,
                    ndimc=1,
                    vw=width,
                    mr=mr,
                    nr=nr * width // 8,
                    pack_b=pack_b,
                    use_local=False,
                )
            )
    else:
        gvw = 4 if dtype.itemsize <= 4 else 2
        for mwg, nwg, kwg, mdimc, ndimc, pad, maxrreg in _GPU_SHAPES:
            found.append(
                KernelParams(
                    mwg=mwg, nwg=nwg, kwg=kwg, mdimc=mdimc, ndimc=ndimc, vw=gvw, gvw=gvw, pad=pad, maxrreg=maxrreg
                )
            )
    unique = []
    for p in found:
        try:
            p.validate("regblock")
        except ValueError:
            continue
        if p not in unique and _params._fits(device, "regblock", dtype, p):
            unique.append(p)
    return unique


def time_kernel(backend, queue, kernel, params, a, b, out, repeats=10) -> float:
    """Median kernel seconds from profiling events (wall clock where profiling is off)."""
    launch = lambda: backend.launch(a, b, out, kernel, params)  # noqa: E731
    return timing.measure(launch, timing.event_clock(), samples=repeats, min_sample=0, budget=math.inf).median


def profiling_queue():
    """A profiling-enabled queue on the backend's chosen device."""
    import pyopencl as cl

    from . import _pick_device

    device = _pick_device()
    context = cl.Context([device])
    return cl.CommandQueue(context, device, properties=cl.command_queue_properties.PROFILING_ENABLE)


def tune(queue, dtype="float32", n=2048, repeats=10, log=print):
    """Time every candidate on ``queue``'s device; returns ``(best_params, [(params, seconds)])``."""
    import pyopencl.array as cl_array

    import polymm

    backend = polymm.get_backend("opencl")
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(0)
    a_host = rng.standard_normal((1, n, n)).astype(dtype)
    b_host = rng.standard_normal((1, n, n)).astype(dtype)
    reference = a_host[0].astype(np.float64) @ b_host[0].astype(np.float64)
    a = cl_array.to_device(queue, a_host)
    b = cl_array.to_device(queue, b_host)
    out = cl_array.empty(queue, (1, n, n), dtype)
    results = []
    for params in candidates(queue.device, dtype):
        try:
            seconds = time_kernel(backend, queue, "regblock", params, a, b, out, repeats)
        except Exception as exc:  # a candidate the device cannot build or run: skip it
            log(f"  {params}: failed: {str(exc).splitlines()[0]}")
            continue
        error = np.abs(out.get()[0] - reference).max() / max(1.0, np.abs(reference).max())
        ok = error < 1e-3
        log(f"  {2 * n**3 / seconds / 1e9:9.1f} GFLOP/s  {'ok ' if ok else 'BAD'} {params}")
        if ok:
            results.append((params, seconds))
    if not results:
        raise RuntimeError("no candidate ran correctly")
    best = min(results, key=lambda r: r[1])[0]
    return best, results


def save(device, dtype, params: KernelParams, path: str | None = None) -> str:
    """Record ``params`` for (``device``, ``dtype``) in the tuning file; returns its path."""
    path = path or _params.tuning_path()
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    data.setdefault(_params.device_key(device), {})[np.dtype(dtype).name] = dataclasses.asdict(params)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"  # written whole, then renamed: readers never see half a file
    with open(partial, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(partial, path)
    _params._tuned.cache_clear()
    _params._checked_entry.cache_clear()
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--dry-run", action="store_true", help="time, but do not store the result")
    args = parser.parse_args(argv)
    queue = profiling_queue()
    print(f"tuning regblock for {args.dtype} at n={args.size} on {queue.device.name.strip()}")
    best, _ = tune(queue, args.dtype, args.size, args.repeats)
    print(f"best: {best}")
    if not args.dry_run:
        print(f"stored in {save(queue.device, args.dtype, best)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
