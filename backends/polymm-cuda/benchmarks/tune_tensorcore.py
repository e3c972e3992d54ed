"""Time every candidate tile configuration of the tensor-core kernel against cuBLAS (needs a GPU).

    python backends/polymm-cuda/benchmarks/tune_tensorcore.py [--sizes 2048,4096,8192] [--dtype float16]
                                                              [--database DEVICE]

For each candidate tile (:func:`polymm_cuda.tensorcore.mma_sync_candidates`: the device database's
``mma-sync.candidates``): the answer at the first size is checked (against a float64 product;
exactly for integers), then each size is timed (CUDA events around the kernel launch, best of
several; ``cupy.matmul``, cuBLAS, timed the same way beside it). Prints one row per candidate and,
last, the fastest at the largest size as the value of an ``mma-sync.params`` entry: the tile
``"auto"`` runs is that entry of ``polymm/kernels/devices.json`` (``NVIDIA GPU``, or the device's
own node where it differs); ``--database DEVICE`` writes it there, with this run as its evidence.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

import cupy as cp
import numpy as np

from polymm.arrays import as_operand
from polymm.kernels import devices
from polymm.kernels.planner import Choice
from polymm_cuda import CUDABackend, tensorcore


def best_ms(fn, reps=10):
    start, end = cp.cuda.Event(), cp.cuda.Event()
    fn()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2048,4096,8192")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--json", help="write the table here")
    ap.add_argument("--database", metavar="DEVICE", help="write the winner into devices.json under this device node")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    dtype = np.dtype(args.dtype)
    backend = CUDABackend()
    rng = np.random.default_rng(0)
    rows = []
    ops = {}
    for n in sizes:
        if dtype.kind in "iu":
            a, bt = (rng.integers(0 if dtype.kind == "u" else -128, 128, (1, n, n)).astype(dtype) for _ in "ab")
        else:
            a, bt = (rng.standard_normal((1, n, n), dtype=np.float32).astype(dtype) for _ in "ab")
        # B K-contiguous (B^T row-major): the layout every tensor-core kernel reads
        ops[n] = (cp.asarray(a), cp.asarray(bt).transpose(0, 2, 1), cp.empty((1, n, n), dtype))
    # cuBLAS on the 2-D matrices (CuPy's 3-D matmul of float16 takes a slower batched route)
    ref = {n: best_ms(lambda a=ops[n][0][0], b=ops[n][1][0]: cp.matmul(a, b)) for n in sizes}
    print("cuBLAS", {n: f"{2 * n**3 / ref[n] / 1e9:.0f} TFLOP/s" for n in sizes})
    for p in tensorcore.mma_sync_candidates(backend.device_info(0)):
        name = tensorcore.kernel_name(dtype.name, tensorcore.LAYOUTS[dtype.name][-1])
        row = {"params": vars(p), "tflops": {}, "ratio": {}}
        for i, n in enumerate(sizes):
            a, b, c = ops[n]
            operands = [as_operand(x) for x in (a, b, c)]
            # planned and compiled once, outside the timed launches
            choice = Choice(name, None, "candidate", external=tensorcore.external_launch(p, (1, n, n, n)))
            found = backend._prepare(0, *operands[:2], choice=choice)
            run = lambda: backend._run(0, found, *operands)  # noqa: E731
            if i == 0:
                c.fill(7)
                run()
                if dtype.kind in "iu":  # exact: the int64 product wrapped to the dtype, as NumPy
                    want = cp.matmul(a[0].astype(cp.int64), b[0].astype(cp.int64)).astype(dtype)
                    err = float((c[0] != want).sum())
                    assert err == 0, (p, err)
                else:
                    want = cp.matmul(a[0].astype(cp.float64), b[0].astype(cp.float64))
                    err = float(cp.linalg.norm(c[0].astype(cp.float64) - want) / cp.linalg.norm(want))
                    assert err < 3e-3, (p, err)
                row["error"] = err
            t = best_ms(run)
            row["tflops"][n] = 2 * n**3 / t / 1e9
            row["ratio"][n] = ref[n] / t
        rows.append(row)
        print(p, "err %.1e" % row["error"], " ".join(f"{n}: {row['ratio'][n]:.2f}x" for n in sizes), flush=True)
    best = max(rows, key=lambda row: row["ratio"][sizes[-1]])
    print(f"fastest at {sizes[-1]}: mma-sync.params", json.dumps({"value": best["params"]}))
    if args.database:
        evidence = {
            "date": datetime.date.today().isoformat(),
            "device": backend.device_info(0).name,
            "command": " ".join(["python", *sys.argv]),
            "result": f"{dtype.name} {sizes[-1]}^3, kernel alone: {best['ratio'][sizes[-1]]:.2f}x cuBLAS "
            f"({best['tflops'][sizes[-1]]:.0f} TFLOP/s), the fastest of {len(rows)} tiles",
        }
        why = 'the tile "auto" runs kernels/tensorcore.cu in: the fastest of mma-sync.candidates at the largest size'
        print("written to", devices.write(args.database, "mma-sync", "params", best["params"], why, evidence))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cublas_ms": ref, "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
