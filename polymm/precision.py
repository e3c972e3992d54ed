"""Precision modes: how much float32 precision a caller is willing to give up for speed.

A mode names the *least* precision the caller accepts; a backend may always compute more
precisely.  ``"default"``: every dtype in its own precision (float32 in float32).
``"tf32"``: float32 products may read their inputs as TF32 (10 explicit mantissa bits, float32
accumulation), as tensor cores do.  ``"tf32x3"``: float32 accuracy from TF32 tensor cores,
each operand split into a high and a low TF32 part and three products summed
(``hi*hi + hi*lo + lo*hi``; ``lo*lo`` is below float32's rounding).  Modes affect float32 and
complex64 products only; every other dtype is computed as always.

Chosen per call (``polymm.matmul(..., precision=...)``) or for a scope
(:func:`use_precision`, like :func:`polymm.use_backend`).  Backends read the mode of the call
in progress with :func:`current`; those that ignore it compute at full precision, which is
always correct.  :func:`error_bound` is what each mode promises (the conformance suite checks
it, :mod:`polymm.testing.emulation` shows it in NumPy).
"""

from __future__ import annotations

import contextlib
import contextvars

__all__ = ["PRECISIONS", "current", "use_precision", "check_precision", "error_bound", "REDUCED_DTYPES"]

#: Every mode, from most to least precise.
PRECISIONS = ("default", "tf32x3", "tf32")
#: Dtypes whose products a mode may change (float32 arithmetic underneath).
REDUCED_DTYPES = ("float32", "complex64")
#: Spacing of TF32 numbers at 1: 10 explicit mantissa bits.
TF32_EPS = 2.0**-10

_scoped: contextvars.ContextVar[str] = contextvars.ContextVar("polymm_precision", default="default")


def check_precision(name) -> str:
    """``name`` if it is a mode, else a ``ValueError`` listing the valid ones (a ``TypeError``
    for what is not a string)."""
    if name not in PRECISIONS:
        if not isinstance(name, str):
            raise TypeError(f"polymm: a precision mode is a string, got {type(name).__name__} {name!r}")
        raise ValueError(f"unknown polymm precision {name!r}; choose one of {', '.join(map(repr, PRECISIONS))}")
    return name


def current() -> str:
    """The mode of the product being computed (for backends): the call's, else the scope's."""
    return _scoped.get()


@contextlib.contextmanager
def use_precision(name: str):
    """Accept ``name``'s precision for the enclosed calls (thread- and task-local)."""
    token = _scoped.set(check_precision(name))
    try:
        yield
    finally:
        _scoped.reset(token)


def error_bound(precision: str, k: int, eps: float) -> float:
    """Bound on ``|C - A @ B|`` relative to ``|A| @ |B|`` (elementwise) for a real dtype of
    machine epsilon ``eps`` and contraction length ``k``, as each mode promises.

    * ``default``: ``2 k eps``, the classical dot-product bound (with room for any summation order);
    * ``tf32``: plus ``2 * 2**-10``: each input truncated or rounded to TF32 is off by at most one
      TF32 spacing, so each product by two (TF32 products themselves are exact in float32);
    * ``tf32x3``: float32's bound for ``k + 4`` terms: the split leaves each operand off by at most
      ``2**-22`` relatively, and the dropped ``lo*lo`` term is as small, three such terms a product.
    """
    check_precision(precision)
    k = max(int(k), 1)
    if precision == "tf32":
        return 2 * k * eps + 2 * TF32_EPS
    if precision == "tf32x3":
        return 2 * (k + 4) * eps
    return 2 * k * eps
