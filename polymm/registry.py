"""Backend registry: entry points, runtime registration and scoped selection.

Built-in backends and third-party ones arrive the same way, through the
entry-point group ``polymm.backends``.  Nothing is imported until a backend is
needed or listed (listing reads ``polymm.backend_info`` entry points, else the
factory's attributes, and makes no backend); a plugin that fails to import or
to initialise is recorded as unavailable with its error, named by its
distribution and entry point, and never breaks ``import polymm``.

Which backend computes an array library by default is declared by the backends
(``default_for``, ``priority``), but installing a plugin never silently changes who
computes your arrays: a declaration counts only from a first-party backend
(:data:`FIRST_PARTY`) or from the distribution that brings that library's adapter.
Any other backend becomes a default only when the user opts in
(:func:`set_default_backend`, or ``POLYMM_DEFAULT_BACKENDS=numpy=mine``), or, where
no trusted backend can serve the library at all, with a one-time
:class:`DefaultBackendWarning` that says how to make the choice explicit or undo it.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import re
import sys
import threading
import traceback
import warnings
from importlib.metadata import entry_points

import numpy as np

from .backend import Backend, BackendUnavailable

__all__ = [
    "BackendInfo",
    "DefaultBackendWarning",
    "backends",
    "default_backend",
    "defaults_in_use",
    "plugin_of",
    "set_default_backend",
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
#: The user's opt-in to third-party defaults: ``numpy=mine,cupy=theirs`` (read when polymm first
#: picks the default for a library; :func:`set_default_backend` does the same at run time).
DEFAULTS_ENV_VAR = "POLYMM_DEFAULT_BACKENDS"

#: The project's own backend packages, by the backend name each registers: their ``default_for``
#: counts without the user's opt-in, and an unknown name is told which package to install.
FIRST_PARTY = {"cpu": "polymm", "opencl": "polymm-opencl", "cuda": "polymm-cuda"}


class DefaultBackendWarning(UserWarning):
    """A third-party backend computes an array library's arrays by default (no trusted backend
    serves them) without the user having opted in: said once per library, with how to undo it."""


def _normalized(dist: str | None) -> str | None:
    """A distribution's name as packaging compares them (``polymm_opencl`` is ``polymm-opencl``)."""
    return None if dist is None else re.sub(r"[-_.]+", "-", dist).lower()


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
    ``algorithms`` come from the backend's listing, without making it; ``distribution``,
    ``version`` and ``entry_point`` name the plugin that brings it (None for a backend
    registered at run time), ``first_party`` whether polymm ships it.
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
        distribution=None,
        version=None,
        entry_point=None,
        first_party=False,
    ):
        self.name, self.origin, self.algorithms = name, origin, tuple(algorithms)
        self.distribution, self.version, self.entry_point = distribution, version, entry_point
        self.first_party = first_party
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
        keys += ("distribution", "version", "entry_point", "first_party")
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


#: Frames of the machinery that loads a plugin, never where its fault lies.
_LOADERS = (os.sep + "importlib" + os.sep, os.path.join("polymm", "registry.py"))


def _describe_error(exc) -> str:
    """``Type: message (in file:line)``, the line being the last one of the plugin's own code:
    frames of the registry and of importlib (a bad entry-point attribute) are passed over."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not any(x in f.filename for x in _LOADERS)]
    where = f" (in {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _defined_at(obj) -> str:
    """``file:line`` where ``obj``'s class is defined, or ''."""
    try:
        cls = obj if inspect.isclass(obj) else type(obj)
        return f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (TypeError, OSError):
        return ""


class _Entry:
    """One registered backend: how to make it and list it, and the outcomes once known."""

    __slots__ = ("name", "load", "origin", "info", "instance", "error", "meta", "probed", "lock", "dist", "version")
    __slots__ += ("spec",)

    def __init__(self, name, load, origin, info=None, dist=None, version=None, spec=None):
        self.name, self.load, self.origin, self.info = name, load, origin, info
        #: the distribution and version that bring it, and its entry point (``name = module:attr``)
        self.dist, self.version, self.spec = dist, version, spec
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
                            where = _defined_at(instance)
                            self.error = (
                                f"its algorithms {tuple(instance.algorithms)} lack 'auto', which every backend must "
                                f"offer (class {type(instance).__qualname__}" + (f" at {where})" if where else ")")
                            )
                            return None
                        instance.name = self.name
                        self.instance = instance
                    except BackendUnavailable as exc:
                        self.error = str(exc) or type(exc).__name__
                    except Exception as exc:  # a broken plugin must not break polymm
                        self.error = _describe_error(exc)
        return self.instance

    def source(self) -> str:
        """Who brings this backend, for messages: its entry point and distribution."""
        if self.spec is None:
            return self.origin
        return f"entry point '{self.spec}'" + (f" of distribution {self.dist} {self.version}" if self.dist else "")

    def plugin(self) -> str:
        return f"polymm backend {self.name!r} ({self.source()})"

    def first_party(self) -> bool:
        """Is this the project's own backend of that name (by name *and* distribution)?"""
        return self.dist is not None and _normalized(FIRST_PARTY.get(self.name)) == _normalized(self.dist)

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
            if not isinstance(found["default_for"], (tuple, list)):  # ("numpy") is a string, not a tuple
                found["default_for"] = ()
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
                    self.probed = (False, _describe_error(exc), [], (), {}, ())
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
            distribution=self.dist,
            version=self.version,
            entry_point=self.spec,
            first_party=self.first_party(),
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
                    name, version = (dist.name, dist.version) if dist else (None, None)
                    origin = f"entry point {ep.value}" + (f" ({name} {version})" if dist else "")
                    spec = f"{ep.name} = {ep.value}"
                    found.setdefault(ep.name, _Entry(ep.name, ep.load, origin, infos.get(ep.name), name, version, spec))
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
    caller = sys._getframe(1)
    origin = f"registered at run time by register_backend() in {caller.f_code.co_filename}:{caller.f_lineno}"
    registry[name] = _Entry(name, lambda: factory, origin)
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


def plain_entry(name: str, kind, algorithm: str, dtype, like, batched: bool = False):
    """What computes ``out = a @ b`` for 2-D host arrays (``kind.views``) of ``dtype`` on backend
    ``name`` -- its ``matmul_2d``, or ``matmul`` on batches of one -- or None when that backend
    does not compute on ``kind``'s arrays or lacks ``algorithm``; with ``batched``, for 3-D
    operands (its ``matmul``).  Checked once per key: these checks cost more than a 4x4 product."""
    key = (name, kind.name, algorithm, dtype, batched)
    found = _plain_entries.get(key)
    if found is None:
        impl = get_backend(name)
        if impl.array_library != kind.name or algorithm not in impl.algorithms:
            return None
        impl.check_dtype(dtype, like)  # raises for a dtype the backend lacks: not cached
        found = impl.matmul if batched else getattr(impl, "matmul_2d", None)
        if found is None:
            found = lambda a, b, out, alg, _mm=impl.matmul: _mm(a[None], b[None], out[None], alg)  # noqa: E731
        _plain_entries[key] = found
    return found


def _known() -> str:
    return ", ".join(sorted(_registry())) or "(none)"


def plugin_of(name: str) -> str:
    """``polymm backend 'x' (entry point 'x = pkg:Cls' of distribution pkg 1.0)``: who to blame."""
    entry = (_entries or _registry()).get(name)
    return entry.plugin() if entry is not None else f"polymm backend {name!r}"


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
        raise BackendUnavailable(f"polymm backend {name!r} is unavailable: {entry.error} [{entry.source()}]")
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
    """The backend for arrays of ``library`` when none was chosen (chosen once, then cached):

    1. the user's opt-in, :func:`set_default_backend` or ``POLYMM_DEFAULT_BACKENDS``;
    2. the available *trusted* backend of highest ``priority`` whose ``default_for`` names the
       library: a first-party one (:data:`FIRST_PARTY`), or one from the distribution that
       brings the library's adapter (a plugin's own array type);
    3. only where no trusted one is available, an untrusted declaration, announced once
       (:class:`DefaultBackendWarning`).
    """
    name = _defaults.get(library)
    if name is not None:
        return name
    name = _opted_in().get(library)
    if name is not None:
        if name not in _registry():
            raise ValueError(
                f"{DEFAULTS_ENV_VAR} or set_default_backend() makes unknown backend {name!r} the default for "
                f"{library} arrays; known backends: {_known()}"
            )
    else:
        name = _declared_default(library)
    _defaults[library] = name
    return name


def _declared_default(library: str) -> str:
    """Step 2 and 3 of :func:`default_backend`."""
    registry = _registry()
    declared = [
        n
        for _, n in sorted(
            (-e.listing()["priority"], n) for n, e in registry.items() if library in e.listing()["default_for"]
        )
    ]
    if not declared:
        raise TypeError(
            f"polymm.matmul: no installed backend computes on {library} arrays by default "
            f"(known backends: {_known()}); name one with backend=... or install one for {library}"
        )
    trusted = [n for n in declared if _trusted(registry[n], library)]
    for name in trusted:
        if registry[name].resolve() is not None:
            return name
    for name in declared:
        if name not in trusted and registry[name].resolve() is not None:
            _announce(registry[name], library, trusted)
            return name
    return declared[0]  # none available: using it raises with its reason


def _trusted(entry: _Entry, library: str) -> bool:
    """May ``entry``'s ``default_for`` claim ``library`` without the user's opt-in?"""
    if entry.first_party():
        return True
    return entry.dist is not None and _adapter_dists().get(library) == _normalized(entry.dist)


_adapter_dist_cache: dict | None = None


def _adapter_dists() -> dict[str, str]:
    """The distribution that brings each array library's adapter (group ``polymm.arrays``), read once."""
    global _adapter_dist_cache
    if _adapter_dist_cache is None:
        found = {}
        for ep in entry_points(group="polymm.arrays"):
            dist = getattr(ep, "dist", None)
            found.setdefault(ep.name, _normalized(dist.name) if dist else None)
        _adapter_dist_cache = found
    return _adapter_dist_cache


def _announce(entry: _Entry, library: str, trusted: list[str]) -> None:
    """Say, once per library, that an untrusted backend now computes its arrays, and how to undo it."""
    why = (
        f"the trusted backend(s) {', '.join(map(repr, trusted))} are unavailable"
        if trusted
        else f"no first-party backend computes {library} arrays"
    )
    undo = f" or uninstall {entry.dist}" if entry.dist else ""
    warnings.warn(
        f"polymm: {library} arrays are computed by {entry.plugin()}, which declares itself their default "
        f"({why}). To make this choice explicit and silence this warning, set "
        f"{DEFAULTS_ENV_VAR}={library}={entry.name} or call polymm.set_default_backend({library!r}, "
        f"{entry.name!r}); to undo it, choose another backend with backend=..., polymm.use_backend(...) or "
        f"POLYMM_BACKEND{undo}.",
        DefaultBackendWarning,
        stacklevel=2,
    )


#: Defaults the user chose with :func:`set_default_backend` (library -> backend name).
_chosen_defaults: dict[str, str] = {}


def _opted_in() -> dict[str, str]:
    """The user's choices: :func:`set_default_backend`'s, over ``POLYMM_DEFAULT_BACKENDS``'s."""
    text = os.environ.get(DEFAULTS_ENV_VAR, "")
    found = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        library, sep, name = (s.strip() for s in item.partition("="))
        if not (sep and library and name):
            raise ValueError(f"{DEFAULTS_ENV_VAR}={text!r}: expected library=backend pairs, e.g. numpy=mine,cupy=cuda")
        found[library] = name
    return found | _chosen_defaults


def set_default_backend(library: str, name: str | None) -> None:
    """Make backend ``name`` the default for ``library``'s arrays (``"numpy"``, ``"cupy"``, ...),
    over what the backends declare: the opt-in a third-party backend needs to take over NumPy's
    products.  ``None`` forgets the choice.  Process-wide; :func:`use_backend` scopes instead."""
    if name is None:
        _chosen_defaults.pop(library, None)
    else:
        if name not in _registry():
            raise ValueError(f"unknown polymm backend {name!r}; known backends: {_known()}")
        _chosen_defaults[library] = name
    _defaults.clear()


def defaults_in_use() -> dict[str, tuple[str | None, str]]:
    """Which backend computes each array library's arrays when a call names none, and why:
    ``{library: (backend name or None, reason)}`` over every library some backend declares
    (this makes the candidates, to know which are available)."""
    libraries = {"numpy"}
    for entry in _registry().values():
        libraries.update(entry.listing()["default_for"])
    found = {}
    for library in sorted(libraries):
        scoped, env = _scoped.get(), _env_backend()
        if scoped or env:
            found[library] = (scoped or env, "use_backend()" if scoped else f"{ENV_VAR}={env}")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DefaultBackendWarning)
                name = default_backend(library)
        except (TypeError, ValueError) as exc:
            found[library] = (None, str(exc))
            continue
        entry = _registry()[name]
        if library in _opted_in():
            why = f"opted in ({DEFAULTS_ENV_VAR} or set_default_backend)"
        elif _trusted(entry, library):
            why = "first-party default" if entry.first_party() else "the plugin that brings these arrays"
        else:
            why = "declared by a third-party plugin, unconfirmed (see DefaultBackendWarning)"
        if entry.resolve() is None:
            why += "; unavailable (see its reason)"
        found[library] = (name, why)
    return found


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
