"""Backend registry: entry points, runtime registration and scoped selection.

Built-in backends and third-party ones arrive the same way, through the
entry-point group ``polymm.backends``.  Nothing is imported until a backend is
needed; a plugin that fails to import or to initialise is recorded as
unavailable with its error and never breaks ``import polymm``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import traceback
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from .backend import BackendUnavailable

__all__ = ["BackendInfo", "backends", "get_backend", "register_backend", "use_backend", "selected_backend"]

ENTRY_POINT_GROUP = "polymm.backends"
ENV_VAR = "POLYMM_BACKEND"

#: Which backend computes on an array library when nothing else was chosen.
DEFAULT_FOR_LIBRARY = {"numpy": "cpu", "cupy": "cuda", "pyopencl": "opencl"}


@dataclass
class BackendInfo:
    """What :func:`polymm.backends` reports about one backend."""

    name: str
    available: bool
    reason: str | None = None
    origin: str = ""
    dtypes: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = ()
    devices: list[str] = field(default_factory=list)


class _Entry:
    """One registered backend: how to make it, and the outcome once made."""

    __slots__ = ("name", "load", "origin", "instance", "error")

    def __init__(self, name, load, origin):
        self.name, self.load, self.origin = name, load, origin
        self.instance = None
        self.error: str | None = None

    def resolve(self):
        if self.instance is None and self.error is None:
            try:
                factory = self.load()
                instance = factory() if callable(factory) else factory
                instance.name = self.name
                self.instance = instance
            except BackendUnavailable as exc:
                self.error = str(exc) or type(exc).__name__
            except Exception as exc:  # a broken plugin must not break polymm
                where = traceback.extract_tb(exc.__traceback__)[-1]
                self.error = f"{type(exc).__name__}: {exc} (in {where.filename}:{where.lineno})"
        return self.instance


_lock = threading.Lock()
_entries: dict[str, _Entry] | None = None


def _registry() -> dict[str, _Entry]:
    global _entries
    if _entries is None:
        with _lock:
            if _entries is None:
                found = {}
                for ep in entry_points(group=ENTRY_POINT_GROUP):
                    dist = getattr(ep, "dist", None)
                    origin = f"entry point {ep.value}" + (f" ({dist.name} {dist.version})" if dist else "")
                    found.setdefault(ep.name, _Entry(ep.name, ep.load, origin))
                _entries = found
    return _entries


def register_backend(name: str, factory, *, replace: bool = False) -> None:
    """Register a backend at run time; ``factory()`` is called when it is first needed."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"backend name must be a non-empty string, got {name!r}")
    registry = _registry()
    if name in registry and not replace:
        raise ValueError(f"a backend named {name!r} is already registered; pass replace=True to replace it")
    registry[name] = _Entry(name, lambda: factory, "register_backend()")


def _known() -> str:
    return ", ".join(sorted(_registry())) or "(none)"


def get_backend(name: str):
    """The backend instance named ``name``, or a clear error (unknown / unavailable)."""
    entry = (_entries or _registry()).get(name)
    if entry is not None and entry.instance is not None:  # the hot path: already made
        return entry.instance
    if entry is None:
        raise ValueError(f"unknown polymm backend {name!r}; known backends: {_known()}")
    backend = entry.resolve()
    if backend is None:
        raise BackendUnavailable(f"polymm backend {name!r} is unavailable: {entry.error}")
    return backend


def backends() -> list[BackendInfo]:
    """Every known backend with availability, reason, dtypes, algorithms and devices.

    Never raises for a broken plugin: its failure is its ``reason``.
    """
    out = []
    for name, entry in sorted(_registry().items()):
        backend = entry.resolve()
        if backend is None:
            out.append(BackendInfo(name, False, entry.error, entry.origin))
            continue
        try:
            out.append(
                BackendInfo(
                    name,
                    True,
                    None,
                    entry.origin,
                    tuple(str(d) for d in backend.dtypes()),
                    tuple(backend.algorithms),
                    list(backend.devices()),
                )
            )
        except Exception as exc:
            out.append(BackendInfo(name, False, f"{type(exc).__name__}: {exc}", entry.origin))
    return out


_scoped: contextvars.ContextVar[str | None] = contextvars.ContextVar("polymm_backend", default=None)


@contextlib.contextmanager
def use_backend(name: str):
    """Choose the backend for the enclosed calls (thread- and task-local)."""
    if name not in _registry():
        raise ValueError(f"unknown polymm backend {name!r}; known backends: {_known()}")
    token = _scoped.set(name)
    try:
        yield
    finally:
        _scoped.reset(token)


def scoped_backend() -> str | None:
    """The backend chosen by the innermost :func:`use_backend` around this call, if any."""
    return _scoped.get()


def check_algorithm(impl, name: str, algorithm: str) -> None:
    """A ``ValueError`` listing ``impl``'s algorithms unless it offers ``algorithm``."""
    if algorithm not in impl.algorithms:
        raise ValueError(
            f"polymm.matmul: backend {name!r} has no algorithm {algorithm!r}; "
            f"choose one of {', '.join(map(repr, impl.algorithms))}"
        )


def selected_backend(explicit: str | None, library: str) -> str:
    """The backend name by the contract's order: argument, scope, environment, inputs' device."""
    if explicit is not None:
        return explicit
    name = _scoped.get()
    if name is not None:
        return name
    name = _env_backend()
    if name:
        return name
    return DEFAULT_FOR_LIBRARY.get(library, library)


try:  # os.environ.get encodes the key and decodes the value: ~1 us a call
    _ENV_DATA, _ENV_KEY = os.environ._data, os.environ.encodekey(ENV_VAR)
except AttributeError:  # not CPython's os.environ
    _ENV_DATA = None


def _env_backend() -> str | None:
    """``os.environ.get(ENV_VAR)``, read from the mapping ``os.environ`` keeps
    up to date (setenv, monkeypatch and ``del`` all go through it)."""
    if _ENV_DATA is None:
        return os.environ.get(ENV_VAR)
    value = _ENV_DATA.get(_ENV_KEY)
    return None if value is None else os.environ.decodevalue(value)
