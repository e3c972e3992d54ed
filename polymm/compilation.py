"""Kernel compilation the user can see and schedule: a notice when a call compiles, and :func:`warmup`.

A first call that compiles kernels may take seconds; a library that stalls without a word looks
hung.  A backend calls :func:`compiling` just before it compiles (not when it loads from a cache):
one line per backend and dtype, once per process, on the ``polymm`` logger at WARNING, so that
Python's last-resort handler prints it to stderr with no logging set up (as JAX logs its
compiles).  Silence it with ``logging.getLogger("polymm").setLevel(logging.ERROR)``.  Each kernel
compiled is also logged, at DEBUG, by :func:`compiled` (what ``scripts/cold_start.py`` and the
tests count).
:func:`warmup` (and ``polymm warmup``) compiles chosen dtypes ahead of time, with progress; Numba
compiles one function at a time in a process (its compiler holds a global lock), so ``jobs`` > 1
compiles a backend's groups of kernels in as many worker processes at once, into its on-disk cache.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["compiling", "compiled", "warmup", "LOGGER"]

#: The logger of the notices (``logging.getLogger("polymm")``).
LOGGER = logging.getLogger("polymm")

_announced: set[tuple[str, str]] = set()
_lock = threading.Lock()

#: The dtypes :func:`warmup` compiles when none are named.
DEFAULT_DTYPES = ("float32", "float64")


def compiling(backend: str, dtype, where: str | None = None) -> None:
    """Say, once per ``(backend, dtype)`` in this process, that kernels are being compiled (``where``: the cache)."""
    key = (backend, str(np.dtype(dtype)))
    with _lock:
        if key in _announced:
            return
        _announced.add(key)
    cached = f"cached in {where}" if where else "not cached"
    LOGGER.warning(
        f"polymm: compiling {backend} kernels for {key[1]} (first use; {cached}; `polymm warmup` compiles ahead)"
    )


def compiled(backend: str, dtype, kernel: str, seconds: float) -> None:
    """Log at DEBUG that ``backend`` compiled ``kernel`` for ``dtype`` in ``seconds`` (not a cache load).

    The record carries ``polymm_compile``: ``{"backend", "dtype", "kernel", "seconds"}``, for a handler
    that counts or times compiles (``logging.getLogger("polymm").setLevel(logging.DEBUG)`` to see them).
    """
    if LOGGER.isEnabledFor(logging.DEBUG):
        facts = {"backend": backend, "dtype": str(np.dtype(dtype)), "kernel": kernel, "seconds": seconds}
        LOGGER.debug(
            f"polymm: compiled {backend} kernel {kernel} for {facts['dtype']} in {seconds:.2f} s",
            extra={"polymm_compile": facts},
        )


def _dtypes_named(impl, names) -> list:
    """``names`` (dtypes or their names; ``"all"``: every dtype of the backend) as the backend's dtypes."""
    offered = {str(d): d for d in impl.dtypes()}
    if isinstance(names, str):
        names = list(offered) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    elif isinstance(names, (np.dtype, type)):  # one dtype: np.float32 or np.dtype("float32")
        names = [names]
    chosen = [str(n) if isinstance(n, str) else str(np.dtype(n)) for n in names]
    unknown = [n for n in chosen if n not in offered]
    if unknown:
        raise ValueError(
            f"polymm.warmup: backend {impl.name!r} has no dtype {', '.join(unknown)}; it computes {', '.join(offered)}"
        )
    return [offered[n] for n in chosen]


def warmup(dtypes=DEFAULT_DTYPES, *, backend: str | None = None, progress=None, jobs: int = 1) -> dict[str, float]:
    """Compile ``backend``'s kernels for ``dtypes`` now, so that no later call waits on a compile.

    ``dtypes``: a dtype, dtypes or names, a comma-separated string, or ``"all"``; ``backend``: a name (default:
    the one NumPy arrays get).  ``progress`` is called with one line per kernel made ready (the CLI
    prints them).  Backends with a ``warmup(dtype)`` generator say what they compile; others run a few
    products.  ``jobs`` > 1, for a backend that lists its ``warmup_groups(dtype)``: the groups compile
    in up to ``jobs`` worker processes at once, each into the backend's on-disk cache, and this process
    then loads them (a group that fails in a worker is compiled here).  Returns the seconds per dtype,
    from the start until that dtype's kernels were ready in this process.
    """
    from .registry import get_backend, selected_backend

    name = selected_backend(backend, "numpy")
    impl = get_backend(name)
    chosen = _dtypes_named(impl, dtypes)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TypeError(f"polymm.warmup: jobs must be a positive int, not {jobs!r}")
    start = time.perf_counter()
    if jobs > 1 and hasattr(impl, "warmup_groups"):  # the costliest groups of every dtype first
        ranks = itertools.zip_longest(*([(d, g) for g in impl.warmup_groups(d)] for d in chosen))
        _in_workers(name, [group for rank in ranks for group in rank if group], jobs, progress)
    spent = {}
    for dtype in chosen:
        steps = impl.warmup(dtype) if hasattr(impl, "warmup") else products(name, dtype)
        last = time.perf_counter()
        for step in steps:
            now = time.perf_counter()
            if progress:
                progress(f"{name} {dtype}: {step} ready ({now - last:.1f} s)")
            last = now
        spent[str(dtype)] = time.perf_counter() - start
        if progress:
            progress(f"{name} {dtype}: done in {spent[str(dtype)]:.1f} s")
    return spent


def _in_workers(name: str, groups: list, jobs: int, progress) -> None:
    """Compile ``groups`` (``(dtype, kinds)`` pairs, costliest first) in ``jobs`` worker processes
    (``python -m polymm.compilation``): each takes the next group as it finishes one, says each
    kernel as it is ready (relayed to ``progress``), and ends when none is left. One process per
    job, not per group: a process's start, imports and first compile cost about a second (the
    2-core Xeon, 2026-12-01). A worker sees this process's import path."""
    if not groups:
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    todo = list(reversed(groups))
    lock = threading.Lock()

    def work():
        cmd = [sys.executable, "-m", "polymm.compilation", name]
        with (
            tempfile.TemporaryFile("w+") as errors,  # a file, not a pipe: a chatty worker cannot block on it
            subprocess.Popen(
                cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
            ) as worker,
        ):
            while True:
                with lock:
                    if not todo:
                        break
                    dtype, kinds = todo.pop()
                try:
                    worker.stdin.write(f"{dtype} {','.join(kinds)}\n")
                    worker.stdin.flush()
                except OSError:  # it has ended: the rest is compiled in this process
                    break
                for line in worker.stdout:  # "DTYPE KIND SECONDS" a kernel, then "done"
                    if line.strip() == "done":
                        break
                    said = line.split()  # anything else a library printed is not progress
                    if progress and len(said) == 3:
                        progress(f"{name} {said[0]}: {said[1]} ready ({said[2]} s, in worker {worker.pid})")
                else:
                    break
            try:
                worker.stdin.close()
            except OSError:  # it ended first (it failed: said below)
                pass
            failed = worker.wait() != 0
            errors.seek(0)
            why = (errors.read().strip().splitlines() or [f"exit status {worker.returncode}"])[-1]
            if failed and progress:
                progress(f"{name}: worker {worker.pid} failed ({why}); what it did not compile is compiled here")

    with ThreadPoolExecutor(max_workers=min(jobs, len(groups))) as pool:
        for future in [pool.submit(work) for _ in range(min(jobs, len(groups)))]:
            future.result()


def products(name: str, dtype):
    """A few products of growing size on backend ``name``: what a backend without ``warmup`` compiles on use."""
    from .dispatch import matmul

    for m, k, n in ((4, 4, 4), (1, 300, 300), (300, 300, 1), (256, 256, 256)):
        matmul(np.ones((m, k), dtype), np.ones((k, n), dtype), backend=name)
        yield f"{m}x{k}x{n}"


if __name__ == "__main__":  # a worker of warmup(jobs=...): BACKEND; a line "DTYPE KIND,KIND" a group
    from .registry import get_backend

    _impl = get_backend(sys.argv[1])
    for _line in sys.stdin:
        _name, _kinds = _line.split()
        _last = time.perf_counter()
        for _kind in _impl.warmup(_dtypes_named(_impl, [_name])[0], _kinds.split(",")):
            print(_name, _kind, f"{time.perf_counter() - _last:.1f}", flush=True)
            _last = time.perf_counter()
        print("done", flush=True)
