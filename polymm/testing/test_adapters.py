"""The backend's own arrays, proven like the backend: its array adapter's primitives, and
``polymm.matmul`` on arrays of its library as inputs and as ``out=`` in every layout.

For a backend whose ``array_library`` is not NumPy, its own arrays are made with its
``from_numpy`` and read back with ``to_numpy``; strided, transposed, reversed and read-only
ones with the adapter's :meth:`~polymm.arrays.ArrayKind.view` (a case the adapter cannot make
is skipped, saying so). A failure names the adapter method at fault where one is.
"""

from __future__ import annotations

import numpy as np
import pytest

import polymm
from polymm.arrays import kind_named
from polymm.testing.reference import assert_matches, poison, random_array
from polymm.testing.test_conformance import rng  # noqa: F401  (a fixture)

DTYPE = "float32"  # every device computes it


class Own:
    """The backend under test, its adapter, and its arrays made from and read back to NumPy."""

    def __init__(self, name):
        self.name, self.impl = name, polymm.get_backend(name)
        self.kind = kind_named(self.impl.array_library)

    def array(self, x):
        return self.impl.from_numpy(np.array(x, order="C"))  # a copy: x stays the expected values

    def host(self, x) -> np.ndarray:
        return np.asarray(self.impl.to_numpy(x))

    def view(self, x, shape, strides, offset=0, writeable=True):
        made = self.kind.view(x, shape, strides, offset, writeable)
        if made is None:
            what = "views" if writeable else "read-only views (its library may have no read-only arrays)"
            pytest.skip(f"the {self.kind.name!r} adapter makes no {what} (ArrayKind.view): this case is not tested")
        return made

    def layout(self, x: np.ndarray, name: str):
        """``(array of the library, the same values in NumPy)`` laid out as ``name``: ``c``,
        ``transposed``, ``step`` (every other row and column), ``reversed`` (negative strides) or
        ``broadcast`` (a batch of 3 over one matrix, stride 0)."""
        m, n = x.shape
        if name == "c":
            return self.array(x), x
        if name == "transposed":
            return self.view(self.array(x.T), (m, n), (1, m)), x
        if name == "step":
            holder = np.zeros((2 * m, 2 * n), x.dtype)
            holder[::2, ::2] = x
            return self.view(self.array(holder), (m, n), (4 * n, 2)), x
        if name == "reversed":
            return self.view(self.array(x[::-1, ::-1]), (m, n), (-n, -1), m * n - 1), x
        if name == "broadcast":
            return self.view(self.array(x), (3, m, n), (0, n, 1)), np.broadcast_to(x, (3, m, n))
        raise ValueError(name)


@pytest.fixture
def own(polymm_backend):
    return Own(polymm_backend)


def written(own, out, x1, x2, what, hint):
    """Check ``out`` holds ``x1 @ x2``; an ``out`` left all poison, or wrong, is named with ``hint``."""
    got = own.host(out)
    if got.size and np.isnan(got).all():
        raise AssertionError(f"{what} was not written at all: {hint}")
    try:
        assert_matches(got, x1, x2)
    except AssertionError as exc:
        raise AssertionError(f"{what} holds wrong values ({exc}): {hint}") from None


# -- the adapter's primitives ---------------------------------------------------------------------


def test_adapter_allocates_copies_and_assigns(own, rng):  # noqa: F811
    x = random_array(rng, (5, 7), DTYPE)
    a = own.array(x)
    kind = own.kind
    assert kind.owns(a), f"adapter {kind.name!r}: owns(x) is False for an array from_numpy made"
    new = kind.empty((3, 4), np.dtype(DTYPE), like=a)
    assert tuple(new.shape) == (3, 4) and np.dtype(new.dtype) == DTYPE, "empty() made the wrong shape or dtype"
    assert kind.is_c_contiguous(new), "is_c_contiguous() is False for a new array from empty()"
    assert (own.host(kind.zeros((3, 4), np.dtype(DTYPE), like=a)) == 0).all(), "zeros() is not all zeros"
    dst = kind.zeros((5, 7), np.dtype(DTYPE), like=a)
    kind.assign(dst, a)
    assert np.array_equal(own.host(dst), x), (
        f"adapter {kind.name!r}: assign(dst, src) did not copy src into dst; the core relies on it for out= "
        "that is not C-contiguous or aliases an input, and for K = 0"
    )
    assert kind.elem_strides(a) == (7, 1), f"elem_strides() of a C-contiguous (5, 7) array: {kind.elem_strides(a)}"


@pytest.mark.parametrize("layout", ["transposed", "step", "reversed"])
def test_adapter_sees_views_as_they_are(own, layout, rng):  # noqa: F811
    x = random_array(rng, (6, 4), DTYPE)
    view, expected = own.layout(x, layout)
    kind = own.kind
    assert np.array_equal(own.host(view), expected), f"the adapter's view() of a {layout} layout shows other values"
    assert not kind.is_c_contiguous(view), (
        f"adapter {kind.name!r}: is_c_contiguous() is True for a {layout} view; the core would hand it to a "
        "backend as a C-contiguous output"
    )
    copy = kind.contiguous(view)
    assert kind.is_c_contiguous(copy) and np.array_equal(own.host(copy), expected), (
        f"adapter {kind.name!r}: contiguous() of a {layout} view is not a C-contiguous copy of its values"
    )


def test_adapter_sees_shared_memory(own, rng):  # noqa: F811
    holder = own.array(random_array(rng, (4, 8), DTYPE))
    left = own.view(holder, (4, 4), (8, 1))
    right = own.view(holder, (4, 4), (8, 1), 4)
    assert own.kind.shares_memory(left, holder) and own.kind.shares_memory(holder, right), (
        f"adapter {own.kind.name!r}: shares_memory() is False for views of one array; the core then lets a "
        "backend write into an input it is still reading (out= aliasing an input)"
    )


# -- its arrays through polymm.matmul -------------------------------------------------------------


@pytest.mark.parametrize("layout1", ["c", "transposed", "step", "reversed", "broadcast"])
@pytest.mark.parametrize("layout2", ["c", "transposed"])
def test_own_arrays_as_inputs(own, layout1, layout2, rng):  # noqa: F811
    a, x1 = own.layout(random_array(rng, (9, 11), DTYPE), layout1)
    b, x2 = own.layout(random_array(rng, (11, 5), DTYPE), layout2)
    result = polymm.matmul(a, b, backend=own.name)
    assert type(result) is type(a), f"{type(a).__name__} in gave {type(result).__name__} out"
    assert_matches(own.host(result), x1, x2)
    assert np.array_equal(own.host(a), x1), "an input was modified"


ASSIGN = "for this out= the core computes into a temporary and copies it in with the adapter's assign(dst, src)"


@pytest.mark.parametrize("case", ["contiguous", "step", "transposed"])
def test_own_out(own, case, rng):  # noqa: F811
    x1, x2 = random_array(rng, (9, 11), DTYPE), random_array(rng, (11, 5), DTYPE)
    a, b = own.array(x1), own.array(x2)
    if case == "contiguous":
        out, hint = own.array(poison((9, 5), DTYPE)), "the backend writes it directly"
    elif case == "step":
        holder = own.array(poison((9, 10), DTYPE))
        out, hint = own.view(holder, (9, 5), (10, 2)), ASSIGN
    else:
        holder = own.array(poison((5, 9), DTYPE))
        out, hint = own.view(holder, (9, 5), (1, 9)), ASSIGN
        assert not own.kind.is_c_contiguous(out), "is_c_contiguous() is True for a transposed out="
    assert polymm.matmul(a, b, backend=own.name, out=out) is out, "out= was not returned"
    written(own, out, x1, x2, f"a {case} out=", hint)
    if case == "step":
        assert np.isnan(own.host(holder)[:, 1::2]).all(), "elements between a strided out='s columns were written"


@pytest.mark.parametrize("which", ["x1", "x2", "both"])
def test_own_out_aliasing_an_input(own, which, rng):  # noqa: F811
    x1, x2 = random_array(rng, (3, 8, 8), DTYPE), random_array(rng, (3, 8, 8), DTYPE)
    a, b = own.array(x1), own.array(x2)
    if which == "both":
        b, x2 = a, x1
    out = {"x1": a, "x2": b, "both": a}[which]
    assert own.kind.shares_memory(out, a if which != "x2" else b), (
        f"adapter {own.kind.name!r}: shares_memory(out, {which}) is False for the very same array"
    )
    hint = (
        "out aliases an input, so the core must compute into a temporary (it asks the adapter's "
        "shares_memory) and copy it in with assign(dst, src)"
    )
    assert polymm.matmul(a, b, backend=own.name, out=out) is out, "out= was not returned"
    written(own, out, x1, x2, f"out= aliasing {which}", hint)


def test_own_out_with_empty_contraction(own):
    """K = 0: no backend call; the core assigns zeros into out (through the adapter)."""
    a, b = own.array(np.ones((4, 0), DTYPE)), own.array(np.ones((0, 3), DTYPE))
    out = own.array(poison((4, 3), DTYPE))
    assert polymm.matmul(a, b, backend=own.name, out=out) is out
    assert (own.host(out) == 0).all(), (
        "K = 0: out= must hold zeros, which the core writes with the adapter's assign(dst, src)"
    )


def test_own_out_read_only_is_refused(own, rng):  # noqa: F811
    x = random_array(rng, (4, 4), DTYPE)
    a = own.array(x)
    out = own.view(own.array(poison((4, 4), DTYPE)), (4, 4), (4, 1), writeable=False)
    assert not own.kind.writeable(out), f"adapter {own.kind.name!r}: writeable() is True for a read-only array"
    with pytest.raises(ValueError, match="read-only"):
        polymm.matmul(a, a, backend=own.name, out=out)
