"""Diagnostic (session 4): vecmat shapes against cuBLAS in interleaved rounds, whole calls (CUDA
events) and the GPU's time alone (calls queued behind a spinning kernel); few-row products in
vecmat against the row strip (M = 1-4, float32).  Best of rounds.

    python probe16.py
"""

import cupy as cp
import numpy as np

import polymm
from polymm.kernels import planner
from polymm.timing import cuda_clock, measure

_SPIN = cp.RawKernel(
    r"""extern "C" __global__ void spin(long long c){ long long t=clock64(); while(clock64()-t<c); }""", "spin"
)
_original = planner._vecmat_choice
clock = cuda_clock()
backend = polymm.get_backend("cuda")


def gpu_time(f, reps=20, cycles=20_000_000) -> float:
    """Seconds per call of ``f`` queued behind a spinning kernel (the host's time hidden)."""
    f()
    cp.cuda.Device().synchronize()
    _SPIN((1,), (1,), (np.int64(cycles),))
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    for _ in range(reps):
        f()
    e1.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) / reps / 1e3


def set_variant(v):
    backend._plans.clear()
    if v == "strip":
        planner.FEW_ROWS, planner._vecmat_choice = 0, _original
        return
    planner.FEW_ROWS = planner.FEW
    if v == "planned":
        planner._vecmat_choice = _original
        return
    shape, gvw = v

    def choice(device, dtype, M, N, K, batch):
        planner.VECMAT = shape
        c = _original(device, dtype, M, N, K, batch)
        return c.replace(params=c.params.replace(gvw=gvw, nwg=shape[0] * gvw))

    planner._vecmat_choice = choice


def compare(name, a, b, variants, rounds=5):
    expect = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
    best = {}
    for _ in range(rounds):
        for label, v in variants + [("cuBLAS", None)]:
            if v is None:
                f = lambda: cp.matmul(a, b)  # noqa: E731
            else:
                set_variant(v)
                f = lambda: polymm.matmul(a, b, backend="cuda")  # noqa: E731
                got = f()
                err = float(cp.abs(got - expect).max() / cp.abs(expect).max())
                assert err < 1e-5, (label, err)
            call = measure(f, clock, samples=5, budget=0.2).best
            alone = gpu_time(f)
            old = best.get(label, (1, 1))
            best[label] = (min(old[0], call), min(old[1], alone))
    ref = best["cuBLAS"]
    print(f"== {name}: cuBLAS call {ref[0] * 1e6:.1f} us, GPU {ref[1] * 1e6:.1f} us", flush=True)
    for label, (call, alone) in sorted(best.items(), key=lambda x: x[1][0]):
        print(
            f"  {label:24s} call {call * 1e6:6.1f} us ({ref[0] / call:4.2f}x)  GPU {alone * 1e6:6.1f} us ({ref[1] / alone:4.2f}x)"
        )
    set_variant("planned")


rng = np.random.default_rng(0)
VARIANTS = [
    ("planned", "planned"),
    ("8x64x8 g4", ((8, 64, 8), 4)),
    ("16x64x8 g1", ((16, 64, 8), 1)),
    ("16x32x8 g2", ((16, 32, 8), 2)),
    ("8x64x16 g2", ((8, 64, 16), 2)),
    ("8x128x8 g2", ((8, 128, 8), 2)),
    ("strip", "strip"),
]
for dtype in ("float32", "float64"):
    x = cp.asarray(rng.standard_normal(4096).astype(dtype))
    B = cp.asarray(rng.standard_normal((4096, 4096)).astype(dtype))
    vs = VARIANTS if dtype == "float32" else [v for v in VARIANTS if v[0] != "8x64x8 g4"]
    compare(f"gevm-4096 {dtype}", x, B, vs)
B = cp.asarray(rng.standard_normal((4096, 4096)).astype(np.float32))
for m in (2, 3, 4):
    A = cp.asarray(rng.standard_normal((m, 4096)).astype(np.float32))
    compare(f"m{m}-4096 float32", A, B, [("planned", "planned"), ("strip", "strip")])
