"""The ``cpu`` backend: matmul kernels written in Numba.

Kernels are compiled lazily (first call per dtype and kernel) with
``cache=True``, so a later process loads them from Numba's on-disk cache.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import threading
import warnings

import numba
import numpy as np
from numba import types
from numba.core import event

from polymm.backend import Backend, CONTRACT_DTYPES, is_bfloat16, optional_dtypes
from polymm.compilation import compiling

from . import native_call, neighbours, params
from .compile_log import CompileLog
from .listing import INFO

__all__ = ["CPUBackend"]

_F16 = np.dtype("float16")
_F32 = np.dtype("float32")
#: dtypes of the small-product kernels compiled per shape
_SMALL_DT = frozenset((_F32, np.dtype("float64")))
_DTYPES = frozenset(CONTRACT_DTYPES)
#: dtypes computed as they are (all but float16)
_DIRECT = frozenset(d for d in CONTRACT_DTYPES if d != _F16)
_TINY_WORK = params.TINY_WORK  # read per call on the 4x4 path: a global is cheaper than an attribute

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


class _Notice(CompileLog):
    """A kernel's compile (a cache miss) as the user's notice, once per dtype
    (:func:`polymm.compilation.compiling`), before the wait; and its seconds at DEBUG."""

    def starting(self, ev):
        cache = getattr(ev.data["dispatcher"], "_cache", None)
        compiling("cpu", self.dtype, getattr(cache, "_cache_path", None))


def _jit(py, signature, parallel, options, notice):
    """``py`` compiled for ``signature``, or loaded from Numba's on-disk cache; ``notice``: a
    listener to Numba's compile events while it is built (under the compiler lock: no other
    thread's compile reaches it).

    Numba raises on a cache file it cannot unpickle (truncated or corrupted),
    for ``py`` or for a kernel it calls: the unreadable files of that cache
    directory are then removed, with one warning naming them, and the kernels
    are compiled afresh (and cached again)."""
    try:
        with _compile_env(), event.install_listener("numba:compile", notice):
            return numba.njit([signature], parallel=parallel, **options)(py)
    except Exception as exc:
        cache = getattr(numba.njit(**options)(py), "_cache", None)
        directory = getattr(cache, "_cache_path", None)
        dropped = _drop_unreadable(directory) if directory else []
        if not dropped:
            raise
        warnings.warn(
            f"polymm cpu: Numba's cache in {directory} had unreadable files ({', '.join(dropped)}: "
            f"{type(exc).__name__}: {exc}); they were removed and the kernels are rebuilt",
            RuntimeWarning,
            stacklevel=2,
        )
        return _jit(py, signature, parallel, options, notice)


def _drop_unreadable(directory: str) -> list[str]:
    """Remove the Numba cache files (index ``.nbi``, data ``.nbc``) in ``directory`` that do not unpickle."""
    dropped = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".nbi", ".nbc")):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                if name.endswith(".nbi"):
                    pickle.load(f)  # the format version, then the pickled index
                pickle.loads(f.read())
        except Exception:
            with contextlib.suppress(FileNotFoundError):  # another process removed it first
                os.remove(path)
            dropped.append(name)
    return dropped


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


def _sig_any_out(dtype: np.dtype, *extra):
    """As :func:`_sig`, with ``out`` of any strides too (paths that may be
    handed the transposed problem, ``out.T = b.T @ a.T``)."""
    nb_dt = numba.from_dtype(dtype)
    arg = types.Array(nb_dt, 3, "A", readonly=True, aligned=False)
    res = types.Array(nb_dt, 3, "A", aligned=False)
    return types.void(arg, arg, res, *extra)


def _groups(a, b, out):
    """``(count, sa, sb, sc)`` of :meth:`CPUBackend.matmul_groups`' one outer axis: its length
    and the operands' strides along it in elements, or None (more outer axes, or strides that are
    not whole elements)."""
    if a.ndim != 4:
        return None
    size = out.itemsize
    strides = (a.strides[0], b.strides[0], out.strides[0])
    if any(s % size for s in strides):
        return None
    return (a.shape[0], *(s // size for s in strides))


def _slab(a, b, out, js, per_task, size):
    """The slab kernel's call: ``b`` made unit-stride along N if it is not."""
    if b.strides[2] != size:
        b = np.ascontiguousarray(b)
    return "slab_parallel", (a, b, out, js, per_task)


def _plan_narrow(a, b, out, m, n, size, p):
    """Matrix-vector products (N or M of a few columns / rows): memory-bound,
    so each path streams the big operand once along its unit stride (making
    it so by the transposed problem, or a copy, when it is not); ``p``: :mod:`.params` (or its
    :class:`~.params.Reads`)."""
    if m > n:  # few columns
        if a.strides[2] != size and a.strides[1] == size:
            # A runs down its columns: out.T = b.T @ a.T has few rows
            return _slab(*_transposed(a, b, out), p.NARROW_SLAB, 1, size)
        if a.strides[2] != size:
            a = np.ascontiguousarray(a)
        return "dot_parallel", (a, b, out, p.NARROW_ROWS)
    if b.strides[2] != size and b.strides[1] == size:
        # B runs down its columns: out.T = b.T @ a.T has few columns
        bt, at, outt = _transposed(a, b, out)
        return "dot_parallel", (bt, at, outt, p.NARROW_ROWS)
    kk = a.shape[2]
    if kk >= p.NARROW_SPLITK_MIN_K:
        # long K: each task streams whole rows of B (a contiguous range)
        if b.strides[2] != size:
            b = np.ascontiguousarray(b)
        ks = max(p.NARROW_SPLITK_CHUNK, -(-kk // p.NARROW_SPLITK_PARTS))
        js = max(p.NARROW_SLAB, p.NARROW_SPLITK_ACC // (m * size))
        return "slab_splitk", (a, b, out, ks, (js,))
    return _slab(a, b, out, p.NARROW_SLAB, 1, size)


#: K from which a batch of dot products runs ``dot_batch`` before the small-product kernel is
#: considered (a row each: from ``_DOTS_FIRST_K_ROW``): shorter, the register tiles' reuse of B's
#: column across rows wins. One thread, float32, 2-core Xeon (2026-11-27), small kernel -> dot:
#: 8192 x (1 x 32) 410 -> 354 us, (1 x 128) 1111 -> 480; 2000 x (16 x 32) 555 -> 961,
#: 1000 x (16 x 64) 533 -> 584, 500 x (16 x 128) 496 -> 403, 100 x (64 x 128) 432 -> 341;
#: 20000 x (1 x 8) 420 -> 625, 4096 x (2 x 16) 175 -> 305.
_DOTS_FIRST_K = 128
_DOTS_FIRST_K_ROW = 32


def _slab_grid(m, n, nth, blk, p, k=None) -> tuple[int, int]:
    """``(slabs, groups)`` of ``auto_slabs`` for an ``m x n`` output on ``nth`` threads: the grid
    that gives the most threads a task, with the most column slabs among those (the most row
    groups where K is at most ``cpu-slabs.rows_first_k``: each thread then first touches pages
    of a new result of its own, which threads writing column slabs all contend for). Slabs are whole
    ``blk.nr``-wide panels of at least ``cpu-slabs.min_columns`` columns and groups whole runs
    of at least ``min_row_panels`` ``blk.mr``-row panels, each shared out evenly as the kernel
    does: asking for more slabs than there are panels merged them (6 x 64 tiles, 512 columns:
    8 tasks for 16 threads, half of them idle), and 320 columns were 10 slabs for 16 threads
    where 4 slabs by 4 groups use them all."""
    rows_first = k is not None and k <= p.SLABS_ROWS_FIRST_K
    return _grid(m, n, nth, blk.mr, blk.nr, p.SLABS_MIN_COLUMNS, p.SLABS_MIN_ROW_PANELS, rows_first)


@functools.lru_cache(maxsize=1024)  # a few small ints per shape: 15 us a call on 16 threads uncached
def _grid(m, n, nth, mr, nr, min_columns, min_row_panels, rows_first=False) -> tuple[int, int]:
    panels, row_panels = -(-n // nr), -(-m // mr)

    def even(parts, units):  # how many parts ``units`` make when shared out as the kernel does
        return -(-units // -(-units // parts))

    most = max(1, min(nth, n // min_columns, panels))
    rows = max(1, m // (min_row_panels * mr))
    grids = ((even(s, panels), even(max(1, min(nth // s, rows)), row_panels)) for s in range(1, most + 1))
    return max(grids, key=lambda grid: (grid[0] * grid[1], grid[1] if rows_first else grid[0]))


def _plan_dots(nbatch, m, n, kk, work, nth, p):
    """``"dot_batch"`` (``"dot_batch_serial"``) for a batch of dot products -- one column of B
    (vecdot: 1 x K by K x 1; a batched matrix-vector product of few rows): one dot product per
    row of A, vectorised along K, rows in parallel; or None where the other paths serve better
    (many rows per product: :func:`_plan_narrow`'s four-row kernel; too few rows for the
    threads and long K: split-K)."""
    if n != 1 or (m > 1 and m * kk >= p.NARROW_MIN_WORK):
        return None
    if work <= p.SERIAL_WORK or nth == 1:
        return "dot_batch_serial"
    return "dot_batch" if nbatch * m >= 2 * nth else None


def _entry(fn):
    """The compiled entry point of ``fn`` (one signature): it skips the dispatcher's type checks
    (about 0.3 us a call); the caller passes exactly the compiled types."""
    (cres,) = fn.overloads.values()
    return cres.entry_point


def _sig_2d(dtype: np.dtype):
    """``void(a, b, out)`` for single 2-D products (the short path)."""
    nb_dt = numba.from_dtype(dtype)
    arg = types.Array(nb_dt, 2, "A", readonly=True, aligned=False)
    return types.void(arg, arg, types.Array(nb_dt, 2, "C", aligned=False))


def _transposed(a, b, out):
    """The same product as ``out.T = b.T @ a.T`` (free views)."""
    return b.transpose(0, 2, 1), a.transpose(0, 2, 1), out.transpose(0, 2, 1)


#: Memory-bound kernels whose parallel loop keeps Numba's static even shares, so each thread
#: streams one contiguous range (chunks of K of B; blocks of rows of A). Handed out one at a
#: time, as the compute-bound kernels are, slab_splitk took 2.1-2.2 ms on gevm-4096 float32
#: against 1.6-1.7 ms static (2 threads, 2026-11-23); gemv-4096 float32 0.85-0.89x -> 0.91-0.95x.
_STATIC = frozenset({"slab_splitk", "dot_parallel", "dot_batch"})

#: The kernels of :meth:`CPUBackend._plan` for every dtype (the small-product ones, ``small_*``,
#: serve :data:`_SMALL_DT` only), in groups that share compiled code (a body called by address, a
#: driver), the costliest first: ``polymm warmup --jobs`` compiles a group per worker process, so
#: that no two workers compile one function.
_WARMUP_GROUPS = (  # float32's compile seconds in a worker, 2-core Xeon (2026-12-01)
    ("auto_slabs", "auto_splitk"),  # 8.8: _columns_direct
    ("small_serial", "small_parallel", "small_splitk", "small_groups", "small_groups_serial"),  # 5.2
    ("slab_serial", "slab_parallel", "slab_splitk"),  # 3.7
    ("auto_parallel",),  # 3.2: _block_packed
    ("auto_serial", "auto_batch"),  # 2.9: _columns_packed; auto_batch on tasks_parallel
    ("dot_batch", "dot_batch_serial"),  # 1.7: _dots
    ("dot_parallel",),  # 1.6
    ("tiny_2d",),  # 0.2
)


def _computed_as(dtype) -> np.dtype:
    """The dtype whose kernels compute ``dtype``: float16 and bfloat16 run float32's."""
    return _F32 if dtype == _F16 or is_bfloat16(dtype) else np.dtype(dtype)


#: What each kernel kind of :meth:`CPUBackend._plan` is, in words (``polymm explain``).
_PATH_WORDS = (
    ("slab_serial", "a small product: one serial loop, no threads, no packing"),
    ("slab_splitk", "few rows, long K: chunks of K in parallel, each streaming whole rows of B, summed in order"),
    ("slab", "whole products per task, unpacked"),
    ("dot_batch", "a batch of dot products (N = 1): one per row, vectorised along K, rows in parallel, no copy"),
    ("dot", "few columns: dot products along K, blocks of rows in parallel"),
    ("auto_splitk", "deep K: packed blocked GEMM over chunks of K in parallel, summed in chunk order"),
    ("auto_batch", "packed blocked GEMM (BLIS loops), one batch entry per thread"),
    ("auto_serial", "packed blocked GEMM (BLIS loops) on one thread: too little work for a parallel launch"),
    (
        "auto_slabs",
        "packed blocked GEMM (BLIS loops), a grid of column slabs (row groups where the columns are few), one task per thread, one parallel launch",
    ),
    ("auto", "packed blocked GEMM (BLIS loops), blocks of C in parallel"),
    ("tiled", "the textbook tiled kernel, tiles of C in parallel"),
    ("naive", "the textbook naive kernel, rows of C in parallel"),
)


class CPUBackend(Backend):
    """Host backend: NumPy arrays in, computed by Numba-parallel kernels."""

    name = "cpu"
    array_library = INFO["array_library"]
    default_for = INFO["default_for"]
    priority = INFO["priority"]
    algorithms = INFO["algorithms"]

    def __init__(self):
        self._fns: dict = {}
        self._tiny: dict = {}  # dtype -> the tiny_2d kernel
        self._lock = threading.RLock()  # a kernel may build the shared driver it runs on (tasks_parallel)
        self._specs: dict = {}
        self._bodies: dict = {}  # (body, signature) -> (its dispatcher, its address)
        self._serialise = True  # until the threading layer is known
        # before anything asks Numba for its threads
        neighbours.start_pool(params.PASSIVE_FROM_CORES, params.POOL_SPIN_SECONDS)

    # -- description -----------------------------------------------------
    def devices(self) -> list[str]:
        try:
            layer = f"{numba.threading_layer()} threading layer"
        except ValueError:  # no parallel region has run yet
            layer = "threading layer omp/tbb/workqueue, chosen at first parallel call"
        if neighbours.PASSIVE:
            layer += ", its threads waiting passively (cpu-threads.passive_from_cores)"
            if neighbours.SPIN_WINDOW:
                layer += f" after {neighbours.SPIN_WINDOW * 1e6:.0f} us of spinning (cpu-threads.pool_spin_seconds)"
        return [f"cpu: {numba.get_num_threads()} threads (numba {numba.__version__}, {layer})"]

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
        sig = _sig
        if kind.startswith("small_"):  # one kernel per dtype: its tiles frozen, any shape
            k.VBYTES = params.VECTOR_BYTES
            key = ("small", *params.small_tiles(dtype.itemsize), k.VBYTES)
            spec = self._specs.get(key)
            if spec is None:
                spec = self._specs[key] = k.specialise_small(*key[1:3])
            if kind == "small_parallel":
                return _entry(_jit(spec[kind], _sig_any_out(dtype, i8), True, k.JIT, _Notice(dtype, kind)))
            if kind in ("small_groups", "small_groups_serial"):  # (bs, count, sa, sb, sc) after (a, b, out)
                parallel = kind == "small_groups"
                sig = _sig_any_out(dtype, *(i8,) * 5)
                return _entry(_jit(spec["small_groups"], sig, parallel, k.JIT, _Notice(dtype, kind)))
            serial = self._compiled(spec["small_serial"], "small_serial", _sig_any_out(dtype, i8), dtype)
            if kind == "small_serial":
                return _entry(serial[0])
            # small_splitk: small_serial called by address for each chunk of K
            extra = (i8, types.UniTuple(i8, 1))
            entry = _entry(_jit(spec[kind], _sig_any_out(dtype, *extra), True, k.JIT, _Notice(dtype, kind)))
            return lambda a, b, out, ks, _: entry(a, b, out, ks, (serial[1],))
        elif kind in ("naive_serial", "naive_parallel"):
            py, extra = getattr(k, kind), ()
        elif kind in ("slab_serial", "slab_parallel"):
            py, extra, sig = getattr(k, kind), (i8, i8), _sig_any_out
        elif kind == "slab_splitk":
            # after (a, b, out) (``_kernels.split_k_driver``): the chunk size ks, then (js,)
            py, extra, sig = k.slab_splitk, (i8, types.UniTuple(i8, 1)), _sig_any_out
        elif kind == "tiny_2d":
            py, extra, sig = k.tiny_2d, (), _sig_2d
        elif kind in ("dot_batch", "dot_batch_serial"):  # both call _dots, compiled once, by address
            dots = self._body(k._dots, "dots", _sig_any_out(dtype, i8, i8), dtype)
            a, b, out = _sig_any_out(dtype).args
            sig = types.void(i8, a, b, out, i8)  # the body's address first: bound by partial (C), not a lambda
            entry = _entry(_jit(getattr(k, kind), sig, kind == "dot_batch", k.JIT, _Notice(dtype, kind)))
            return functools.partial(entry, dots)
        elif kind == "dot_parallel":
            py, extra, sig = k.dot_parallel, (i8,), _sig_any_out
        elif kind == "tasks_parallel":  # the shared parallel driver of task bodies (by address)
            return _entry(_jit(k.tasks_parallel, _sig(dtype, *(i8,) * 9), True, k.JIT, _Notice(dtype, kind)))
        elif kind == "tiled_parallel":  # each tile a task of the shared driver, its work compiled on its own
            tile = self._body(k._tile, "tile", _sig(dtype, *(i8,) * 8), dtype)
            tasks = self._kernel("tasks_parallel", dtype)

            def tiled(a, b, out, tm, tn, tk):
                tiles = a.shape[0] * -(-a.shape[1] // tm) * -(-b.shape[2] // tn)
                tasks(a, b, out, tiles, tm, tn, tk, 0, 0, 0, 0, tile)

            return tiled
        else:
            blk = params.blocking_for(dtype)
            return self._packed(kind, dtype, blk.mr, blk.nr)
        parallel = not kind.endswith("serial") and kind != "tiny_2d"
        return _entry(_jit(py, sig(dtype, *extra), parallel, k.JIT, _Notice(dtype, kind)))

    def _packed(self, kind, dtype, mr, nr):
        """The packed ``"auto"`` kernel ``kind`` with an ``mr`` x ``nr`` register tile (the tuner
        times tiles other than the one in use through this): its driver, handed the address of
        its body (``_kernels.BODIES``, compiled once for every driver that calls it)."""
        from . import _kernels as k

        i8 = types.int64
        key = (mr, nr, dtype.kind != "c")
        spec = self._specs.get(key)
        if spec is None:
            with _compile_env():
                spec = k.specialise(*key)
            self._specs[key] = spec
        name = k.BODIES[kind]
        nb_dt = numba.from_dtype(dtype)
        if name == "_block_packed":  # (a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp)
            a, out = _sig(dtype).args[0], _sig(dtype).args[2]
            body_sig = types.void(a, out, *(i8,) * 9, types.Array(nb_dt, 1, "C"))
        else:  # (a, b, out, bi, i_lo, i_hi, j_lo, j_hi, mc, nc, kc)
            body_sig = _sig(dtype, *(i8,) * 8)
        body = self._body(spec[name], name.strip("_"), body_sig, dtype)
        if kind == "auto_batch":  # a batch entry a task of the shared driver
            tasks = self._kernel("tasks_parallel", dtype)
            return lambda a, b, out, mc, nc, kc, nth: tasks(
                a, b, out, a.shape[0], 0, a.shape[1], 0, b.shape[2], mc, nc, kc, body
            )
        if kind == "auto_splitk":  # the body's address ends the chunk kernel's parameters
            entry = _entry(_jit(spec[kind], _sig(dtype, i8, types.UniTuple(i8, 4)), True, k.JIT, _Notice(dtype, kind)))
            return lambda a, b, out, ks, blocking: entry(a, b, out, ks, (*blocking, body))
        entry = _entry(
            _jit(spec[kind], _sig(dtype, i8, i8, i8, i8, i8), kind != "auto_serial", k.JIT, _Notice(dtype, kind))
        )
        return lambda a, b, out, mc, nc, kc, nth: entry(a, b, out, mc, nc, kc, nth, body)

    def _body(self, py, name, signature, dtype) -> int:
        """The address of ``py`` compiled for ``signature`` on its own (:meth:`_compiled`): a
        kernel's body that its drivers call by address (:mod:`.native_call`)."""
        return self._compiled(py, name, signature, dtype)[1]

    def _compiled(self, py, name, signature, dtype):
        """``(dispatcher, address)`` of ``py`` compiled (or loaded from the cache) for
        ``signature``, once; the dispatcher is kept alive here."""
        from . import _kernels as k

        found = self._bodies.get((py, signature))
        if found is None:
            dispatcher = _jit(py, signature, False, k.JIT, _Notice(dtype, name))
            found = self._bodies[(py, signature)] = (dispatcher, native_call.address(dispatcher))
        return found

    def warmup(self, dtype, kinds=None):
        """Compile (or load from the cache) every kernel the ``"auto"`` path may run for ``dtype``
        (or those of ``kinds``), yielding each kind when ready (:func:`polymm.warmup`); float16 and
        bfloat16 run float32's."""
        dt = _computed_as(dtype)
        for group in self.warmup_groups(dt):
            for kind in group:
                if kinds is None or kind in kinds:
                    self._kernel(kind, dt)
                    yield kind

    def warmup_groups(self, dtype) -> list[tuple[str, ...]]:
        """:meth:`warmup`'s kinds in the groups of :data:`_WARMUP_GROUPS` (``polymm.warmup(jobs=...)``
        compiles each group in a worker process)."""
        dt = _computed_as(dtype)
        return [g for g in _WARMUP_GROUPS if dt in _SMALL_DT or not g[0].startswith("small_")]

    def tune(self, **options):
        """Measure this machine's blocking and record it (``polymm tune --backend cpu``; see
        :func:`polymm_numba.tuning.tune` for ``options``); later processes use it."""
        from .tuning import tune

        return tune(**options)

    # -- compute ---------------------------------------------------------
    def check_dtype(self, dtype, operand) -> None:
        if dtype not in _DTYPES and dtype not in optional_dtypes():  # a set first: the tuple test costs ~1 us
            raise TypeError(f"backend {self.name!r} does not support dtype {dtype}")

    def matmul_2d(self, a, b, out, algorithm: str) -> None:
        """One 2-D product of one dtype into a new C-contiguous ``out`` (the
        core's short path): tiny ones go straight to a serial kernel, since
        at 4x4 every microsecond of Python is most of the cost."""
        dt = out.dtype
        m, k = a.shape
        n = b.shape[1]
        if m * k * n <= _TINY_WORK:
            fn = self._tiny.get(dt)  # keyed by dtype alone: a tuple key costs a tenth of a 4x4 product
            if fn is None and dt in _DIRECT:
                fn = self._tiny[dt] = self._kernel("tiny_2d", dt)
            if fn is not None:
                fn(a, b, out)
                return
        if (
            algorithm == "auto"
            and dt in _SMALL_DT
            and m <= params.SMALL_MN
            and n <= params.SMALL_MN
            and k <= params.SMALL_K
            and m * k * n <= params.SERIAL_WORK
            and b.strides[1] == dt.itemsize
            and a.dtype is dt
            and b.dtype is dt
        ):
            # one small product: the register-tile kernel, no planner
            self._kernel("small_serial", dt)(a[None], b[None], out[None], 1)
            return
        self.matmul(a[None], b[None], out[None], algorithm)

    def matmul(self, a, b, out, algorithm: str) -> None:
        dt = out.dtype
        if dt in _DIRECT and a.dtype is dt and b.dtype is dt:  # the common case, first
            self._run(a, b, out, algorithm, dt)
            return
        # The core hands over one dtype in native byte order (it casts byte-swapped input first).
        if dt == _F16 or is_bfloat16(dt):
            # float16 and bfloat16 accumulate in float32 and are rounded once at the end
            tmp = np.empty(out.shape, _F32)
            self._run(a.astype(_F32), b.astype(_F32), tmp, algorithm, _F32)
            with np.errstate(over="ignore"):  # overflow to +-inf is the result
                out[...] = tmp
            return
        self._run(a, b, out, algorithm, dt)

    def explain(self, a, b, out, algorithm: str) -> dict:
        """The path ``matmul`` takes for these operands and its blocking (for
        :func:`polymm.tools.explain.explain`); ``(G, B, M, K)`` operands: :meth:`matmul_groups`'
        path for them, one launch or one call per outer index."""
        dt = _F32 if out.dtype == _F16 else out.dtype  # float16 is computed in float32
        series, groups = 1, None
        if a.ndim == 4:
            series = a.shape[0]
            if algorithm == "auto" and out.dtype == dt and dt in _SMALL_DT:
                groups = _groups(a, b, out)
            a, b, out = a[0], b[0], out[0]
            if groups is not None and self._plan(a, b, out, dt, groups=groups) is None:
                groups = None
        if algorithm == "auto":
            a, b, out = a.astype(dt, copy=False), b.astype(dt, copy=False), out.astype(dt, copy=False)
            reads = params.Reads()
            kind = self._plan(a, b, out, dt, reads, groups=groups)[0]
            work = a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
            cap = self._team_cap(kind, work, dt, numba.get_num_threads())
            if cap < numba.get_num_threads():  # the tuned team decides (a serial plan too)
                reads = params.Reads()
                kind = self._plan(a, b, out, dt, reads, nth=cap, groups=groups)[0]
                reads.read.append(params.SETTINGS[f"teams {dt.name}"])
            settings = reads.read
        else:
            kind = {"tiled": "tiled_parallel", "naive": "naive_parallel"}[algorithm]
            settings = [params.SETTINGS["TILED"]] if algorithm == "tiled" else []
        if kind.startswith("small_"):
            mr0, nr = params.small_tiles(dt.itemsize)
            m, n = a.shape[1], b.shape[2]
            rows = f"{-(-m // mr0)} of {mr0} rows (the last overlapping)" if m >= mr0 else f"one of {m} rows"
            cols = f"{n // nr} of {nr} columns" if n >= nr else ""
            if n % nr:
                cols += (" and " if cols else "") + f"one masked tile of {n % nr} columns"
            words = f"small products: register tiles, {rows} x {cols} (one kernel per dtype for every shape), " + (
                "chunks of K in parallel, summed in order" if kind == "small_splitk" else "whole products per task"
            )
        else:
            words = next(text for prefix, text in _PATH_WORDS if kind.startswith(prefix))
        blocking = params.AUTO_BLOCKING[dt] if kind.startswith("auto_") else None
        if blocking is not None:
            settings.append(params.blocking_setting(dt))
        if kind.startswith("small_"):
            settings += [params.SETTINGS["SMALL_REGS"], params.SETTINGS["VECTOR_BYTES"]]
        threads = 1 if kind.endswith("serial") else numba.get_num_threads()
        if algorithm == "auto":
            threads = min(threads, cap)
        if groups is not None:
            words = f"one launch over the {series} outer batch indices, which no one batch stride reaches; {words}"
        elif series > 1:
            words = f"{series} calls of this plan, one per outer batch index; {words}"
        return {"path": kind, "reason": words, "blocking": blocking, "threads": threads, "settings": tuple(settings)}

    def matmul_groups(self, a, b, out, algorithm: str) -> None:
        """``out[g] = a[g] @ b[g]`` for each outer index ``g`` of ``(G..., B, M, K)`` views (the
        core's broadcast batches that no one batch stride reaches). Small products run as one
        launch over every outer index (``small_groups``), the team counted once: one call per
        index, each of ``(64, 1, 32, 32) @ (1, 64, 32, 32)``'s 64 was too small to pay for a
        count (15 us) and ran on one thread, 0.75x NumPy on 2 cores. Others: one call each."""
        dt = out.dtype
        groups = _groups(a, b, out) if algorithm == "auto" and a.dtype == dt and b.dtype == dt else None
        if groups is not None and self._plan(a[0], b[0], out[0], dt, groups=groups) is not None:
            self._run(a[0], b[0], out[0], algorithm, dt, groups)
            return
        for g in np.ndindex(a.shape[:-3]):
            self.matmul(a[g], b[g], out[g], algorithm)

    def _run(self, a, b, out, algorithm, dt, groups=None):
        """Plan and launch; a parallel plan runs on the threads that the other threads running
        now leave free (:mod:`.neighbours`: NumPy's BLAS pool spins on its cores for a while after
        each call; other programs run too), planned again for that team; a product long enough
        to outlast that spin on the whole team (``params.one_thread_seconds``) takes the team.
        A serial plan asks nothing: counting threads costs 15 us (far more on a busy machine).
        ``groups``: :meth:`matmul_groups`' outer indices, planned as one (:meth:`_plan`)."""
        kind, args = self._choose(a, b, out, algorithm, dt, groups)
        limit = numba.get_num_threads()
        work = a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] * (groups[0] if groups else 1)
        if limit > 1 and not kind.endswith("serial") and work >= params.NEIGHBOUR_MIN_WORK:
            # the team this much work uses best on this machine (polymm tune), of the free cores
            most = self._team_cap(kind, work, dt, limit) if algorithm == "auto" else limit
            # a product that outlasts the spin of NumPy's pool on a whole team beside it takes the
            # team; one long enough to gain from sharing its cores too, on a passive pool of many
            # threads or where the spinning threads can be made to yield them (neighbours.yielding)
            alone = params.one_thread_seconds(work, dt)
            yields = params.YIELD_SPINNERS and neighbours.MAY_YIELD
            outlasts = most > 1 and (
                alone > params.SPIN_SECONDS * most / (most - 1)
                or (yields and alone >= params.YIELD_SPIN_SECONDS)
                or (neighbours.PASSIVE and limit >= params.SHARE_FROM_CORES and alone >= params.SHARE_SPIN_SECONDS)
            )
            team = neighbours.team_size(most, _PARALLEL_LOCK, outlasts_spin=outlasts)
            if outlasts and team > 1 and yields:
                with neighbours.yielding(neighbours.spinning_threads()):
                    self._launch_on(team, limit, kind, args, a, b, out, algorithm, dt, groups)
                return
            if team == 1 and algorithm == "auto":
                # planned for one thread: a serial kernel runs as it is, without setting the
                # thread count twice (about 20 us on 2 cores)
                kind, args = self._plan(a, b, out, dt, nth=1, groups=groups)
                if kind.endswith("serial"):
                    self._kernel(kind, dt)(*args)
                    return
            if team < limit:
                self._launch_on(team, limit, kind, args, a, b, out, algorithm, dt, groups)
                return
        self._launch(kind, args, dt)

    def _launch_on(self, team, limit, kind, args, a, b, out, algorithm, dt, groups):
        """Launch on ``team`` of the ``limit`` threads: planned for that team where it is fewer."""
        if team == limit:
            self._launch(kind, args, dt)
            return
        numba.set_num_threads(team)  # this Python thread's setting only
        try:
            self._launch(*self._choose(a, b, out, algorithm, dt, groups), dt)
        finally:
            numba.set_num_threads(limit)

    @staticmethod
    def _team_cap(kind, work, dt, limit) -> int:
        """The most of ``limit`` threads the packed kernel (``kind`` ``auto_*``) should take for a
        product of ``work`` multiply-adds: the tuned team of its size (:func:`.params.team_cap`,
        timed on squares), else ``limit``. The streaming kernels (matrix-vector, dots, narrow slabs) are bound by
        memory bandwidth, which every core adds to: capped like squares of their work, gemv-4096
        float32 ran on 2 of 16 threads at a third of its speed (16-core GPU host, 2026-12-02)."""
        if not kind.startswith("auto_") or work < params.NEIGHBOUR_MIN_WORK:
            return limit
        return min(limit, params.team_cap(work, dt) or limit)

    def _choose(self, a, b, out, algorithm, dt, groups=None):
        """``(kernel kind, args)`` for ``algorithm`` on the current thread count."""
        if algorithm == "auto":
            kind, args = self._plan(a, b, out, dt, groups=groups)
        elif algorithm == "tiled":
            t = params.TILED
            kind, args = "tiled_parallel", (a, b, out, t.tm, t.tn, t.tk)
        elif algorithm == "naive":
            kind, args = "naive_parallel", (a, b, out)
        else:
            raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {self.algorithms}")
        if algorithm != "auto" and a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2] <= params.TINY_WORK:
            kind, args = _slab(a, b, out, b.shape[2], 1, dt.itemsize)
            kind = "slab_serial"
        return kind, args

    def _launch(self, kind, args, dt):
        fn = self._kernel(kind, dt)
        if kind.endswith("serial"):
            fn(*args)
            return
        # Hand out loop iterations one at a time instead of one even share per
        # thread: a thread that loses its core for a while (a busy machine)
        # then no longer holds every other thread at the end of the loop.
        # The iterations are coarse (packed blocks, output tiles, rows), so
        # the dynamic hand-out costs nothing measurable; the user's setting
        # is restored afterwards. The memory-bound streaming kernels keep even
        # static shares (``_STATIC``): one contiguous stream per thread.
        old = numba.set_parallel_chunksize(0 if kind in _STATIC else 1)
        try:
            if self._serialise:
                with _PARALLEL_LOCK:
                    fn(*args)
                    self._serialise = numba.threading_layer() == "workqueue"
            else:
                fn(*args)
        finally:
            numba.set_parallel_chunksize(old)
            if neighbours.SPIN_WINDOW:  # the team may spin a while: not other work (team_size)
                neighbours.launched(numba.get_num_threads())

    def _plan(self, a, b, out, dt, p=params, nth=None, groups=None):
        """The ``"auto"`` path for this shape and layout: ``(kernel kind, args)``, for ``nth``
        threads (default: Numba's thread count now). ``groups``: ``(count, sa, sb, sc)``, these
        products ``count`` times over, each set ``sa``, ``sb``, ``sc`` elements further on
        (:meth:`matmul_groups`): the small-product kernel's one launch over them all
        (``small_groups``), else None.

        Thresholds come from :mod:`.params` (``p``; explain passes a :class:`~.params.Reads`
        to learn which database entries decided), read once from the device database.
        """
        if groups is not None:
            return self._plan_groups(a, b, out, dt, p, nth, groups)
        nbatch, m, kk = a.shape
        n = b.shape[2]
        size = dt.itemsize
        per = m * n * kk
        work = nbatch * per
        if work <= p.TINY_WORK:
            # low latency: no threads, no packing
            return "slab_serial", _slab(a, b, out, n, 1, size)[1]
        if nth is None:
            nth = numba.get_num_threads()
        dots = _plan_dots(nbatch, m, n, kk, work, nth, p)
        if dots is not None and (kk >= _DOTS_FIRST_K or (m == 1 and kk >= _DOTS_FIRST_K_ROW)):
            return dots, (a, b, out, max(1, p.SMALL_TASK // kk))
        if (
            dt in _SMALL_DT
            and m <= p.SMALL_MN
            and n <= p.SMALL_MN
            and (kk <= p.SMALL_K or kk >= p.SPLITK_MIN_K)
            and not (a.strides[0] | a.strides[1] | a.strides[2] | b.strides[0] | b.strides[1]) % size
            and out.strides[2] == size
        ):
            # small products (a batch, broadcast or not, or one): register
            # tiles of a few fixed sizes, whole products per task, no packing
            if b.strides[2] != size:
                b = np.ascontiguousarray(b)
            if kk > p.SMALL_K:
                # deep K: chunks of K in parallel, summed in chunk order
                return "small_splitk", (a, b, out, p.SPLITK_CHUNK, ())
            parallel = work > p.SMALL_SERIAL_WORK and nth > 1
            kind = "small_parallel" if parallel else "small_serial"
            return kind, (a, b, out, max(1, p.SMALL_TASK // per))
        if dots is not None:  # short dot products the small kernel did not take
            return dots, (a, b, out, max(1, p.SMALL_TASK // kk))
        if min(m, n) <= p.NARROW and per >= p.NARROW_MIN_WORK:
            return _plan_narrow(a, b, out, m, n, size, p)
        if per <= p.SMALL_PRODUCT:
            # small products (one, or a batch): whole products, several per
            # task, no packing (32^3: 4 us unpacked, 11 us packed)
            kind, args = _slab(a, b, out, n, max(1, p.SMALL_TASK // per), size)
            if work <= p.SERIAL_WORK or nth == 1:
                kind = "slab_serial"
            return kind, args
        blk = p.AUTO_BLOCKING[dt]
        if work <= p.SERIAL_WORK or nth == 1 or work - work // nth < p.PARALLEL_MIN_SAVING:
            # one thread: the others would save less than launching them (and counting the
            # neighbours first) costs; 128^3 float32 is 41 us here, 2 threads 100 us a call
            return "auto_serial", (a, b, out, blk.mc, blk.nc, blk.kc, nth)
        if kk >= p.SPLITK_MIN_K and m * n <= p.SPLITK_MAX_MN and kk >= 4 * max(m, n):
            return "auto_splitk", (a, b, out, p.SPLITK_CHUNK, (blk.mc, blk.nc, blk.kc))
        if nbatch >= 2 * nth:
            return "auto_batch", (a, b, out, blk.mc, blk.nc, blk.kc, nth)
        # a passive pool (cpu-threads.passive_from_cores) wakes for each of auto_parallel's launches, two per K
        # block; with A's rows contiguous the slab grid reads A in place, one launch in all
        passive = neighbours.PASSIVE and a.strides[2] == a.itemsize
        if per <= p.SLABS_WORK_PER_THREAD * nth or (passive and per <= p.SLABS_PASSIVE_WORK_PER_THREAD * nth):
            # one launch: a grid of column slabs by row groups, one task per thread
            slabs, groups = _slab_grid(m, n, nth, blk, p, kk)
            if slabs * groups >= 2:
                return "auto_slabs", (a, b, out, blk.mc, slabs, blk.kc, groups)
        return "auto_parallel", (a, b, out, blk.mc, blk.nc, blk.kc, nth)

    def _plan_groups(self, a, b, out, dt, p, nth, groups):
        """``small_groups`` (``small_groups_serial``) where one call of these products alone runs
        the small-product kernel on one thread and the ``groups`` together are work enough for
        threads (``cpu-small.serial_work``), else None."""
        kind, args = self._plan(a, b, out, dt, p, nth=1)
        if kind != "small_serial" or args[1] is not b:  # another path, or a copy of B per call
            return None
        per = a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        nth = numba.get_num_threads() if nth is None else nth
        parallel = groups[0] * per > p.SMALL_SERIAL_WORK and nth > 1
        task = max(1, p.SMALL_TASK // (per // a.shape[0]))
        return ("small_groups" if parallel else "small_groups_serial"), (a, b, out, task, *groups)

    def dtypes(self):
        return CONTRACT_DTYPES + optional_dtypes()
