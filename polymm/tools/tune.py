"""Time candidate kernel parameters on a backend's device and store the best.

    python -m polymm.tools.tune --backend cuda|opencl [--size 2048] [--dtype float32] [--dry-run]
                                [--database DEVICE]
    polymm tune --backend cpu [--size 640] [--dtype float32,float64] [--seconds 3] [--dry-run]

``cpu``: the backend's own tuner (:meth:`polymm_numba.backend.CPUBackend.tune`) times register
tiles and cache blocks of its packed kernel and records the fastest blocking in the tuning file,
which every later process reads; well under a minute.

One tuner for both GPU backends (and the OpenCL CPU shape): each candidate
runs through the backend's ``launch(a, b, out, kernel, params)``, is timed by
wall clock around ``synchronize()`` (median after a warm-up), checked against
a float64 product, and the fastest is stored in the tuning file
(:func:`polymm.kernels.params.tuning_path`) under the device's key, where the
planner finds it before the device database (``polymm/kernels/devices.json``); with
``--database DEVICE`` (a node of that database, e.g. ``H100``) it is written into the database
itself as ``regblock.<dtype>``, with its evidence (date, device, command, measured rate).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import sys

import numpy as np

from . import timing
from ..kernels import KernelParams, devices
from ..kernels import params as _params

#: CPU shape candidates: (rows per work-item, mr, columns, vw, mdimc, kwg[, nr, pack_b]),
#: columns and nr in 4-byte floats on 256-bit vectors (scaled to the device's vector width).
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
    # more accumulators, for the 32 vector registers of AVX-512
    (64, 8, 16, 8, 1, 256, 0, True),
    (96, 12, 16, 8, 1, 256, 0, True),
    (64, 8, 64, 8, 1, 256, 16, True),
    (96, 6, 16, 8, 1, 512, 0, True),
    (96, 6, 16, 8, 1, 128, 0, True),
    (192, 6, 16, 8, 1, 256, 0, True),
]

#: GPU shape candidates for 4-byte floats: (mwg, nwg, kwg, mdimc, ndimc, pad, maxrreg[, stages, group]).
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
    # 8 x 8 per work-item on few threads, and 4 x 4 on many: what 8- and 16-byte dtypes need
    (64, 64, 8, 8, 8, 0, 0),
    (128, 64, 8, 16, 8, 0, 0),
    (64, 128, 8, 8, 16, 0, 0),
    (128, 128, 8, 16, 16, 0, 128),
    (64, 32, 8, 16, 8, 0, 0),
    (32, 64, 8, 8, 16, 0, 0),
    (64, 64, 8, 16, 16, 0, 0),
    # two stages of local tiles (one barrier per K step), with the H100's padding and bands too
    (128, 128, 8, 16, 16, 0, 0, 2),
    (128, 128, 16, 16, 16, 0, 0, 2),
    (128, 128, 8, 16, 16, 0, 128, 2),
    (128, 128, 16, 16, 16, 0, 128, 2),
    (128, 128, 8, 16, 16, 4, 128, 2, 8),
    (128, 128, 16, 16, 16, 4, 128, 2, 8),
    (128, 128, 8, 16, 16, 4, 128, 1, 8),
    (128, 256, 8, 16, 16, 0, 0, 2),
    (128, 256, 16, 16, 16, 0, 0, 2, 8),
    (256, 128, 8, 16, 16, 0, 0, 2, 8),
    (64, 64, 8, 8, 8, 0, 0, 2),
    (64, 64, 16, 16, 16, 0, 0, 2),
]


def candidates(device: _params.DeviceInfo, dtype) -> list[KernelParams]:
    """Parameter sets worth timing for ``dtype`` on ``device`` (table entry first)."""
    dtype = np.dtype(dtype)
    found = [_params.table_params(device, dtype)]
    if device.is_cpu:
        width = max(1, (device.vector_bytes or 32) // dtype.itemsize)  # one native vector of dtype
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
        for mwg, nwg, kwg, mdimc, ndimc, pad, maxrreg, *rest in _GPU_SHAPES:
            stages = rest[0] if rest else 1
            group = rest[1] if len(rest) > 1 else 0
            found.append(
                KernelParams(
                    mwg=mwg, nwg=nwg, kwg=kwg, mdimc=mdimc, ndimc=ndimc, vw=gvw, gvw=gvw, pad=pad, maxrreg=maxrreg,
                    stages=stages, group=group,
                )
            )  # fmt: skip
    unique = []
    for p in found:
        try:
            p.validate("regblock")
        except ValueError:
            continue
        if p not in unique and (device.is_cpu or _params.fits(device, "regblock", dtype, p)):
            unique.append(p)
    return unique


def time_kernel(backend, kernel, params, a, b, out, repeats=10) -> float:
    """Median wall-clock seconds of one launch, synchronized."""
    launch = lambda: backend.launch(a, b, out, kernel, params)  # noqa: E731
    clock = timing.host_clock(backend.synchronize)
    return timing.measure(launch, clock, samples=repeats, min_sample=0, budget=math.inf).median


def tune(backend_name="opencl", dtype="float32", n=2048, repeats=10, log=print):
    """Time every candidate; returns ``(device, best_params, [(params, seconds)])``."""
    import polymm

    backend = polymm.get_backend(backend_name)
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(0)
    a_host = rng.standard_normal((1, n, n)).astype(dtype)
    b_host = rng.standard_normal((1, n, n)).astype(dtype)
    reference = a_host[0].astype(np.float64) @ b_host[0].astype(np.float64)
    a, b = backend.from_numpy(a_host), backend.from_numpy(b_host)
    out = backend.from_numpy(np.zeros((1, n, n), dtype))
    device = backend.planner_device(out)
    results = []
    for params in candidates(device, dtype):
        try:
            seconds = time_kernel(backend, "regblock", params, a, b, out, repeats)
        except Exception as exc:  # a candidate the device cannot build or run: skip it
            log(f"  {params}: failed: {str(exc).splitlines()[0]}")
            continue
        error = np.abs(backend.to_numpy(out)[0] - reference).max() / max(1.0, np.abs(reference).max())
        ok = error < 1e-3
        log(f"  {2 * n**3 / seconds / 1e9:9.1f} GFLOP/s  {'ok ' if ok else 'BAD'} {params}")
        if ok:
            results.append((params, seconds))
    if not results:
        raise RuntimeError("no candidate ran correctly")
    best = min(results, key=lambda r: r[1])[0]
    return device, best, results


_TILE = ("mwg", "nwg", "kwg", "mdimc", "ndimc", "vw", "gvw", "pad")  # written even where they are the defaults


def record(node: str, device, dtype, best: KernelParams, results, n: int, command: str, path=None) -> str:
    """Write ``best`` into the device database as ``node / regblock.<dtype>`` with the evidence
    of this run (the table's tiles and the winner's rate); returns the path written."""
    seconds = dict(results)
    table = _params.table_params(device, dtype)
    rate = lambda p: f"{2 * n**3 / seconds[p] / 1e9:.0f} GFLOP/s" if p in seconds else "not run"  # noqa: E731
    defaults = KernelParams()
    value = {k: v for k, v in dataclasses.asdict(best).items() if v != getattr(defaults, k) or k in _TILE}
    evidence = {
        "date": datetime.date.today().isoformat(),
        "device": device.name,
        "command": command,
        "result": f"{np.dtype(dtype).name} {n}^3 squares, kernel alone: {rate(best)} (the table's tiles: {rate(table)})",
    }
    why = f"regblock tiles for {np.dtype(dtype).name}: the fastest of the tuner's {len(results)} candidates"
    return devices.write(node, "regblock", np.dtype(dtype).name, value, why, evidence, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="polymm tune", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="opencl", choices=["opencl", "cuda", "cpu"])
    parser.add_argument(
        "--size", type=int, default=None, help="side of the squares timed (default 2048; cpu 640, and 1536 beside it)"
    )
    parser.add_argument("--dtype", default=None, help="default float32; cpu: float32,float64")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=3.0, help="cpu: seconds of timing per dtype and phase")
    parser.add_argument("--tiles", type=int, default=4, help="cpu: register tiles tried, the database's first")
    parser.add_argument("--dry-run", action="store_true", help="time, but do not store the result")
    parser.add_argument(
        "--database", metavar="DEVICE", help="write the result into polymm/kernels/devices.json under this device node"
    )
    args = parser.parse_args(argv)
    command = "polymm tune " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.backend == "cpu":
        if args.database:
            raise SystemExit("--database: the CPU blocking is recorded in the tuning file only")
        import polymm

        dtypes = tuple((args.dtype or "float32,float64").split(","))
        polymm.get_backend("cpu").tune(
            dtypes=dtypes, n=args.size or 640, seconds=args.seconds, max_tiles=args.tiles, command=command,
            save=not args.dry_run,
        )  # fmt: skip
        return 0
    args.size, args.dtype = args.size or 2048, args.dtype or "float32"
    print(f"tuning regblock for {args.dtype} at n={args.size} on backend {args.backend}")
    device, best, results = tune(args.backend, args.dtype, args.size, args.repeats)
    print(f"best on {device.name}: {best}")
    if args.dry_run:
        return 0
    if args.database:
        print(f"written to {record(args.database, device, args.dtype, best, results, args.size, command)}")
    else:
        print(f"stored in {_params.save_tuned(device, args.dtype, best)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
