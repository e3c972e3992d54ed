"""``polymm bench``: time backends against the reference library measured in the same run.

Every result is checked against NumPy before it is timed; speeds are medians
over repeats after a warm-up, reported as GFLOP/s and as a ratio to the
reference (NumPy/OpenBLAS for host backends, ``cupy.matmul`` for CuPy ones).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

import polymm
from polymm.tools import timing
from polymm.backend import algorithm_serves
from polymm.testing.reference import assert_matches, random_array


@dataclass
class Measurement:
    backend: str
    algorithm: str
    dtype: str
    m: int
    n: int
    k: int
    seconds: float
    gflops: float
    reference: str
    reference_gflops: float
    ratio: float
    correct: bool
    error: str | None = None
    clblast_gflops: float | None = None  # OpenCL backends, where pyclblast is importable

    def as_dict(self):
        return asdict(self)


def flops(m, n, k, dtype) -> float:
    """Real floating-point (or integer) operations of one product; a complex multiply-add counts 8."""
    return (8.0 if np.dtype(dtype).kind == "c" else 2.0) * m * n * k


def median_time(fn, synchronize, repeat: int, min_time: float = 0.2) -> float:
    """Median seconds per call over ``repeat`` samples of ~``min_time / repeat`` each (:func:`polymm.tools.timing.measure`)."""
    clock = timing.host_clock(synchronize)
    return timing.measure(fn, clock, samples=repeat, min_sample=min_time / repeat, budget=math.inf).median


def _reference_for(backend):
    """(name, matmul, synchronize) of the library the backend is compared with."""
    if backend.array_library == "cupy":
        import cupy

        return "cupy.matmul", cupy.matmul, cupy.cuda.get_current_stream().synchronize
    return "numpy.matmul", np.matmul, lambda: None


def run(backends, algorithms, shapes, dtypes, repeat=5, progress=None, on_result=None):
    """Measure every (backend, algorithm, shape, dtype); returns a list of :class:`Measurement`
    (``on_result`` is called with each as it is measured: a log's progress)."""
    rng = np.random.default_rng(2026)
    plan = []
    for name in backends:
        impl = polymm.get_backend(name)
        for algorithm in algorithms or impl.algorithms:
            if algorithm in impl.algorithms:
                plan.append((name, impl, algorithm))
    results = []
    total = len(plan) * len(shapes) * len(dtypes)
    task = progress.add_task("benchmarking", total=total) if progress else None
    for dtype in dtypes:
        for m, n, k in shapes:
            host_a = random_array(rng, (m, k), dtype)
            host_b = random_array(rng, (k, n), dtype)
            ref_cache = {}
            for name, impl, algorithm in plan:
                if not algorithm_serves(impl, algorithm, dtype):  # the image kernel has no 64-bit texels
                    if progress:
                        progress.advance(task)
                    continue
                if progress:
                    progress.update(task, description=f"{name}/{algorithm} {dtype} {m}x{n}x{k}")
                results.append(_measure(name, impl, algorithm, host_a, host_b, dtype, repeat, ref_cache))
                if on_result:
                    on_result(results[-1])
                if progress:
                    progress.advance(task)
    return results


def _measure(name, impl, algorithm, host_a, host_b, dtype, repeat, ref_cache):
    m, k = host_a.shape
    n = host_b.shape[1]
    ops = flops(m, n, k, dtype)
    ref_name, ref_matmul, ref_sync = _reference_for(impl)
    a, b = impl.from_numpy(host_a), impl.from_numpy(host_b)
    out = polymm.matmul(a, b, backend=name, algorithm=algorithm)
    try:
        assert_matches(impl.to_numpy(out), host_a, host_b, dtype)
        correct, error = True, None
    except AssertionError as exc:
        correct, error = False, str(exc).splitlines()[0]
    seconds = median_time(
        lambda: polymm.matmul(a, b, backend=name, algorithm=algorithm, out=out), impl.synchronize, repeat
    )
    if ref_name not in ref_cache:
        ra, rb = (a, b) if ref_name == "cupy.matmul" else (host_a, host_b)
        ref_out = ref_matmul(ra, rb)
        ref_cache[ref_name] = median_time(lambda: ref_matmul(ra, rb, out=ref_out), ref_sync, repeat)
    ref_seconds = ref_cache[ref_name]
    clblast = None
    if impl.array_library == "pyopencl":
        if "clblast" not in ref_cache:
            ref_cache["clblast"] = _clblast_seconds(a, b, repeat)
        clblast = ref_cache["clblast"] and ops / ref_cache["clblast"] / 1e9
    return Measurement(
        name,
        algorithm,
        str(np.dtype(dtype)),
        m,
        n,
        k,
        seconds,
        ops / seconds / 1e9,
        ref_name,
        ops / ref_seconds / 1e9,
        ref_seconds / seconds,
        correct,
        error,
        clblast,
    )


def _clblast_seconds(a, b, repeat):
    """CLBlast's tuned GEMM on the same OpenCL arrays, for comparison; None where pyclblast is absent."""
    try:
        import pyclblast
        import pyopencl.array as cl_array
    except ImportError:
        return None
    if a.dtype.kind not in "fc" or a.dtype == np.float16:
        return None
    m, k = a.shape
    n = b.shape[1]
    c = cl_array.empty(a.queue, (m, n), a.dtype)
    call = lambda: pyclblast.gemm(a.queue, m, n, k, a, b, c, a_ld=k, b_ld=n, c_ld=n)  # noqa: E731
    return median_time(call, a.queue.finish, repeat)  # CLBlast's events are not ours to wait for


def call_overhead(name: str, size: int, dtype="float32", repeat: int = 7) -> dict:
    """Microseconds per call of ``polymm.matmul`` and of the reference on tiny inputs (kernels warm)."""
    impl = polymm.get_backend(name)
    ref_name, ref_matmul, ref_sync = _reference_for(impl)
    rng = np.random.default_rng(7)
    host = random_array(rng, (size, size), dtype)
    a = impl.from_numpy(host)
    if impl.array_library == "pyopencl":
        # Device-resident operands; the yardstick is one elementwise kernel on the same queue, and
        # each call waits for its device work (queue.finish), as a user who needs the result does.
        def ours_call():
            polymm.matmul(a, a, backend=name)
            a.queue.finish()

        def ref_call():
            a + a  # noqa: B018 - one pyopencl elementwise kernel
            a.queue.finish()

        ref_name = "one pyopencl elementwise kernel (a + a)"
        ours = median_time(ours_call, lambda: None, repeat, min_time=0.5)
        theirs = median_time(ref_call, lambda: None, repeat, min_time=0.5)
    else:
        ours = median_time(lambda: polymm.matmul(a, a, backend=name), impl.synchronize, repeat, min_time=0.5)
        theirs = median_time(lambda: ref_matmul(a, a), ref_sync, repeat, min_time=0.5)
    return {
        "backend": name,
        "size": size,
        "dtype": dtype,
        "polymm_us": ours * 1e6,
        "reference": ref_name,
        "reference_us": theirs * 1e6,
        "extra_us": (ours - theirs) * 1e6,
        "ratio": ours / theirs,
    }


def plot(results, path):
    """GFLOP/s against size, one line per backend/algorithm, the reference as its own line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit(f"polymm bench --plot needs matplotlib ({exc}); pip install matplotlib") from None
    dtypes = sorted({r.dtype for r in results})
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.5 * len(dtypes), 4.5), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        rows = [r for r in results if r.dtype == dtype]
        size = lambda r: (r.m * r.n * r.k) ** (1 / 3)  # noqa: E731
        for key in sorted({(r.backend, r.algorithm) for r in rows}):
            pts = sorted((size(r), r.gflops) for r in rows if (r.backend, r.algorithm) == key)
            ax.plot(*zip(*pts), marker="o", label=f"{key[0]} / {key[1]}")
        for ref in sorted({r.reference for r in rows}):
            pts = sorted({(size(r), r.reference_gflops) for r in rows if r.reference == ref})
            ax.plot(*zip(*pts), color="black", linestyle="--", marker="s", label=f"{ref} (reference)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (cube root of M*N*K)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"polymm.matmul, {dtype}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
