"""Inputs at the edges of what polymm takes: refused with a clear error naming what was wrong,
never computed into a silently different answer (issue 35's edges)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polymm
from polymm import registry


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_numpy_matrix_is_refused():
    m = np.matrix(np.arange(9.0).reshape(3, 3))
    with pytest.raises(TypeError, match=r"x1 is a numpy\.matrix .*numpy\.asarray"):
        polymm.matmul(m, np.ones((3, 3)))
    with pytest.raises(TypeError, match=r"x2 is a numpy\.matrix"):
        polymm.matmul(np.ones((3, 3)), m)
    with pytest.raises(TypeError, match=r"out is a numpy\.matrix"):
        polymm.matmul(np.ones((3, 3)), np.ones((3, 3)), out=np.matrix(np.zeros((3, 3))))


def test_masked_arrays_are_refused_not_computed_without_their_mask():
    a = np.ma.masked_array(np.ones((2, 2)), mask=[[True, False], [False, False]])
    with pytest.raises(TypeError, match=r"x1 is a numpy masked array, whose mask polymm would ignore.*filled"):
        polymm.matmul(a, np.ones((2, 2)))
    with pytest.raises(TypeError, match=r"x2 is a numpy masked array"):
        polymm.matmul(np.ones((2, 2)), a)


def test_other_ndarray_subclasses_still_compute(tmp_path):
    """Only the subclasses whose product means something else are refused: a memmap is an array."""
    m = np.memmap(tmp_path / "a.dat", dtype="float64", mode="w+", shape=(3, 4))
    m[:] = np.arange(12.0).reshape(3, 4)
    b = np.arange(8.0).reshape(4, 2)
    np.testing.assert_array_equal(polymm.matmul(m, b), np.asarray(m) @ b)


@pytest.mark.parametrize(
    "keyword, value, what",
    [("backend", 123, "a backend is named by a string, got int 123"),
     ("algorithm", 5, "algorithm must be a string, got int 5"),
     ("precision", 3.0, "a precision mode is a string, got float 3.0")],
)  # fmt: skip
def test_wrong_argument_types_are_type_errors(keyword, value, what):
    with pytest.raises(TypeError, match=re.escape(what)):
        polymm.matmul(np.ones((2, 2)), np.ones((2, 2)), **{keyword: value})


@pytest.mark.parametrize("name, package", sorted(registry.FIRST_PARTY.items()))
def test_a_missing_first_party_backend_names_its_package(monkeypatch, name, package):
    """On an install without it (a core-only one), asking for ``opencl`` or ``cuda`` says which
    package brings it."""
    known = dict(registry._registry())
    known.pop(name, None)
    monkeypatch.setattr(registry, "_entries", known)
    with pytest.raises(
        ValueError, match=rf"unknown polymm backend '{re.escape(name)}'.*provided by the {re.escape(package)} package"
    ):
        polymm.get_backend(name)
    with pytest.raises(ValueError, match=r"unknown polymm backend 'nope'; known backends: [^;]*$"):
        polymm.get_backend("nope")  # no hint for a name the project does not ship


def test_a_buffer_larger_than_an_opencl_device_allocates_is_refused_clearly():
    """A product whose result needs one buffer past ``CL_DEVICE_MAX_MEM_ALLOC_SIZE`` is refused
    by polymm, naming the device and the limit, before the driver answers INVALID_BUFFER_SIZE
    (no host memory is needed: the operands are two vectors)."""
    try:
        impl = polymm.get_backend("opencl")
    except (ValueError, polymm.BackendUnavailable) as exc:
        pytest.skip(f"no OpenCL backend here: {exc}")
    from polymm.backend import DeviceMemoryError

    device = impl.from_numpy(np.ones(1, np.float32)).queue.device
    n = int((device.max_mem_alloc_size // 4) ** 0.5) + 64
    a, b = np.ones((n, 1), np.float32), np.ones((1, n), np.float32)
    with pytest.raises(
        DeviceMemoryError, match=r"more than OpenCL device .* allocates at once .*CL_DEVICE_MAX_MEM_ALLOC_SIZE"
    ):
        polymm.matmul(a, b, backend="opencl")
    assert issubclass(DeviceMemoryError, MemoryError)


def test_out_of_a_plain_2d_numpy_product_takes_the_short_path(monkeypatch):
    """``out=`` a C-contiguous, writeable NumPy array of the result's shape and dtype, apart from
    both operands: written by the backend's host entry directly (the general path's checks cost
    25 us a call); an ``out`` that overlaps an operand, is strided, read-only or of another dtype
    goes the general way, which computes it right or says what is wrong."""
    from polymm import dispatch

    general = []
    compute = dispatch._compute
    monkeypatch.setattr(dispatch, "_compute", lambda *a, **k: general.append(1) or compute(*a, **k))
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 6))
    out = np.full((7, 6), np.nan)
    assert polymm.matmul(a, b, out=out) is out and not general
    np.testing.assert_allclose(out, a @ b)
    square = rng.standard_normal((6, 6))
    expected = square @ square
    assert polymm.matmul(square, square, out=square) is square and len(general) == 1  # aliased
    np.testing.assert_allclose(square, expected)
    wide = np.full((7, 12), np.nan)
    polymm.matmul(a, b, out=wide[:, ::2])  # strided: the general path, which copies back
    np.testing.assert_allclose(wide[:, ::2], a @ b)
    assert len(general) == 2
    frozen = np.zeros((7, 6))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        polymm.matmul(a, b, out=frozen)
    with pytest.raises(TypeError, match="out has dtype float32"):
        polymm.matmul(a, b, out=np.zeros((7, 6), np.float32))
