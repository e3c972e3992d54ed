"""Time the CUDA backend's kernels against cuBLAS (cupy.matmul, TF32 off) in one run.

Usage (on the GPU machine, from the repository root)::

    CUPY_TF32=0 python3 backends/polymm-cuda/benchmarks/gpu_bench.py [--quick] [--out DIR]

For every case: cuBLAS, each fast-kernel tile configuration, what "auto"
picks, and (4096 only) the shared "tiled" kernel; medians of CUDA-event
timings after a warm-up; each result is checked against cuBLAS's.  Also the
host-side call overhead of ``polymm.matmul`` vs ``cupy.matmul`` on 64x64.
Full results go to ``DIR/bench.json``; a short table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("CUPY_TF32", "0")

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from polymm_cuda import CUDABackend, fastgemm  # noqa: E402


def event_ms(fn, reps, warm=3):
    """Median/min/max milliseconds per call.  Each sample times ``inner`` calls
    back to back (enough for ~2 ms) so that host launch overhead overlaps GPU
    work instead of being counted, for the library and for cuBLAS alike."""
    for _ in range(warm):
        fn()
    cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    fn()
    e.record()
    e.synchronize()
    est = cp.cuda.get_elapsed_time(s, e)
    inner = max(3, min(50, int(2.0 / max(est, 1e-3))))
    times = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for _ in range(inner):
            fn()
        e.record()
        e.synchronize()
        times.append(cp.cuda.get_elapsed_time(s, e) / inner)
    return statistics.median(times), min(times), max(times)


def rand(shape, dtype, rng):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return cp.asarray(rng.integers(-8, 8, size=shape).astype(dt))
    return cp.asarray(rng.standard_normal(shape).astype(dt))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", default="")
    ap.add_argument("--both", action="store_true", help="time cp.async and register-staged loads")
    args = ap.parse_args()

    be = CUDABackend()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    handle = dev.cublas_handle
    info = {
        "device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "sms": props["multiProcessorCount"],
        "cupy": cp.__version__,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "CUPY_TF32": os.environ.get("CUPY_TF32"),
        "cublas_math_mode": int(cp.cuda.cublas.getMathMode(handle)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    print(json.dumps(info), flush=True)
    rng = np.random.default_rng(0)
    results = []
    table = []

    def case(label, dtype, bt, m, n, k, configs, reps, tiled=False):
        a = rand((bt, m, k), dtype, rng)
        b = rand((bt, k, n), dtype, rng)
        out = cp.empty((bt, m, n), dtype)
        flops = 2.0 * bt * m * n * k
        a2, b2 = (a[0], b[0]) if bt == 1 else (a, b)
        ref = cp.matmul(a2, b2)
        rows = []

        def record(name, fn, check=True):
            try:
                med, lo, hi = event_ms(fn, reps)
            except Exception as exc:  # noqa: BLE001
                print(f"{label} {name}: FAILED {type(exc).__name__}: {exc}", flush=True)
                rows.append({"case": label, "kernel": name, "error": str(exc)})
                return None
            err = None
            if check:
                got = out.reshape(ref.shape).astype(np.float64)
                r64 = ref.astype(np.float64)
                err = float(cp.linalg.norm(got - r64) / cp.linalg.norm(r64))
            tf = flops / (med * 1e-3) / 1e12
            row = {
                "case": label,
                "kernel": name,
                "ms_median": med,
                "ms_min": lo,
                "ms_max": hi,
                "tflops": tf,
                "rel_err_vs_cublas": err,
            }
            rows.append(row)
            print(f"{label:>22} {name:>16} {med:9.4f} ms {tf:7.2f} TFLOP/s err {err}", flush=True)
            return row

        cub = record("cublas", lambda: cp.matmul(a2, b2), check=False)
        best = None
        modes = (True, False) if (args.both and np.dtype(dtype).name in fastgemm.ASYNC_DTYPES) else (None,)
        for cname in configs:
            for mode in modes:
                tag = cname + ("/reg" if mode is False else "")
                r = record(tag, lambda: be.run_fast_config(a, b, out, cname, cp_async=mode))
                if r and (best is None or r["tflops"] > best["tflops"]):
                    best = r
        v = fastgemm.choose_variant(
            np.dtype(dtype),
            a.data.ptr,
            tuple(s // a.itemsize for s in a.strides),
            b.data.ptr,
            tuple(s // b.itemsize for s in b.strides),
            (bt, m, n, k),
            info["sms"],
        )
        auto = record("auto", lambda: be.matmul(a, b, out, "auto"))
        vname = f"{v.config.name}/{'async' if v.cp_async else 'reg'}/a{v.va}b{v.vb}"
        if auto:
            auto["auto_config"] = vname
        if tiled:
            record("tiled(shared)", lambda: be.matmul(a, b, out, "tiled"))
        results.extend(rows)
        if cub:
            for r in (auto, best):
                if r:
                    r["ratio_vs_cublas"] = r["tflops"] / cub["tflops"]
            table.append(
                (
                    label,
                    cub["tflops"],
                    best["kernel"] if best else "-",
                    best["tflops"] if best else 0,
                    auto["tflops"] if auto else 0,
                    vname,
                    (auto["tflops"] / cub["tflops"]) if auto else 0,
                )
            )
        del a, b, out, ref
        cp.get_default_memory_pool().free_all_blocks()

    c4 = [c.name for c in fastgemm.CONFIGS[4] if c.name != "64x64x16"]
    c8 = [c.name for c in fastgemm.CONFIGS[8]]
    reps = 5 if args.quick else 20
    cases = [
        ("f32 1024", np.float32, 1, 1024, 1024, 1024, c4, reps * 2, False),
        ("f32 2048", np.float32, 1, 2048, 2048, 2048, c4, reps, False),
        ("f32 4096", np.float32, 1, 4096, 4096, 4096, c4, reps, True),
        ("f32 4095x4099x4097", np.float32, 1, 4095, 4099, 4097, c4, reps, False),
        ("f32 batch4096 64^3", np.float32, 4096, 64, 64, 64, c4, reps * 2, False),
        ("f64 4096", np.float64, 1, 4096, 4096, 4096, c8, max(3, reps // 4), False),
        ("i32 4096", np.int32, 1, 4096, 4096, 4096, ["128x128x16", "128x64x8"], max(3, reps // 4), False),
    ]
    for c in cases:
        if args.only and args.only not in c[0]:
            continue
        case(*c)

    # Host-side call overhead on 64x64 (launch-bound: time per call over many calls).
    try:
        import polymm

        x = cp.asarray(np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32))
        y = cp.asarray(np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32))
        xb, yb, ob = x[None], y[None], cp.empty((1, 64, 64), np.float32)

        def per_call(fn, n=3000):
            for _ in range(200):
                fn()
            cp.cuda.Device().synchronize()
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                cp.cuda.Device().synchronize()
                best = min(best, (time.perf_counter() - t0) / n * 1e6)
            return best

        ov = {
            "cupy.matmul_us": per_call(lambda: cp.matmul(x, y)),
            "polymm.matmul_us": per_call(lambda: polymm.matmul(x, y, backend="cuda")),
            "polymm.matmul_implicit_us": per_call(lambda: polymm.matmul(x, y)),
            "backend.matmul_us": per_call(lambda: be.matmul(xb, yb, ob, "auto")),
        }
        ov["ratio"] = ov["polymm.matmul_us"] / ov["cupy.matmul_us"]
        ov["ratio_implicit"] = ov["polymm.matmul_implicit_us"] / ov["cupy.matmul_us"]
        print("overhead", json.dumps(ov), flush=True)
    except Exception as exc:  # noqa: BLE001
        ov = {"error": f"{type(exc).__name__}: {exc}"}
        print("overhead FAILED", ov, flush=True)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"info": info, "results": results, "overhead": ov}, f, indent=1)

    print("\n| case | cuBLAS TFLOP/s | best config | best TFLOP/s | auto TFLOP/s | auto config | auto / cuBLAS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, cub, bname, btf, atf, aname, ratio in table:
        print(f"| {label} | {cub:.2f} | {bname} | {btf:.2f} | {atf:.2f} | {aname} | {ratio:.3f} |")
    if "ratio" in ov:
        print(
            f"overhead 64x64: cupy.matmul {ov['cupy.matmul_us']:.1f} us, polymm.matmul "
            f"{ov['polymm.matmul_us']:.1f} us (x{ov['ratio']:.2f}), backend.matmul "
            f"{ov['backend.matmul_us']:.1f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
