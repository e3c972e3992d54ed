"""Precision modes: the NumPy emulation of TF32 and the 3-product split obeys the bounds
polymm.precision documents (and the bounds are tight enough to catch a wrong mode), and
backends see the mode of the call."""

from __future__ import annotations

import numpy as np
import pytest

import polymm
from polymm import precision
from polymm.precision import error_bound
from polymm.testing.emulation import emulated_matmul, round_tf32, split_tf32

EPS32 = float(np.finfo(np.float32).eps)
KS = (1, 3, 16, 100, 1000, 4096)


def _operands(rng, k, kind):
    if kind == "normal":
        return rng.standard_normal((24, k)), rng.standard_normal((k, 24))
    # every mantissa bit set at random, values in [1, 2) with random signs: worst for rounding
    signs = rng.choice([-1.0, 1.0], size=(24 + 24, k))
    mant = 1 + rng.integers(0, 2**23, size=(24 + 24, k)) / 2.0**23
    a = (signs * mant)[:24]
    return a, (signs * mant)[24:].T


def _relative_error(c, a, b):
    a64, b64 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    return np.abs(c - a64 @ b64) / (np.abs(a64) @ np.abs(b64))


@pytest.mark.parametrize("kind", ["normal", "full-mantissa"])
@pytest.mark.parametrize("mode", precision.PRECISIONS)
def test_emulated_modes_obey_their_documented_bounds(mode, kind):
    rng = np.random.default_rng(11)
    for k in KS:
        a, b = _operands(rng, k, kind)
        err = _relative_error(emulated_matmul(a, b, mode), a, b)
        assert err.max() <= error_bound(mode, k, EPS32), (mode, kind, k, err.max())


def test_tf32_is_really_less_precise_and_tf32x3_recovers_float32():
    rng = np.random.default_rng(3)
    a, b = _operands(rng, 64, "full-mantissa")
    tf32 = _relative_error(emulated_matmul(a, b, "tf32"), a, b).max()
    split = _relative_error(emulated_matmul(a, b, "tf32x3"), a, b).max()
    assert tf32 > error_bound("default", 64, EPS32)  # the float32 bound would catch a TF32 product
    assert split <= error_bound("default", 64, EPS32)  # the split is as good as float32 here


def test_round_tf32_ties_to_even_and_keeps_specials():
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-12 + 2.0**-20, np.inf, -np.inf, 3.4028235e38], np.float32)
    expected = np.array([1, 1 + 2.0**-9, 1, np.inf, -np.inf, np.inf], np.float32)
    np.testing.assert_array_equal(round_tf32(x), expected)
    assert np.isnan(round_tf32(np.float32(np.nan)))
    v = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    hi, lo = split_tf32(v)
    assert np.array_equal(round_tf32(hi), hi) and np.array_equal(round_tf32(lo), lo)
    assert np.all(np.abs(hi.astype(np.float64) + lo - v) <= 2.0**-22 * np.abs(v))


def test_backends_see_the_mode_of_the_call():
    seen = []

    class Recorder(polymm.Backend):
        precisions = ("tf32",)

        def matmul(self, a, b, out, algorithm):
            seen.append(precision.current())
            np.matmul(a, b, out=out)

    polymm.register_backend("precision-recorder", Recorder, replace=True)
    x = np.ones((3, 3), np.float32)
    polymm.matmul(x, x, backend="precision-recorder")
    polymm.matmul(x, x, backend="precision-recorder", precision="tf32x3")
    with polymm.use_precision("tf32"):
        polymm.matmul(x, x, backend="precision-recorder")
    assert seen == ["default", "tf32x3", "tf32"]
    assert precision.current() == "default"
    info = {i.name: i for i in polymm.backends()}
    assert info["precision-recorder"].precisions == ("tf32",)
    assert info["cpu"].precisions == ()  # computes every mode at full precision
