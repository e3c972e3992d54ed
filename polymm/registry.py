"""Backend registry: entry points, runtime registration and scoped selection.

Built-in backends and third-party ones arrive the same way, through the
entry-point group ``polymm.backends``.  Nothing is imported until a backend is
needed or listed (listing reads ``polymm.backend_info`` entry points, else the
factory's attributes, and makes no backend); a plugin that fails to import or
to initialise is recorded as unavailable with its error and never breaks
``import polymm``.  Which backend computes an array library by default is
declared by the backends themselves (``default_for``, ``priority``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import traceback
from importlib.metadata import entry_points

import numpy as np

from .backend import Backend, BackendUnavailable

__all__ = [
    "BackendInfo",
    "backends",
    "default_backend",
    "get_backend",
    "register_backend",
    "use_backend",
    "selected_backend",
]

ENTRY_POINT_GROUP = "polymm.backends"
#: Optional, networkx-style: ``name = "pkg:info"``, a callable returning the backend's
#: listing attributes as a dict, so listing need not import a heavy package.
INFO_ENTRY_POINT_GROUP = "polymm.backend_info"
ENV_VAR = "POLYMM_BACKEND"

#: What a backend's listing says, read without making it, and the defaults of :class:`Backend`.
_META_DEFAULTS = {
    "array_library": Backend.array_library,
    "default_for": Backend.default_for,
    "priority": Backend.priority,
    "algorithms": Backend.algorithms,
}


class BackendInfo:
    """What :func:`polymm.backends` reports about one backend.

    ``name``, ``origin``, ``array_library``, ``default_for``, ``priority`` and
    ``algorithms`` come from the backend's listing, without making it.
    ``available``, ``reason``, ``devices``, ``dtypes``, ``algorithm_dtypes`` (algorithms
    that serve fewer dtypes than ``dtypes``, with theirs: ``image`` has no 64-bit texels, and
    none on a device without images) and ``precisions`` (the precision modes the backend
    accelerates) need the backend made: the first of them asked probes it (once per process;
    later listings reuse it).
    """

    def __init__(
        self,
        name,
        available=None,
        reason=None,
        origin="",
        dtypes=(),
        algorithms=(),
        devices=None,
        *,
        array_library="numpy",
        default_for=(),
        priority=0,
        probe=None,
    ):
        self.name, self.origin, self.algorithms = name, origin, tuple(algorithms)
        self.array_library, self.default_for, self.priority = array_library, tuple(default_for), priority
        self._probed = None if available is None else (available, reason, list(devices or []), tuple(dtypes), {}, ())
        self._probe = probe

    def _state(self):
        if self._probed is None:
            self._probed = self._probe()
        return self._probed

    @property
    def available(self) -> bool:
        return self._state()[0]

    @property
    def reason(self) -> str | None:
        return self._state()[1]

    @property
    def devices(self) -> list[str]:
        return self._state()[2]

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Names of the dtypes the backend computes (empty when unavailable)."""
        return self._state()[3]

    @property
    def algorithm_dtypes(self) -> dict[str, tuple[str, ...]]:
        """Algorithms serving only some of ``dtypes``, with the names of those they serve."""
        return self._state()[4]

    @property
    def precisions(self) -> tuple[str, ...]:
        """Precision modes (:mod:`polymm.precision`) the backend accelerates; others run at full precision."""
        return self._state()[5]

    def as_dict(self) -> dict:
        keys = ("name", "available", "reason", "origin", "array_library", "priority")
        return {k: getattr(self, k) for k in keys} | {
            "default_for": list(self.default_for),
            "algorithms": list(self.algorithms),
            "dtypes": list(self.dtypes),
            "devices": self.devices,
            "algorithm_dtypes": {k: list(v) for k, v in self.algorithm_dtypes.items()},
            "precisions": list(self.precisions),
        }

    def __repr__(self):
        state = (
            "not probed" if self._probed is None else ("available" if self.available else f"unavailable: {self.reason}")
        )
        return f"BackendInfo({self.name!r}, {state}, array_library={self.array_library!r})"


def _describe_error(exc) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} (in {where.filename}:{where.lineno})"


class _Entry:
    """One registered backend: how to make it and list it, and the outcomes once known."""

    __slots__ = ("name", "load", "origin", "info", "instance", "error", "meta", "probed", "lock")

    def __init__(self, name, load, origin, info=None):
        self.name, self.load, self.origin, self.info = name, load, origin, info
        self.instance = None
        self.error: str | None = None
        self.meta: dict | None = None
        self.probed = None
        self.lock = threading.Lock()

    def resolve(self):
        if self.instance is None and self.error is None:
            with self.lock:
                if self.instance is None and self.error is None:
                    try:
                        factory = self.load()
                        instance = factory() if callable(factory) else factory
                        if "auto" not in instance.algorithms:
                            raise TypeError(
                                f"its algorithms {tuple(instance.algorithms)} lack 'auto', which every backend must offer"
                            )
                        instance.name = self.name
                        self.instance = instance
                    except BackendUnavailable as exc:
                        self.error = str(exc) or type(exc).__name__
                    except Exception as exc:  # a broken plugin must not break polymm
                        self.error = _describe_error(exc)
        return self.instance

    def listing(self) -> dict:
        """The listing attributes: from the info entry point, else the factory's attributes."""
        if self.meta is None:
            source = None
            try:
                if self.info is not None:
                    source = self.info()
                    source = source() if callable(source) else source
                    found = {k: source.get(k, v) for k, v in _META_DEFAULTS.items()}
                else:
                    source = self.load()
                    found = {k: getattr(source, k, v) for k, v in _META_DEFAULTS.items()}
            except Exception as exc:  # reported as the reason once the backend is probed
                found = dict(_META_DEFAULTS, error=_describe_error(exc))
            found["default_for"] = tuple(found["default_for"])
            self.meta = found
        return self.meta

    def probe(self):
        """(available, reason, devices, dtype names, algorithm dtypes, precisions), asked of the backend once."""
        if self.probed is None:
            backend = self.resolve()
            if backend is None:
                self.probed = (False, self.error, [], (), {}, ())
            else:
                try:
                    dtypes = tuple(str(np.dtype(d)) for d in backend.dtypes())
                    served = {
                        algorithm: tuple(str(np.dtype(d)) for d in some)
                        for algorithm, some in getattr(backend, "algorithm_dtypes", dict)().items()
                    }
                    precisions = tuple(getattr(backend, "precisions", ()))
                    self.probed = (True, None, list(backend.devices()), dtypes, served, precisions)
                except Exception as exc:
                    self.probed = (False, f"{type(exc).__name__}: {exc}", [], (), {}, ())
        return self.probed

    def describe(self) -> BackendInfo:
        meta = self.listing()
        return BackendInfo(
            self.name,
            origin=self.origin,
            algorithms=tuple(meta["algorithms"]),
            array_library=meta["array_library"],
            default_for=meta["default_for"],
            priority=meta["priority"],
            probe=self.probe,
        )


_lock = threading.Lock()
_entries: dict[str, _Entry] | None = None
#: The default backend of each array library, chosen once (cleared by register_backend).
_defaults: dict[str, str] = {}


def _registry() -> dict[str, _Entry]:
    global _entries
    if _entries is None:
        with _lock:
            if _entries is None:
                infos = {ep.name: ep.load for ep in entry_points(group=INFO_ENTRY_POINT_GROUP)}
                found = {}
                for ep in entry_points(group=ENTRY_POINT_GROUP):
                    dist = getattr(ep, "dist", None)
                    origin = f"entry point {ep.value}" + (f" ({dist.name} {dist.version})" if dist else "")
                    found.setdefault(ep.name, _Entry(ep.name, ep.load, origin, infos.get(ep.name)))
                _entries = found
    return _entries


def register_backend(name: str, factory, *, replace: bool = False) -> None:
    """Register a backend at run time; ``factory()`` is called when it is first needed.

    Its listing (``array_library``, ``default_for``, ``priority``, ...) is read from
    ``factory``'s attributes.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"backend name must be a non-empty string, got {name!r}")
    registry = _registry()
    if name in registry and not replace:
        raise ValueError(f"a backend named {name!r} is already registered; pass replace=True to replace it")
    registry[name] = _Entry(name, lambda: factory, "register_backend()")
    _defaults.clear()
    _plain_entries.clear()
    _replays.clear()


#: (backend name, library, algorithm, dtype) -> the callable that computes one 2-D product of a
#: host library (cleared by register_backend).
_plain_entries: dict = {}
#: The launches the short path replays (``polymm.dispatch._replay_key`` -> result shape, launch):
#: each belongs to the backend instance that planned it (cleared by register_backend, which may
#: replace that backend under its name).
_replays: dict = {}


def plain_entry(name: str, kind, algorithm: str, dtype, like):
    """What computes ``out = a @ b`` for 2-D host arrays (``kind.views``) of ``dtype`` on backend
    ``name`` -- its ``matmul_2d``, or ``matmul`` on batches of one -- or None when that backend
    does not compute on ``kind``'s arrays or lacks ``algorithm``.  Checked once per key: these
    checks cost more than a 4x4 product."""
    key = (name, kind.name, algorithm, dtype)
    found = _plain_entries.get(key)
    if found is None:
        impl = get_backend(name)
        if impl.array_library != kind.name or algorithm not in impl.algorithms:
            return None
        impl.check_dtype(dtype, like)  # raises for a dtype the backend lacks: not cached
        found = getattr(impl, "matmul_2d", None)
        if found is None:
            found = lambda a, b, out, alg, _mm=impl.matmul: _mm(a[None], b[None], out[None], alg)  # noqa: E731
        _plain_entries[key] = found
    return found


def _known() -> str:
    return ", ".join(sorted(_registry())) or "(none)"


#: The project's own backend packages, by the backend name each registers: what an unknown
#: name is told to install (a core-only install knows only ``cpu``).
FIRST_PARTY = {"opencl": "polymm-opencl", "cuda": "polymm-cuda"}


def get_backend(name: str):
    """The backend instance named ``name``, or a clear error (unknown / unavailable)."""
    entry = (_entries or _registry()).get(name)
    if entry is not None and entry.instance is not None:  # the hot path: already made
        return entry.instance
    if entry is None:
        if not isinstance(name, str):
            raise TypeError(f"polymm: a backend is named by a string, got {type(name).__name__} {name!r}")
        plugin = FIRST_PARTY.get(name)
        hint = f"; {name!r} is provided by the {plugin} package: pip install {plugin}" if plugin else ""
        raise ValueError(f"unknown polymm backend {name!r}; known backends: {_known()}{hint}")
    backend = entry.resolve()
    if backend is None:
        raise BackendUnavailable(f"polymm backend {name!r} is unavailable: {entry.error}")
    return backend


def backend_factory(name: str):
    """The class (factory) registered as ``name``, imported but not instantiated (a backend's
    module may register planner entries on import), or None when unknown or not importable."""
    entry = _registry().get(name)
    if entry is None:
        return None
    try:
        return entry.load()
    except Exception:  # noqa: BLE001 - a broken plugin is reported where it is used, not here
        return None


def backends() -> list[BackendInfo]:
    """Every known backend with its listing; nothing is imported beyond what listing needs.

    ``available``, ``reason`` and ``devices`` probe a backend on first access
    (once per process).  Never raises for a broken plugin: its failure is its ``reason``.
    """
    return [entry.describe() for _, entry in sorted(_registry().items())]


def default_backend(library: str) -> str:
    """The backend for arrays of ``library`` when none was chosen: the available one of
    highest ``priority`` among those whose ``default_for`` names the library."""
    name = _defaults.get(library)
    if name is not None:
        return name
    registry = _registry()
    candidates = sorted(
        (-entry.listing()["priority"], n) for n, entry in registry.items() if library in entry.listing()["default_for"]
    )
    if not candidates:
        raise TypeError(
            f"polymm.matmul: no installed backend computes on {library} arrays by default "
            f"(known backends: {_known()}); name one with backend=... or install one for {library}"
        )
    name = next((n for _, n in candidates if registry[n].resolve() is not None), candidates[0][1])
    _defaults[library] = name
    return name


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
    """A ``ValueError`` listing ``impl``'s algorithms unless it offers ``algorithm`` (a
    ``TypeError`` unless it is a string)."""
    if algorithm not in impl.algorithms:
        if not isinstance(algorithm, str):
            raise TypeError(f"polymm.matmul: algorithm must be a string, got {type(algorithm).__name__} {algorithm!r}")
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
    return _defaults.get(library) or default_backend(library)


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
