"""Test mode: what the conformance suite watches while a backend computes.

:func:`watching` wraps one backend's ``matmul`` (and ``matmul_2d``) and its array adapters'
``empty`` for the length of a test, as attributes of those objects, so nothing changes, and
nothing costs, outside the suite:

* every array the core allocates for a result is filled with :func:`~polymm.testing.poison`
  first, so elements a backend leaves unwritten show as wrong values;
* a ``matmul`` that returns something other than ``None`` (or ``out``) is told that the
  product belongs in ``out``;
* a ``matmul`` that leaves a NumPy ``out`` holding nothing but the poison is told so by name,
  instead of as hundreds of value mismatches.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import registry
from ..arrays import kind_named
from .reference import poison

__all__ = ["unwritten", "watching"]

_METHODS = ("matmul", "matmul_2d")


@contextlib.contextmanager
def watching(name: str):
    """Watch backend ``name`` (see the module's notes) inside the ``with`` block."""
    impl = registry.get_backend(name)
    kinds = {id(k): k for k in (kind_named("numpy"), kind_named(impl.array_library))}.values()
    undo = []
    for method in _METHODS:
        if getattr(impl, method, None) is not None:
            undo.append((impl, method, impl.__dict__.get(method)))
            setattr(impl, method, _checked(name, method, getattr(impl, method)))
    for kind in kinds:
        undo.append((kind, "empty", kind.__dict__.get("empty")))
        kind.empty = _poisoned(kind, kind.empty, impl)
    _forget()
    try:
        yield
    finally:
        for owner, attribute, before in reversed(undo):
            if before is None:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, before)
        _forget()


def _forget() -> None:
    """Drop the dispatcher's caches of bound methods and launches, so they go through the wrappers."""
    registry._plain_entries.clear()
    registry._replays.clear()


def _poisoned(kind, empty, impl):
    """``kind.empty``, its new arrays filled with the poison (through the backend for device arrays)."""

    def poisoned_empty(shape, dtype, like):
        filled = poison(shape, dtype)
        if kind.views:
            return filled
        new = empty(shape, dtype, like)
        if filled.size:  # nothing to fill in an empty result (and device copies of 0 bytes fail)
            kind.assign(new, impl.from_numpy(filled))
        return new

    return poisoned_empty


def _checked(name, method, compute):
    """``compute`` (a backend's ``matmul`` or ``matmul_2d``), failing by name when it returns a value
    or leaves ``out`` unwritten."""

    def checked(a, b, out, algorithm):
        returned = compute(a, b, out, algorithm)
        if returned is not None and returned is not out:
            raise AssertionError(
                f"backend {name!r}: {method}() returned a {type(returned).__name__} instead of None: it must "
                "write the product into the `out` it is given (polymm ignores what it returns)"
            )
        if unwritten(out, a, b):
            raise AssertionError(
                f"backend {name!r}: {method}() left `out` unwritten: all {out.size} elements of the "
                f"{out.shape} {out.dtype} output still hold the poison the suite filled it with; it must "
                "write out[i] = a[i] @ b[i] into that very array, in place"
            )
        return returned

    return checked


@np.errstate(all="ignore")
def unwritten(out, a, b) -> bool:
    """Does the NumPy ``out`` still hold only poison, where no correct product could? (4 elements at
    least; not bool, whose products are often all True; floats only from finite inputs.)"""
    if not isinstance(out, np.ndarray) or out.size < 4 or out.dtype == np.bool_:
        return False
    if out.dtype.kind in "fc" or out.dtype.name == "bfloat16":
        if not np.isnan(out).all():
            return False
        return bool(np.isfinite(a).all() and np.isfinite(b).all())
    if out.dtype.kind not in "iu":
        return False
    return bool((out == poison((), out.dtype)).all())
