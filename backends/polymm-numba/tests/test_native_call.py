"""A compiled function called by its address: arrays and integers arrive as they were sent, and
an exception it raises reaches the caller's caller."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba import types

from polymm_numba.native_call import address, call_native


@numba.njit(types.void(types.float64[:, :], types.Array(types.float64, 1, "C"), types.int64))
def _row_sums(a, out, scale):
    if scale < 0:
        raise ValueError("negative scale")
    for i in range(a.shape[0]):
        out[i] = scale * a[i].sum()


@numba.njit
def _caller(fn, a, out, scale):
    call_native(fn, (a, out, np.int32(scale)))  # a 32-bit integer arrives as the int64 expected


def test_a_call_by_address_reads_and_writes_the_arrays_it_is_handed():
    a = np.random.default_rng(0).standard_normal((5, 7))[:, ::2]  # strided: any layout arrives
    out = np.full(5, np.nan)
    _caller(address(_row_sums), a, out, 3)
    np.testing.assert_allclose(out, 3 * a.sum(axis=1))


def test_an_exception_in_the_callee_reaches_the_caller():
    with pytest.raises(ValueError, match="negative scale"):
        _caller(address(_row_sums), np.ones((2, 2)), np.zeros(2), -1)
