"""polymm's CPU backend: matmul kernels written in Numba.

Registered under the entry-point group ``polymm.backends`` as ``cpu``.
Kernels are compiled lazily (first call per dtype and kernel) with
``cache=True``, so a later process loads them from Numba's on-disk cache.
"""

from __future__ import annotations

import contextlib
import threading

import numba
import numpy as np
from numba import types

from polymm.backend import Backend, CONTRACT_DTYPES

from . import params

__all__ = ["CPUBackend", "params"]
__version__ = "0.1.0"

_F16 = np.dtype("float16")
_F32 = np.dtype("float32")

# Numba's "workqueue" threading layer aborts the process when two Python
# threads launch parallel kernels at once; parallel launches are serialised
# until the layer in use is known to be a thread-safe one (omp, tbb).
_PARALLEL_LOCK = threading.Lock()


@contextlib.contextmanager
def _compile_env():
    """Turn on LLVM's SLP vectoriser while *our* kernels compile.

    Numba leaves SLP off by default; the micro-kernel's fully unrolled
    MR x NR update is straight-line code that only SLP turns into vector FMAs.
    Numba reads the setting each time it builds a pass pipeline, and all
    compilation holds its global compiler lock, so flipping it under that
    lock affects nothing but the functions compiled here.
    """
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        old = config.SLP_VECTORIZE
        config.SLP_VECTORIZE = 1
        try:
            yield
        finally:
            config.SLP_VECTORIZE = old


def _sig(dtype: np.dtype, *extra):
    """``void(a, b, out, *extra)`` with the loosest array types.

    ``a``/``b`` are typed read-only, unaligned, any layout so one compiled
    version accepts C, F, strided, broadcast (read-only) and unaligned
    operands alike; without it Numba would compile one version per layout.
    """
    nb_dt = numba.from_dtype(dtype)
    arg = types.Array(nb_dt, 3, "A", readonly=True, aligned=False)
    res = types.Array(nb_dt, 3, "C", aligned=False)
    return types.void(arg, arg, res, *extra)


class CPUBackend(Backend):
    """Host backend: NumPy arrays in, computed by Numba-parallel kernels."""

    name = "cpu"
    array_library = "numpy"
    algorithms = ("naive", "tiled", "auto")

    def __init__(self):
        self._fns: dict = {}
        self._lock = threading.Lock()
        self._specs: dict = {}
        self._serialise = True  # until the threading layer is known

    # -- description -----------------------------------------------------
    def devices(self) -> list[str]:
        try:
            layer = f"{numba.threading_layer()} threading layer"
        except ValueError:  # no parallel region has run yet
            layer = "threading layer omp/tbb/workqueue, chosen at first parallel call"
        return [f"cpu: {numba.get_num_threads()} threads "
                f"(numba {numba.__version__}, {layer})"]

    # -- compilation -----------------------------------------------------
    def _kernel(self, kind: str, dtype: np.dtype):
        """The compiled kernel ``kind`` for ``dtype`` (compiled or loaded once)."""
        key = (kind, dtype)
        fn = self._fns.get(key)
        if fn is not None:
            return fn
        with self._lock:
            fn = self._fns.get(key)
            if fn is None:
                fn = self._build(kind, dtype)
                self._fns[key] = fn
        return fn

    def _build(self, kind, dtype):
        from . import _kernels as k

        i8 = types.int64
        if kind in ("naive_serial", "naive_parallel"):
            py, extra = getattr(k, kind), ()
        elif kind == "tiled_parallel":
            py, extra = k.tiled_parallel, (i8, i8, i8)
        else:
            blk = params.blocking_for(dtype)
            key = (blk.mr, blk.nr, dtype.kind != "c")
            spec = self._specs.get(key)
            if spec is None:
                with _compile_env():
                    spec = k.specialise(*key)
                self._specs[key] = spec
            py, extra = spec[kind], (i8, i8, i8, i8)
        parallel = not kind.endswith("serial")
        with _compile_env():
            return numba.njit([_sig(dtype, *extra)], parallel=parallel, **k.JIT)(py)

    # -- compute ---------------------------------------------------------
    def matmul(self, a, b, out, algorithm: str) -> None:
        dt = out.dtype
        if not dt.isnative:  # kernels exist for native byte order only
            tmp = np.empty(out.shape, dt.newbyteorder("="))
            self.matmul(a, b, tmp, algorithm)
            out[...] = tmp
            return
        if dt == _F16:
            # float16 accumulates in float32 and is rounded once at the end
            tmp = np.empty(out.shape, _F32)
            self._run(a.astype(_F32), b.astype(_F32), tmp, algorithm, _F32)
            with np.errstate(over="ignore"):  # overflow to +-inf is the result
                out[...] = tmp
            return
        if not a.dtype.isnative:
            a = a.astype(dt)
        if not b.dtype.isnative:
            b = b.astype(dt)
        self._run(a, b, out, algorithm, dt)

    def _run(self, a, b, out, algorithm, dt):
        nbatch, m, kk = a.shape
        n = b.shape[2]
        per = m * n * kk
        work = nbatch * per
        if work <= params.TINY_WORK:
            # no threads, no packing: the call costs little more than dispatch
            self._kernel("naive_serial", dt)(a, b, out)
            return
        if algorithm == "auto":
            blk = params.AUTO_BLOCKING[dt]
            nth = numba.get_num_threads()
            args = (a, b, out, blk.mc, blk.nc, blk.kc, nth)
            if work <= params.SERIAL_WORK or nth == 1:
                return self._kernel("auto_serial", dt)(*args)
            if per <= params.TINY_WORK:  # many tiny products: rows in parallel
                kind, args = "naive_parallel", (a, b, out)
            elif nbatch >= 2 * nth or per <= params.SERIAL_WORK:
                kind = "auto_batch"
            else:
                kind = "auto_parallel"
        elif algorithm == "tiled":
            t = params.TILED
            kind, args = "tiled_parallel", (a, b, out, t.tm, t.tn, t.tk)
        elif algorithm == "naive":
            kind, args = "naive_parallel", (a, b, out)
        else:
            raise ValueError(f"unknown algorithm {algorithm!r}; "
                             f"choose one of {self.algorithms}")
        fn = self._kernel(kind, dt)
        # Hand out loop iterations one at a time instead of one even share per
        # thread: a thread that loses its core for a while (a busy machine)
        # then no longer holds every other thread at the end of the loop.
        # The iterations are coarse (packed blocks, output tiles, rows), so
        # the dynamic hand-out costs nothing measurable; the user's setting
        # is restored afterwards.
        old = numba.set_parallel_chunksize(1)
        try:
            if self._serialise:
                with _PARALLEL_LOCK:
                    fn(*args)
                    self._serialise = numba.threading_layer() == "workqueue"
            else:
                fn(*args)
        finally:
            numba.set_parallel_chunksize(old)

    def dtypes(self):
        return CONTRACT_DTYPES
