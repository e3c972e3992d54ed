"""The precision modes emulated in NumPy, to show (and test) the error each one promises.

TF32 keeps float32's 8-bit exponent and 10 of its 23 mantissa bits; a product of two TF32
numbers is exact in float32, so a tensor-core TF32 product with float32 accumulation is a
float32 product of inputs rounded to TF32 (:func:`round_tf32`).  ``tf32x3`` splits each
operand into ``hi = tf32(x)`` and ``lo = tf32(x - hi)`` and sums ``hi*hi + hi*lo + lo*hi``
in float32 (:func:`split_tf32`); the emulation runs the three products as one float32
product of depth ``3 K``, which is how a kernel accumulates them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["round_tf32", "split_tf32", "emulated_matmul"]

_DROPPED_BITS = 23 - 10  # float32 mantissa bits that TF32 does not keep


def round_tf32(x) -> np.ndarray:
    """``x`` (as float32) rounded to the nearest TF32 number, ties to even; Inf and NaN kept."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    half = np.uint64((1 << (_DROPPED_BITS - 1)) - 1)
    odd = (bits >> np.uint64(_DROPPED_BITS)) & np.uint64(1)
    rounded = (bits + half + odd) & np.uint64(~((1 << _DROPPED_BITS) - 1) & 0xFFFFFFFF)
    special = (bits & np.uint64(0x7F800000)) == np.uint64(0x7F800000)  # Inf, NaN: unchanged
    return np.where(special, bits, rounded).astype(np.uint32).view(np.float32)


def split_tf32(x) -> tuple[np.ndarray, np.ndarray]:
    """``(hi, lo)``, both TF32 numbers, with ``hi + lo`` within ``2**-22 |x|`` of ``x``."""
    x = np.asarray(x, np.float32)
    hi = round_tf32(x)
    with np.errstate(invalid="ignore", over="ignore"):
        lo = round_tf32(x - hi)
    return hi, lo


def emulated_matmul(a, b, precision: str) -> np.ndarray:
    """``a @ b`` for 2-D float32 ``a``, ``b`` as a backend in ``precision`` computes it."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    if precision == "default":
        return a @ b
    if precision == "tf32":
        return round_tf32(a) @ round_tf32(b)
    if precision == "tf32x3":
        a_hi, a_lo = split_tf32(a)
        b_hi, b_lo = split_tf32(b)
        # the small products first, then hi*hi, all in one float32 accumulation
        return np.concatenate([a_hi, a_lo, a_hi], axis=1) @ np.concatenate([b_lo, b_hi, b_hi], axis=0)
    raise ValueError(f"unknown precision {precision!r}")
