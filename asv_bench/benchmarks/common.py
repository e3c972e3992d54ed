"""Shared helpers for the polymm asv suite: data, device handling, skips and timing.

Benchmarks skip what cannot run here by raising ``NotImplementedError`` in
``setup`` -- asv's own mechanism, so a missing GPU shows as "n/a", not as a
failure.  Inputs live on the backend's device before timing starts, and every
timed call ends with a device synchronisation so GPU work is really counted.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np


def _load_timing():
    """``polymm/tools/timing.py`` of this checkout, loaded by path: asv also times older commits,
    whose installed polymm may predate the module (it imports nothing of polymm)."""
    path = Path(__file__).resolve().parents[2] / "polymm" / "tools" / "timing.py"
    spec = importlib.util.spec_from_file_location("_polymm_timing", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_timing = _load_timing()

#: Backends the suite knows; POLYMM_ASV_BACKENDS=a,b adds (or, with "only:a,b", replaces) names.
BACKENDS = ["cpu", "opencl", "cuda"]
_extra = os.environ.get("POLYMM_ASV_BACKENDS", "")
if _extra.startswith("only:"):
    BACKENDS = [b for b in _extra[5:].split(",") if b]
else:
    BACKENDS += [b for b in _extra.split(",") if b and b not in BACKENDS]

#: POLYMM_ASV_QUICK=1 (``scripts/asv_local_run.sh --quick`` sets it): the ``track_*`` figures,
#: which time themselves, take one timed call instead of sampling for seconds, and host runs of
#: the cliff suite skip the cells above 512. asv's own ``--quick`` shortens only ``time_*``.
QUICK = os.environ.get("POLYMM_ASV_QUICK", "") not in ("", "0")

#: Every algorithm name any built-in backend offers; a backend lacking one skips it.
ALGORITHMS = ["naive", "tiled", "tiled-dynamic", "auto"]

#: Largest (equivalent) square size per algorithm on a host (CPU) device: a 2-core laptop
#: would need minutes per sample for a naive 4096 product. Keys are "backend:algorithm" or
#: "algorithm". POLYMM_ASV_HOST_MAX_N=N overrides them all (for a big host).
HOST_MAX_N = {
    "naive": 512,
    "tiled": 2048,
    "tiled-dynamic": 512,
    "auto": 2048,
    # PoCL runs the GPU-shaped textbook tiles at well under 1 GFLOP/s on a laptop CPU.
    "opencl:tiled": 512,
}


def host_limit(backend: str, algorithm: str) -> int:
    value = os.environ.get("POLYMM_ASV_HOST_MAX_N")
    if value:
        return int(value)
    return HOST_MAX_N.get(f"{backend}:{algorithm}", HOST_MAX_N.get(algorithm, 1024))


def random_array(shape, dtype, seed=0) -> np.ndarray:
    """Random values (never zeros: a kernel may shortcut them); integers kept small so sums stay exact."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape, dtype=np.float64).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(1, 8, size=shape).astype(dtype)


class Target:
    """One backend ready to run: its arrays, its synchronisation and its reference library."""

    def __init__(self, backend: str, algorithm: str | None = None):
        try:
            import polymm

            self.backend = polymm.get_backend(backend)
        except Exception as exc:  # unknown or unavailable here: skip, do not fail
            raise NotImplementedError(f"backend {backend!r} unavailable: {exc}") from None
        if algorithm is not None and algorithm not in self.backend.algorithms:
            raise NotImplementedError(f"backend {backend!r} has no algorithm {algorithm!r}")
        self.name = backend
        self.library = getattr(self.backend, "array_library", "numpy")
        self.queue = None
        if self.library == "pyopencl":
            # The backend's own queue (its device choice), found through the interface.
            self.queue = self.backend.from_numpy(np.ones((1, 1), np.float32)).queue
        self.is_gpu = self._probe_gpu()

    def _probe_gpu(self) -> bool:
        if self.library == "cupy":
            return True
        if self.library == "pyopencl":
            import pyopencl as cl

            return bool(self.queue.device.type & cl.device_type.GPU)
        return False

    def check_size(self, algorithm: str, m: int, n: int, k: int, batch: int = 1) -> None:
        """Skip problems that would take minutes on a host device (see ``HOST_MAX_N``).

        A problem counts as the square size with the same number of multiply-adds.
        """
        size = round((batch * m * n * k) ** (1 / 3))
        limit = host_limit(self.name, algorithm)
        if not self.is_gpu and size > limit:
            raise NotImplementedError(
                f"{algorithm} on {batch}x{m}x{n}x{k} is too slow for a host run (equivalent square {size} > {limit})"
            )

    def put(self, x: np.ndarray):
        """The array on this backend's device, as the plain array type users hold there.

        (Plain ``pyopencl.array.Array`` / ``cupy.ndarray``: what a user passes in, whatever
        subclass ``from_numpy`` may return for the core's own use.)
        """
        x = np.ascontiguousarray(x)
        if self.library == "pyopencl":
            import pyopencl.array as cla

            return cla.to_device(self.queue, x)
        if self.library == "cupy":
            import cupy

            return cupy.asarray(x)
        return self.backend.from_numpy(x)

    def check_dtype(self, dtype, operand) -> None:
        """Skip (asv's way) a dtype the device truly cannot compute; anything else is a failure."""
        try:
            self.backend.check_dtype(np.dtype(dtype), operand)
        except TypeError as exc:
            raise NotImplementedError(str(exc)) from None

    def sync(self, result=None) -> None:
        """Wait until the device has finished (no-op on the host)."""
        if self.library == "cupy":
            import cupy

            cupy.cuda.get_current_stream().synchronize()
        elif self.library == "pyopencl" and result is not None:
            result.queue.finish()

    def reference(self, a_host: np.ndarray, b_host: np.ndarray):
        """A call computing the same product with the reference library, and its synchronisation.

        NumPy (OpenBLAS) for host devices; ``cupy.matmul`` (cuBLAS, TF32 off unless
        CUPY_TF32=1) for GPUs when CuPy is importable there.
        """
        if self.is_gpu:
            try:
                import cupy

                a, b = cupy.asarray(a_host), cupy.asarray(b_host)

                def run():
                    cupy.matmul(a, b)
                    cupy.cuda.get_current_stream().synchronize()

                return run, "cupy.matmul"
            except Exception:
                pass
        return (lambda: np.matmul(a_host, b_host)), "numpy.matmul"


def measure(fn, min_sample=2e-3, samples=7, budget=1.5, warm=True) -> float:
    """Best (minimum) seconds per call of ``fn`` (which must synchronise): :func:`polymm.tools.timing.measure`.

    Used by the ``track_*`` benchmarks, which asv calls once and which must time for
    themselves. The minimum, not the median: other processes on a shared machine only ever
    add time, so the fastest sample is the closest to what the kernel can do. With ``QUICK``,
    one timed call (after the warm-up, if any).
    """
    if QUICK:
        samples, budget = 1, 0.0
    return _timing.measure(fn, samples=samples, min_sample=min_sample, budget=budget, warm=warm).best


def gflops(m: int, n: int, k: int, batch: int, seconds: float) -> float:
    return 2.0 * batch * m * n * k / seconds / 1e9
