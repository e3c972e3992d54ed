"""Diagnostic (2026-11-25, session 2): the memory-bound float64 cells below 0.9x cuBLAS -- few
columns (``matvec``: rows per work-group, lanes), few rows (row strip: panels, slices), outer
products (tile shapes) -- as planner choices forced one at a time, whole calls (CUDA events)
and the GPU's time alone, interleaved with ``cupy.matmul``, best of rounds; then complex128 as
one float64 product on the tensor cores (A seen as M x 2K reals, B expanded to 2K x 2N:
[[re, im], [-im, re]] per element), its parts timed; then where the host's time goes in small
calls (cProfile).

    python probe20.py [section ...]     (sections: matvec strip outer complex host)
"""

import cProfile
import pstats
import sys

import cupy as cp
import numpy as np

import polymm
from polymm.kernels import KernelParams, planner
from polymm.timing import cuda_clock, measure

_SPIN = cp.RawKernel(
    r"""extern "C" __global__ void spin(long long c){ long long t=clock64(); while(clock64()-t<c); }""", "spin"
)
clock = cuda_clock()
backend = polymm.get_backend("cuda")
_original = planner._gpu_choice
rng = np.random.default_rng(20261125)


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


def force(choice):
    backend._plans.clear()
    if choice is None:
        planner._gpu_choice = _original
        return

    def forced(device, dtype, M, N, K, batch, a_strides, b_strides):
        if choice.kernel == "matvec":
            return choice
        return planner._gpu_packing(choice, dtype, M, N, K, batch, a_strides, b_strides)

    planner._gpu_choice = forced


def operand(shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return cp.asarray(x.astype(dtype))


def compare(name, a, b, variants, rounds=4):
    wide = cp.complex128 if a.dtype.kind == "c" else cp.float64
    expect = cp.matmul(a.astype(wide), b.astype(wide))
    scale = float(cp.abs(expect).max())
    best = {}
    for _ in range(rounds):
        for label, choice in variants + [("cuBLAS", "ref")]:
            if choice == "ref":
                f = lambda: cp.matmul(a, b)  # noqa: E731
            else:
                try:
                    force(choice)
                    f = lambda: polymm.matmul(a, b, backend="cuda")  # noqa: E731
                    got = f()
                except Exception as e:  # a variant the kernel cannot take: say so, go on
                    best[label] = (float("inf"), float("inf"), f"{type(e).__name__}: {e}"[:90])
                    continue
                err = float(cp.abs(got - expect).max()) / scale
                if err > 1e-9:
                    best[label] = (float("inf"), float("inf"), f"WRONG err {err:.2e}")
                    continue
            call = measure(f, clock, samples=5, budget=0.2).best
            alone = gpu_time(f)
            old = best.get(label, (1, 1, ""))
            best[label] = (min(old[0], call), min(old[1], alone), "")
    force(None)
    ref = best["cuBLAS"]
    print(f"== {name}: cuBLAS call {ref[0] * 1e6:.1f} us, GPU {ref[1] * 1e6:.1f} us", flush=True)
    for label, (call, alone, note) in sorted(best.items(), key=lambda x: x[1][0]):
        if note:
            print(f"  {label:34s} {note}")
            continue
        print(
            f"  {label:34s} call {call * 1e6:7.1f} us ({ref[0] / call:4.2f}x)  GPU {alone * 1e6:7.1f} us ({ref[1] / alone:4.2f}x)",
            flush=True,
        )


def section_matvec():
    for dtype, (M, K) in [
        ("float64", (4096, 4096)),
        ("float64", (2048, 2048)),
        ("complex128", (2048, 2048)),
        ("float32", (4096, 4096)),
    ]:
        for N in (4, 2, 1) if dtype == "float64" and M == 4096 else (4,):
            a, b = operand((M, K), dtype), operand((K, N), dtype)
            size = np.dtype(dtype).itemsize
            variants = [("planned", None)]
            for mr in (1, 2, 4, 8):
                for lanes in (64, 128, 256):
                    if mr * N * lanes * size > 48 * 1024:
                        continue
                    p = KernelParams(mr=mr, nwg=N, mdimc=lanes, vw=1, use_local=True)
                    variants.append((f"mr{mr} lanes{lanes}", planner.Choice("matvec", p, "probe")))
            compare(f"{M}x{K} @ {K}x{N} {dtype} (matvec)", a, b, variants)


def section_strip():
    info = backend.device_info(0)
    for dtype in ("float64", "float32"):
        a, b = operand((4, 4096), dtype), operand((4096, 4096), dtype)
        variants = [("planned", None)]
        for shape in (
            (8, 128, 32, 2, 32),
            (8, 128, 16, 2, 32),
            (8, 64, 32, 2, 16),
            (8, 256, 16, 2, 64),
            (4, 128, 32, 1, 32),
        ):
            for splits in (8, 16, 32):
                try:
                    tile = planner._gpu_tile(info, np.dtype(dtype), *shape)
                    tile.validate("regblock")
                except Exception as e:
                    print("  skip", shape, e)
                    break
                variants.append((f"strip {shape} s{splits}", planner.Choice("regblock", tile, "probe", splits=splits)))
        compare(f"4x4096 @ 4096x4096 {dtype} (row strip)", a, b, variants)


def section_outer():
    info = backend.device_info(0)
    for dtype, (M, N, K) in [("float64", (2048, 2048, 1)), ("float64", (4096, 4096, 32)), ("float32", (2048, 2048, 1))]:
        a, b = operand((M, K), dtype), operand((K, N), dtype)
        variants = [("planned", None)]
        for shape in (
            (64, 64, 8, 8, 8),
            (64, 128, 8, 8, 16),
            (128, 64, 8, 16, 8),
            (32, 64, 8, 8, 16),
            (64, 64, 8, 16, 16),
            (128, 128, 8, 16, 16),
            (32, 128, 8, 8, 32),
            (16, 256, 8, 4, 64),
        ):
            for kwg in sorted({shape[2], 1 if K == 1 else 16}):
                try:
                    tile = planner._gpu_tile(info, np.dtype(dtype), shape[0], shape[1], kwg, *shape[3:])
                    tile.validate("regblock")
                except Exception as e:
                    print("  skip", shape, kwg, e)
                    continue
                variants.append(
                    (f"tile {shape[:2]} k{kwg} t{shape[3]}x{shape[4]}", planner.Choice("regblock", tile, "probe"))
                )
        compare(f"{M}x{K} @ {K}x{N} {dtype} (outer)", a, b, variants, rounds=3)


_EXPAND = cp.ElementwiseKernel(
    "raw T b, int64 n",
    "T out",
    """
    // out is 2K x 2N: element (2k+p, 2n+q) of [[re, im], [-im, re]] for b[k, n]
    const long long cols = 2 * n;
    const long long r = i / cols, c = i % cols;
    const long long k = r >> 1, p = r & 1, nn = c >> 1, q = c & 1;
    const double re = b[2 * (k * n + nn)], im = b[2 * (k * n + nn) + 1];
    out = p == q ? re : (p == 0 ? im : -im);
    """,
    "expand_complex",
)


def section_complex():
    for M, N, K in ((256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048), (512, 512, 512)):
        a, b = operand((M, K), "complex128"), operand((K, N), "complex128")
        expect = cp.matmul(a, b)
        b2 = cp.empty((2 * K, 2 * N), cp.float64)
        ar = a.view(cp.float64)  # M x 2K

        def realified():
            _EXPAND(b.view(cp.float64), N, b2)
            return polymm.matmul(ar, b2, backend="cuda").view(cp.complex128)

        got = realified()
        err = float(cp.abs(got - expect).max() / cp.abs(expect).max())
        best = {}
        for _ in range(4):
            for label, f in (
                ("cuBLAS zgemm", lambda: cp.matmul(a, b)),
                ("polymm complex128 now", lambda: polymm.matmul(a, b, backend="cuda")),
                ("realified: expand + dmma", realified),
                ("  its expand alone", lambda: _EXPAND(b.view(cp.float64), N, b2)),
                ("  its dmma alone", lambda: polymm.matmul(ar, b2, backend="cuda")),
            ):
                call = measure(f, clock, samples=5, budget=0.2).best
                alone = gpu_time(f)
                old = best.get(label, (1, 1))
                best[label] = (min(old[0], call), min(old[1], alone))
        ref = best["cuBLAS zgemm"]
        print(f"== complex128 {M}x{K} @ {K}x{N}: realified max error {err:.1e}", flush=True)
        for label, (call, alone) in best.items():
            print(
                f"  {label:28s} call {call * 1e6:8.1f} us ({ref[0] / call:4.2f}x)  GPU {alone * 1e6:8.1f} us ({ref[1] / alone:4.2f}x)"
            )


def section_host():
    cases = [("cupy float64 64x64", operand((64, 64), "float64"), operand((64, 64), "float64"))]
    try:
        import torch

        t = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        cases.append(("torch bfloat16 1024", t, t.clone()))
    except Exception as e:
        print("torch:", e)
    for name, a, b in cases:
        for _ in range(200):
            polymm.matmul(a, b, backend="cuda")
        cp.cuda.Device().synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(3000):
            polymm.matmul(a, b, backend="cuda")
        prof.disable()
        cp.cuda.Device().synchronize()
        print(f"== host profile: {name}, 3000 calls", flush=True)
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)


SECTIONS = {
    "matvec": section_matvec,
    "strip": section_strip,
    "outer": section_outer,
    "complex": section_complex,
    "host": section_host,
}
for name in sys.argv[1:] or list(SECTIONS):
    SECTIONS[name]()
