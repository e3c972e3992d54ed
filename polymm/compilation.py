"""Kernel compilation the user can see and schedule: a notice when a call compiles, and :func:`warmup`.

A first call that compiles kernels may take seconds; a library that stalls without a word looks
hung.  A backend calls :func:`compiling` just before it compiles (not when it loads from a cache):
one line per backend and dtype, once per process, on the ``polymm`` logger at WARNING, so that
Python's last-resort handler prints it to stderr with no logging set up (as JAX logs its
compiles).  Silence it with ``logging.getLogger("polymm").setLevel(logging.ERROR)``.  Each kernel
compiled is also logged, at DEBUG, by :func:`compiled` (what ``scripts/cold_start.py`` and the
tests count).
:func:`warmup` (and ``polymm warmup``) compiles chosen dtypes ahead of time, with progress.
"""

from __future__ import annotations

import logging
import threading
import time

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


def warmup(dtypes=DEFAULT_DTYPES, *, backend: str | None = None, progress=None) -> dict[str, float]:
    """Compile ``backend``'s kernels for ``dtypes`` now, so that no later call waits on a compile.

    ``dtypes``: a dtype, dtypes or names, a comma-separated string, or ``"all"``; ``backend``: a name (default:
    the one NumPy arrays get).  ``progress`` is called with one line per kernel made ready (the CLI
    prints them).  Backends with a ``warmup(dtype)`` generator say what they compile; others run a few
    products.  Returns the seconds spent per dtype.
    """
    from .registry import get_backend, selected_backend

    name = selected_backend(backend, "numpy")
    impl = get_backend(name)
    spent = {}
    for dtype in _dtypes_named(impl, dtypes):
        steps = impl.warmup(dtype) if hasattr(impl, "warmup") else products(name, dtype)
        start = last = time.perf_counter()
        for step in steps:
            now = time.perf_counter()
            if progress:
                progress(f"{name} {dtype}: {step} ready ({now - last:.1f} s)")
            last = now
        spent[str(dtype)] = time.perf_counter() - start
        if progress:
            progress(f"{name} {dtype}: done in {spent[str(dtype)]:.1f} s")
    return spent


def products(name: str, dtype):
    """A few products of growing size on backend ``name``: what a backend without ``warmup`` compiles on use."""
    from .dispatch import matmul

    for m, k, n in ((4, 4, 4), (1, 300, 300), (300, 300, 1), (256, 256, 256)):
        matmul(np.ones((m, k), dtype), np.ones((k, n), dtype), backend=name)
        yield f"{m}x{k}x{n}"
