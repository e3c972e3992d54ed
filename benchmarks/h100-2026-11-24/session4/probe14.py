"""Diagnostic sweep (session 4): vecmat shapes for few-row products, deep-K tiles and splits, and
where the host time of a PyTorch / CuPy product goes.  Whole calls (polymm.matmul, or the
backend's _run for deep K), CUDA events / queue.finish, best of samples, beside cupy.matmul.

    python probe14.py PART   (PART: cuda-vecmat, opencl-vecmat, deepk, host)
"""

import cProfile
import itertools
import pstats
import sys
import time

import numpy as np

import polymm
from polymm.kernels import planner
from polymm.timing import cuda_clock, host_clock, measure

part = sys.argv[1]
CASES = [  # (name, M, K, N, dtype)
    ("gevm-4096", 1, 4096, 4096, "float32"),
    ("m4-4096", 4, 4096, 4096, "float32"),
    ("gevm-k4096-n1024", 1, 4096, 1024, "float32"),
    ("gevm-k1024-n16384", 1, 1024, 16384, "float32"),
    ("gevm-4096-f64", 1, 4096, 4096, "float64"),
]
SHAPES = [(32, 8, 4), (32, 8, 8), (32, 16, 4), (64, 4, 4)]
GROUPS = [2, 4, 8]
#: one launch (no split): narrow work-groups, many teams
ONE = [(32, 32, 8), (32, 32, 4), (16, 32, 8), (16, 64, 4), (32, 16, 8), (16, 32, 4), (8, 64, 8), (32, 8, 8)]


def variants(dtype):
    yield "strip", None
    size = np.dtype(dtype).itemsize
    for shape, gvw, groups in itertools.product(SHAPES, (4, 2), GROUPS):
        if gvw * size > 16 or gvw == 2 and size == 4:
            continue
        yield f"vm{shape}-g{gvw}-w{groups}", (shape, gvw, groups)
    for shape, gvw in itertools.product(ONE, (1, 2)):
        if shape[0] * shape[1] <= 1024:
            yield f"one{shape}-g{gvw}", (shape, gvw, 0)


_original = planner._vecmat_choice


def set_variant(v):
    if v is None:
        planner.FEW_ROWS = 0
        return
    planner.FEW_ROWS = planner.FEW
    shape, gvw, groups = v

    def choice(device, dtype, M, N, K, batch):
        planner.VECMAT, planner.VECMAT_SPLIT_BELOW = shape, groups / 4
        c = _original(device, dtype, M, N, K, batch)
        p = c.params.replace(gvw=gvw, nwg=shape[0] * gvw)
        return c.replace(params=p)

    planner._vecmat_choice = choice


def vecmat(backend_name):
    if backend_name == "cuda":
        import cupy as cp

        _xp, clock, ref_clock = cp, cuda_clock(), cuda_clock()
        ref = cp.matmul
        backend = polymm.get_backend("cuda")

        def plans():
            backend._plans.clear()
    else:
        import pyopencl.array as cla

        import polymm_opencl

        backend = polymm.get_backend("opencl")
        queue = polymm_opencl.default_queue()
        clock = host_clock(queue.finish)
        import cupy as cp

        ref, ref_clock = cp.matmul, cuda_clock()

        def plans():
            backend._plans.clear()

    rng = np.random.default_rng(0)
    for name, M, K, N, dtype in CASES if backend_name == "cuda" else CASES[:2]:
        a = rng.standard_normal((M, K) if M > 1 else (K,)).astype(dtype)
        b = rng.standard_normal((K, N)).astype(dtype)
        expect = a.astype(np.float64) @ b.astype(np.float64)
        ca, cb = cp.asarray(a), cp.asarray(b)
        if backend_name == "cuda":
            da, db = ca, cb
        else:
            da, db = cla.to_device(queue, a), cla.to_device(queue, b)
        refs = []
        rows = []
        for label, v in variants(dtype):
            set_variant(v)
            plans()
            out = polymm.matmul(da, db, backend=backend_name)
            got = out.get() if hasattr(out, "get") else out
            err = float(np.abs(got - expect).max() / np.abs(expect).max())
            why = f"splits {backend.last_plan.splits}"
            t = measure(lambda: polymm.matmul(da, db, backend=backend_name), clock, samples=5, budget=0.25).best
            if len(rows) % 8 == 0:
                refs.append(measure(lambda: ref(ca, cb), ref_clock, samples=5, budget=0.25).best)
            rows.append((t, label, err, why))
        r = min(refs)
        rows.sort()
        strip = next(x for x in rows if x[1] == "strip")
        print(
            f"== {backend_name} {name} {dtype}: cupy.matmul {r * 1e6:.1f} us; strip {strip[0] * 1e6:.1f} us "
            f"({r / strip[0]:.2f}x)",
            flush=True,
        )
        for t, label, err, why in rows:
            print(f"  {t * 1e6:7.1f} us {r / t:5.2f}x  {label:28s} err {err:.1e}  {why}")
    planner._vecmat_choice = _original


def deepk():
    import cupy as cp

    backend = polymm.get_backend("cuda")
    from polymm.arrays import as_operand
    from polymm.kernels.params import regblock_params

    clock = cuda_clock()
    rng = np.random.default_rng(1)
    for M, K, N in ((128, 65536, 128), (256, 65536, 256), (64, 65536, 64)):
        a = cp.asarray(rng.standard_normal((M, K)).astype(np.float32))
        b = cp.asarray(rng.standard_normal((K, N)).astype(np.float32))
        expect = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
        out = cp.empty((M, N), np.float32)
        oa, ob, oc = as_operand(a[None]), as_operand(b[None]), as_operand(out[None])
        dev = 0
        info = backend.device_info(dev)
        table = regblock_params(info, np.float32)
        tiles = {
            "table": table,
            "64x64/8x16": planner._gpu_tile(info, np.float32, 64, 64, 16, 8, 16),
            "64x64/8x8": planner._gpu_tile(info, np.float32, 64, 64, 16, 8, 8),
            "64x128/8x16": planner._gpu_tile(info, np.float32, 64, 128, 8, 8, 16),
            "64x64/8x16/t2": planner._gpu_tile(info, np.float32, 64, 64, 16, 8, 16, 2),
            "32x32/8x8": planner._gpu_tile(info, np.float32, 32, 32, 16, 8, 8),
        }
        r = measure(lambda: cp.matmul(a, b), clock, samples=7, budget=0.6).best
        auto = backend._prepare(dev, oa, ob)
        t_auto = measure(lambda: backend._run(dev, auto, oa, ob, oc), clock, samples=7, budget=0.6).best
        print(
            f"== deep {M}x{K}x{N}: cupy {r * 1e6:.1f} us; planner {t_auto * 1e6:.1f} us ({r / t_auto:.2f}x) "
            f"{auto[-1].choice.reason} {auto[-1].choice.params}",
            flush=True,
        )
        rows = []
        for (tname, tile), splits in itertools.product(tiles.items(), (16, 32, 64, 128, 256)):
            choice = planner.Choice("regblock", tile, "probe", splits=splits)
            try:
                found = backend._prepare(dev, oa, ob, choice=choice)
            except Exception as exc:  # noqa: BLE001
                print("  skip", tname, splits, exc)
                continue
            out.fill(np.nan)
            backend._run(dev, found, oa, ob, oc)
            err = float(cp.abs(out - expect).max() / cp.abs(expect).max())
            t = measure(lambda: backend._run(dev, found, oa, ob, oc), clock, samples=7, budget=0.6).best
            rows.append((t, tname, splits, err, sum(found[1])))
        rows.sort()
        for t, tname, splits, err, scratch in rows[:12]:
            print(
                f"  {t * 1e6:7.1f} us {r / t:5.2f}x  {tname:16s} splits {splits:4d} err {err:.1e} scratch {scratch >> 10} KiB"
            )


def host():
    import cupy as cp
    import torch

    from polymm_cuda import arrays as cuda_arrays

    def per_call(f, n=20, reps=7):
        for _ in range(20):
            f()
        torch.cuda.synchronize()
        best = 1e9
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            best = min(best, (t1 - t0) / n * 1e6)
        return best

    x = torch.randn(2048, 2048, device="cuda").to(torch.bfloat16)
    y = torch.randn(2048, 2048, device="cuda").to(torch.bfloat16)
    ci8 = cp.asarray(np.random.default_rng(0).integers(-100, 100, (1024, 1024)).astype(np.int8))
    ch = cp.asarray(np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float16))
    c64 = cp.asarray(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    kind = cuda_arrays.CupyKind()
    t_small = torch.randn(64, 64, device="cuda")
    ptr = t_small.data_ptr()
    for label, f in (
        ("polymm torch bf16 2048", lambda: polymm.matmul(x, y)),
        ("torch.matmul bf16 2048", lambda: torch.matmul(x, y)),
        ("polymm cupy int8 1024", lambda: polymm.matmul(ci8, ci8)),
        ("polymm cupy f16 1024", lambda: polymm.matmul(ch, ch)),
        ("cupy.matmul f16 1024", lambda: cp.matmul(ch, ch)),
        ("polymm cupy f32 64", lambda: polymm.matmul(c64, c64)),
        ("cupy.matmul f32 64", lambda: cp.matmul(c64, c64)),
        ("view_foreign (64x64 torch)", lambda: kind.view_foreign(t_small)),
        ("same_stream", lambda: kind.same_stream(t_small)),
        ("new_empty 2048 bf16", lambda: x.new_empty((2048, 2048))),
        ("cp.empty 1024 int8", lambda: cp.empty((1024, 1024), np.int8)),
        ("UnownedMemory", lambda: cp.cuda.UnownedMemory(ptr, 16384, t_small, 0)),
        (
            "ndarray from ptr",
            lambda: cp.ndarray(
                (64, 64), np.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, 16384, t_small, 0), 0), (256, 4)
            ),
        ),
        ("tensor.device.index", lambda: t_small.device.index),
        ("tensor.get_device()", lambda: t_small.get_device()),
        ("tensor.stride()+shape", lambda: (t_small.stride(), t_small.shape)),
        ("getDevice", lambda: cp.cuda.runtime.getDevice()),
        ("get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr),
    ):
        print(f"{per_call(f):8.2f} us host per call  {label}", flush=True)
    for label, f in (
        ("torch bf16 2048", lambda: polymm.matmul(x, y)),
        ("cupy int8 1024", lambda: polymm.matmul(ci8, ci8)),
    ):
        pr = cProfile.Profile()
        n = 300
        pr.enable()
        for i in range(n):
            f()
            if i % 20 == 19:
                torch.cuda.synchronize()
        pr.disable()
        torch.cuda.synchronize()
        st = pstats.Stats(pr).stats
        rows = sorted(((v[3] / n * 1e6, v[2] / n * 1e6, v[1], k) for k, v in st.items()), reverse=True)
        print(f"== profile {label} (us per call under cProfile: cumulative, own)")
        for cum, tot, calls, (fn, line, name) in rows[:32]:
            print(f"{cum:8.2f} {tot:8.2f} {calls:6d}  {fn.split('/')[-1]}:{line}({name})")
    print("plans:", [str(polymm.get_backend("cuda").last_plan)])


{"cuda-vecmat": lambda: vecmat("cuda"), "opencl-vecmat": lambda: vecmat("opencl"), "deepk": deepk, "host": host}[part]()
