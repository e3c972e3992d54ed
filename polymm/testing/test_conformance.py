"""The conformance suite: what ``polymm.matmul`` promises, checked on one backend at a time.

Every test takes ``polymm_backend`` (and most ``polymm_algorithm``), which the
plugin in :mod:`polymm.testing.plugin` parametrizes.  Inputs are NumPy arrays
unless a test says otherwise; results are compared with a higher-precision
reference and written into poisoned buffers so unwritten elements show.

The semantics cases (shapes, 1-D operands, broadcasting, promotion, errors)
take ``polymm_inputs`` too: the same case runs on NumPy arrays and on Dask arrays of
NumPy chunks in uneven blocks (a lazy result, computed here on Dask's local
threaded scheduler), when Dask is installed.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

import polymm
from polymm.backend import CONTRACT_DTYPES, SizeLimitError, algorithm_serves, optional_dtypes
from polymm.precision import PRECISIONS
from polymm.testing.reference import assert_matches, poison, random_array

DTYPES = [str(d) for d in CONTRACT_DTYPES]
#: Dtypes beyond the contract, tested where they exist (bfloat16 with ml_dtypes installed).
OPTIONAL = [str(d) for d in optional_dtypes()]


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# -- how operands are given ----------------------------------------------------------------
# Tests that take ``polymm_inputs`` run once per kind of operand (the plugin parametrizes it).


def given(inputs, x):
    """``x`` as the case's input kind: itself, or a Dask array in uneven blocks (two along each axis longer than 2)."""
    if inputs == "numpy" or not isinstance(x, (np.ndarray, np.generic)):
        return x
    da = pytest.importorskip("dask.array", reason="Dask is not installed (pip install 'polymm[dask]')")

    return da.from_array(x, chunks=tuple(max(1, n // 2 + 1) for n in np.shape(x)))


def matmul(inputs, x1, x2, **options):
    """``polymm.matmul`` on the case's input kind, as a NumPy result (a lazy result is checked, then computed)."""
    result = polymm.matmul(given(inputs, x1), given(inputs, x2), **options)
    if inputs == "numpy":
        return result
    from polymm.arrays import is_dask_array

    assert is_dask_array(result), f"Dask arrays in gave {type(result)} out"
    assert type(result._meta) is np.ndarray, f"chunk meta {type(result._meta)} for NumPy chunks"
    computed = result.compute(scheduler="threads")
    assert (computed.shape, computed.dtype) == (result.shape, result.dtype), "the lazy result's shape/dtype lied"
    return computed


def require_served(backend, algorithm, dtype, x1, x2, inputs="numpy"):
    """Skip when ``backend`` cannot compute ``dtype`` on this device (float64 without fp64, an
    optional dtype it does not offer) or ``algorithm`` does not serve it (the image kernel has no
    64-bit texels), after checking that ``matmul`` refuses it with a ``TypeError`` naming the dtype.
    Empty operands never reach a kernel (the core answers), so they are tested as usual."""
    dtype = np.dtype(dtype)
    impl = polymm.get_backend(backend)
    try:
        impl.check_dtype(dtype, x1)
    except TypeError:  # a device that truly cannot do this dtype must say so, never compute wrongly
        with pytest.raises(TypeError, match=re.escape(str(dtype))):
            matmul(inputs, x1, x2, backend=backend, algorithm=algorithm)
        pytest.skip(f"backend {backend!r} refuses {dtype} on this device (checked: clear TypeError)")
    if algorithm_serves(impl, algorithm, dtype) or 0 in (np.size(x1), np.size(x2)):
        return
    with pytest.raises(TypeError, match=re.escape(str(dtype))):
        matmul(inputs, x1, x2, backend=backend, algorithm=algorithm)
    pytest.skip(f"algorithm {algorithm!r} of {backend!r} does not serve {dtype} (checked: clear TypeError)")


def run(backend, algorithm, x1, x2, dtype=None, precision=None, inputs="numpy"):
    """Compute into a poisoned ``out`` and without ``out``; check both, return the latter
    (within the error bound of ``precision``, when one is asked for)."""
    dtype = np.dtype(dtype) if dtype is not None else np.result_type(x1, x2)
    require_served(backend, algorithm, dtype, x1, x2, inputs)
    expected_shape = (
        np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]) + x1.shape[-2:-1] + x2.shape[-1:]
        if x1.ndim > 1 and x2.ndim > 1
        else None
    )
    try:
        result = matmul(inputs, x1, x2, backend=backend, algorithm=algorithm, precision=precision)
    except SizeLimitError as exc:  # an explicit algorithm past the device's limits (image sizes)
        if algorithm == "auto":
            raise
        pytest.skip(f"{backend}/{algorithm}: {exc}")
    assert type(result) is np.ndarray
    mode = precision or polymm.precision.current()
    assert_matches(result, x1, x2, dtype, mode)
    if expected_shape is not None:
        assert result.shape == expected_shape
    out = poison(result.shape, dtype)
    if inputs == "dask":  # Dask arrays are immutable: out= is refused when the graph is built
        with pytest.raises(TypeError, match="out="):
            polymm.matmul(given(inputs, x1), given(inputs, x2), backend=backend, algorithm=algorithm, out=out)
        return result
    returned = polymm.matmul(x1, x2, backend=backend, algorithm=algorithm, out=out, precision=precision)
    assert returned is out
    assert_matches(out, x1, x2, dtype, mode)
    return result


# -- dtypes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + OPTIONAL)
def test_every_dtype(polymm_backend, polymm_algorithm, dtype, rng):
    x1 = random_array(rng, (17, 33), dtype)
    x2 = random_array(rng, (33, 19), dtype)
    run(polymm_backend, polymm_algorithm, x1, x2)


@pytest.mark.parametrize("dtype", DTYPES + OPTIONAL)
def test_every_dtype_batched_odd(polymm_backend, polymm_algorithm, dtype, rng):
    x1 = random_array(rng, (3, 65, 40), dtype)
    x2 = random_array(rng, (3, 40, 33), dtype)
    run(polymm_backend, polymm_algorithm, x1, x2)


MIXED = [
    ("int8", "uint8"),
    ("int16", "int32"),
    ("uint8", "int64"),
    ("uint32", "int32"),
    ("uint64", "int64"),
    ("bool", "int8"),
    ("bool", "float32"),
    ("int32", "float32"),
    ("float16", "float32"),
    ("float16", "int8"),
    ("float32", "float64"),
    ("float32", "complex64"),
    ("float64", "complex64"),
    ("int16", "complex128"),
] + [(a, b) for d in OPTIONAL for a, b in ((d, "float32"), ("int8", d), (d, "float64"))]


@pytest.mark.parametrize("dtypes", MIXED, ids=["-".join(p) for p in MIXED])
def test_mixed_dtypes_promote_like_numpy(polymm_backend, dtypes, polymm_inputs, rng):
    x1 = random_array(rng, (9, 31), dtypes[0])
    x2 = random_array(rng, (31, 7), dtypes[1])
    result = run(polymm_backend, "auto", x1, x2, inputs=polymm_inputs)
    assert result.dtype == np.result_type(x1, x2)


def test_integer_products_wrap_like_numpy(polymm_backend, polymm_algorithm):
    x1 = np.full((5, 300), 127, np.int8)
    x2 = np.full((300, 4), 127, np.int8)
    big = np.full((2, 3), np.iinfo(np.uint64).max, np.uint64)
    require_served(polymm_backend, polymm_algorithm, "uint64", big, big.T)
    result = polymm.matmul(x1, x2, backend=polymm_backend, algorithm=polymm_algorithm)
    np.testing.assert_array_equal(result, np.matmul(x1, x2))  # NumPy's own wrap-around
    result = polymm.matmul(big, big.T.copy(), backend=polymm_backend, algorithm=polymm_algorithm)
    np.testing.assert_array_equal(result, np.matmul(big, big.T))


@pytest.mark.parametrize("dtype", ["float16"] + OPTIONAL)
def test_narrow_floats_accumulate_in_float32(polymm_backend, polymm_algorithm, dtype):
    # 4096 ones: a float16 accumulator stops at 2048, a bfloat16 one at 256; float32 is exact.
    x1 = np.ones((2, 4096), dtype)
    x2 = np.ones((4096, 3), dtype)
    require_served(polymm_backend, polymm_algorithm, dtype, x1, x2)
    result = polymm.matmul(x1, x2, backend=polymm_backend, algorithm=polymm_algorithm)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, np.full((2, 3), 4096, dtype))


def test_complex_is_not_conjugated(polymm_backend, polymm_algorithm):
    x1 = np.array([[1 + 2j, 3 - 1j]], np.complex64)
    x2 = np.array([[2 - 1j], [1j]], np.complex64)
    require_served(polymm_backend, polymm_algorithm, "complex64", x1, x2)
    result = polymm.matmul(x1, x2, backend=polymm_backend, algorithm=polymm_algorithm)
    np.testing.assert_allclose(result, [[(1 + 2j) * (2 - 1j) + (3 - 1j) * 1j]], rtol=1e-6)


def test_float32_is_not_computed_in_reduced_precision(polymm_backend, polymm_algorithm):
    # 1 + 2**-20 survives float32 but not TF32 (10-bit mantissa) or bfloat16.
    x1 = np.full((32, 64), 1 + 2.0**-20, np.float32)
    x2 = np.zeros((64, 32), np.float32)
    x2[0] = 1.0
    result = polymm.matmul(x1, x2, backend=polymm_backend, algorithm=polymm_algorithm, precision="default")
    np.testing.assert_array_equal(result, np.full((32, 32), 1 + 2.0**-20, np.float32))


# -- precision modes --------------------------------------------------------------------------


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64", "int32"])
def test_precision_modes_keep_their_bounds(polymm_backend, polymm_algorithm, precision, dtype, rng):
    # each mode within the error bound it documents (polymm.precision.error_bound); modes
    # change float32 and complex64 only, every other dtype keeps its own precision
    x1 = random_array(rng, (2, 33, 300), dtype)
    x2 = random_array(rng, (300, 65), dtype)
    run(polymm_backend, polymm_algorithm, x1, x2, precision=precision)


def test_precision_scope_and_unknown_names(polymm_backend, rng):
    x1 = random_array(rng, (9, 40), "float32")
    x2 = random_array(rng, (40, 7), "float32")
    with polymm.use_precision("tf32"):
        assert_matches(polymm.matmul(x1, x2, backend=polymm_backend), x1, x2, precision="tf32")
        # an explicit argument wins over the scope
        exact = polymm.matmul(x1, x2, backend=polymm_backend, precision="default")
    assert_matches(exact, x1, x2)
    with pytest.raises(ValueError, match="'default', 'tf32x3', 'tf32'"):
        polymm.matmul(x1, x2, backend=polymm_backend, precision="fp8")
    with pytest.raises(ValueError, match="tf32x3"):
        with polymm.use_precision("TF32"):
            pass


# -- shapes -----------------------------------------------------------------------------------

SIZES = [
    (0, 5, 3),
    (4, 0, 3),
    (4, 5, 0),
    (0, 0, 0),
    (1, 1, 1),
    (1, 17, 1),
    (17, 1, 33),
    (16, 16, 16),
    (17, 17, 17),
    (33, 65, 17),
    (65, 33, 127),
    (127, 129, 65),
    (257, 33, 31),
    (31, 257, 129),
    (128, 127, 129),
    (64, 300, 64),
]


@pytest.mark.parametrize("m,k,n", SIZES, ids=[f"{m}x{k}x{n}" for m, k, n in SIZES])
@pytest.mark.parametrize("dtype", ["float32", "int32", "complex128"])
def test_sizes(polymm_backend, polymm_algorithm, m, k, n, dtype, polymm_inputs, rng):
    x1 = random_array(rng, (m, k), dtype)
    x2 = random_array(rng, (k, n), dtype)
    run(polymm_backend, polymm_algorithm, x1, x2, inputs=polymm_inputs)


def test_large_odd_square(polymm_backend, polymm_algorithm, rng):
    x1 = random_array(rng, (257, 263), "float32")
    x2 = random_array(rng, (263, 255), "float32")
    run(polymm_backend, polymm_algorithm, x1, x2)


VECTORS = [
    ((7,), (7,)),
    ((7,), (7, 5)),
    ((6, 7), (7,)),
    ((3, 6, 7), (7,)),
    ((7,), (2, 7, 5)),
    ((0,), (0,)),
    ((1,), (1, 4)),
    ((33,), (4, 33, 17)),
]


@pytest.mark.parametrize("s1,s2", VECTORS, ids=[f"{a}@{b}" for a, b in VECTORS])
def test_one_dimensional_operands(polymm_backend, polymm_algorithm, s1, s2, polymm_inputs, rng):
    x1 = random_array(rng, s1, "float64")
    x2 = random_array(rng, s2, "float64")
    require_served(polymm_backend, polymm_algorithm, "float64", x1, x2, polymm_inputs)
    result = matmul(polymm_inputs, x1, x2, backend=polymm_backend, algorithm=polymm_algorithm)
    assert result.shape == np.matmul(x1, x2).shape
    assert_matches(result, x1, x2)
    if len(s1) == len(s2) == 1:
        assert result.ndim == 0


BATCHES = [
    ((2, 5, 6), (2, 6, 3)),
    ((2, 5, 6), (6, 3)),
    ((5, 6), (4, 6, 3)),
    ((1, 5, 6), (3, 6, 2)),
    ((2, 1, 5, 6), (3, 6, 4)),
    ((3, 1, 5, 6), (1, 4, 6, 2)),
    ((2, 3, 4, 17, 9), (4, 9, 33)),
    ((0, 5, 6), (6, 3)),
    ((2, 0, 5, 6), (1, 6, 3)),
]


@pytest.mark.parametrize("s1,s2", BATCHES, ids=[f"{a}@{b}" for a, b in BATCHES])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_batches_broadcast(polymm_backend, polymm_algorithm, s1, s2, dtype, polymm_inputs, rng):
    x1 = random_array(rng, s1, dtype)
    x2 = random_array(rng, s2, dtype)
    run(polymm_backend, polymm_algorithm, x1, x2, inputs=polymm_inputs)


# -- memory layouts ---------------------------------------------------------------------------


def _layouts(rng, dtype):
    base1 = random_array(rng, (2, 40, 70), dtype)
    base2 = random_array(rng, (2, 70, 50), dtype)
    yield "c", base1[:, :33, :35], base2[:, :35, :17]
    yield "fortran", np.asfortranarray(base1[0, :33, :35]), np.asfortranarray(base2[0, :35, :17])
    yield "transposed", base1[0, :35, :33].T, base2[0, :17, :35].T.copy()
    yield "both-transposed", base2[1, :35, :33].T, base1[1, :17, :35].T
    yield "negative", base1[:, ::-1, ::-1][:, :33, :35], base2[::-1, ::-2][:, :35, :17]
    yield "step", base1[:, ::2, ::2][:, :, :35], base2[:, ::2, ::3]
    yield "broadcast-view", np.broadcast_to(base1[0, :33, :35], (3, 33, 35)), base2[1, :35, :17]
    yield (
        "batch-transposed",
        random_array(rng, (5, 3, 33, 35), dtype).transpose(1, 0, 2, 3)[:, ::2],
        random_array(rng, (35, 17), dtype),
    )


@pytest.mark.parametrize(
    "layout",
    ["c", "fortran", "transposed", "both-transposed", "negative", "step", "broadcast-view", "batch-transposed"],
)
@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_memory_layouts(polymm_backend, polymm_algorithm, layout, dtype, rng):
    x1, x2 = dict((name, (a, b)) for name, a, b in _layouts(rng, dtype))[layout]
    snapshot = (x1.copy(), x2.copy())
    run(polymm_backend, polymm_algorithm, x1, x2)
    np.testing.assert_array_equal(x1, snapshot[0])  # inputs untouched
    np.testing.assert_array_equal(x2, snapshot[1])


def test_byte_swapped_inputs(polymm_backend, rng):
    x1 = random_array(rng, (9, 17), "float64").astype(">f8")
    x2 = random_array(rng, (17, 5), "int32").astype(">i4")
    result = polymm.matmul(x1, x2, backend=polymm_backend)
    assert result.dtype == np.float64 and result.dtype.isnative
    assert_matches(result, x1.astype(np.float64), x2.astype(np.float64))


# -- out= -------------------------------------------------------------------------------------


def test_out_is_filled_and_returned(polymm_backend, polymm_algorithm, rng):
    x1 = random_array(rng, (4, 33, 17), "float64")
    x2 = random_array(rng, (17, 9), "float64")
    out = poison((4, 33, 9), "float64")
    require_served(polymm_backend, polymm_algorithm, "float64", x1, x2)
    assert polymm.matmul(x1, x2, backend=polymm_backend, algorithm=polymm_algorithm, out=out) is out
    assert_matches(out, x1, x2)


def test_out_non_contiguous(polymm_backend, rng):
    x1 = random_array(rng, (33, 17), "float32")
    x2 = random_array(rng, (17, 9), "float32")
    holder = poison((33, 20), "float32")
    out = holder[:, ::2][:, :9]
    assert polymm.matmul(x1, x2, backend=polymm_backend, out=out) is out
    assert_matches(out, x1, x2)
    assert np.isnan(holder[:, 1::2]).all()  # elements between the view's columns untouched


@pytest.mark.parametrize("which", ["x1", "x2", "both"])
def test_out_may_alias_an_input(polymm_backend, polymm_algorithm, which, rng):
    x1 = random_array(rng, (3, 33, 33), "float64")
    x2 = random_array(rng, (3, 33, 33), "float64")
    require_served(polymm_backend, polymm_algorithm, "float64", x1, x2)
    expected_inputs = (x1.copy(), x2.copy() if which != "both" else x1.copy())
    if which == "both":
        x2 = x1
    out = {"x1": x1, "x2": x2, "both": x1}[which]
    result = polymm.matmul(x1, x2, backend=polymm_backend, algorithm=polymm_algorithm, out=out)
    assert result is out
    assert_matches(result, *expected_inputs)


def test_out_wrong_shape(polymm_backend):
    x = np.ones((4, 5), np.float32)
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(4, 5\)|shape"):
        polymm.matmul(x, x.T, backend=polymm_backend, out=np.empty((4, 5), np.float32))


def test_out_wrong_dtype(polymm_backend):
    x = np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match="float64.*float32"):
        polymm.matmul(x, x.T, backend=polymm_backend, out=np.empty((4, 4), np.float64))


def test_out_read_only(polymm_backend):
    x = np.ones((4, 5), np.float32)
    out = np.empty((4, 4), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        polymm.matmul(x, x.T, backend=polymm_backend, out=out)


def test_out_other_library(polymm_backend):
    x = np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match="out must be"):
        polymm.matmul(x, x.T, backend=polymm_backend, out=[[0.0] * 4] * 4)


# -- special values ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"] + OPTIONAL)
def test_nan_and_inf_propagate(polymm_backend, polymm_algorithm, dtype, rng):
    x1 = random_array(rng, (19, 23), dtype)
    x2 = random_array(rng, (23, 21), dtype)
    x1[3, 5] = np.nan
    x1[7, :] = 0
    x2[:, 4] = 0
    x2[2, 9] = np.inf  # row 7 of x1 is zero: 0 * inf must give NaN there
    x2[6, 11] = -np.inf
    result = run(polymm_backend, polymm_algorithm, x1, x2)
    assert np.isnan(result[3]).all() and np.isnan(result[7, 9])


# -- errors -----------------------------------------------------------------------------------


# Errors are raised by the call itself: with Dask inputs, when the graph is built, before any compute.


def test_zero_dimensional_operand(polymm_backend, polymm_inputs):
    with pytest.raises(ValueError, match=r"\(\)"):
        matmul(polymm_inputs, np.ones(()), np.ones((2, 2)), backend=polymm_backend)
    with pytest.raises(ValueError, match="0-d|dimension"):
        matmul(polymm_inputs, np.ones(3), np.float64(2.0), backend=polymm_backend)


def test_contraction_mismatch_names_shapes(polymm_backend, polymm_inputs):
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\)"):
        matmul(polymm_inputs, np.ones((3, 4)), np.ones((5, 2)), backend=polymm_backend)
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\)"):
        matmul(polymm_inputs, np.ones(4), np.ones(3), backend=polymm_backend)


def test_batch_not_broadcastable(polymm_backend, polymm_inputs):
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\).*broadcast"):
        matmul(polymm_inputs, np.ones((2, 3, 4)), np.ones((3, 4, 5)), backend=polymm_backend)


@pytest.mark.parametrize(
    "bad",
    [np.array([["a"]]), np.array([[object()]]), np.zeros((1, 1), dtype=[("x", "f4")]), np.zeros((1, 1), "M8[s]")],
    ids=["str", "object", "structured", "datetime"],
)
def test_unsupported_dtypes(polymm_backend, bad, polymm_inputs):
    with pytest.raises(TypeError, match=re.escape(str(bad.dtype))):
        matmul(polymm_inputs, bad, np.ones((1, 1)), backend=polymm_backend)
    with pytest.raises(TypeError, match="dtype"):
        matmul(polymm_inputs, np.ones((1, 1)), bad, backend=polymm_backend)


def test_python_lists_are_refused(polymm_backend, polymm_inputs):
    with pytest.raises(TypeError, match="list"):
        matmul(polymm_inputs, [[1.0]], np.ones((1, 1)), backend=polymm_backend)
    with pytest.raises(TypeError, match="x2 must be an array"):
        matmul(polymm_inputs, np.ones((1, 1)), 3.0, backend=polymm_backend)


def test_mixed_libraries_are_refused(polymm_backend, polymm_inputs):
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="different array libraries"):
        matmul(polymm_inputs, np.ones((2, 2)), xp.ones((2, 2)), backend=polymm_backend)


def test_unknown_algorithm_lists_valid_ones(polymm_backend, polymm_inputs):
    backend = polymm.get_backend(polymm_backend)
    with pytest.raises(ValueError, match="no-such-kernel") as info:
        matmul(polymm_inputs, np.ones((2, 2)), np.ones((2, 2)), backend=polymm_backend, algorithm="no-such-kernel")
    for name in backend.algorithms:
        assert repr(name) in str(info.value)


def test_unknown_backend_lists_known_ones(polymm_backend, polymm_inputs):
    with pytest.raises(ValueError, match=f"no-such-backend.*{re.escape(polymm_backend)}"):
        matmul(polymm_inputs, np.ones((2, 2)), np.ones((2, 2)), backend="no-such-backend")


# -- selection and arrays in/out --------------------------------------------------------------


def test_listed_in_backends(polymm_backend):
    info = {i.name: i for i in polymm.backends()}[polymm_backend]
    assert info.available and info.reason is None
    assert "auto" in info.algorithms
    assert tuple(polymm.get_backend(polymm_backend).algorithms) == info.algorithms, (
        "the backend's listing (its polymm.backend_info entry point) and the backend disagree on its algorithms"
    )
    assert set(DTYPES) <= set(info.dtypes) or info.dtypes


def test_use_backend_scopes_the_choice(polymm_backend, rng):
    x1 = random_array(rng, (5, 6), "float32")
    x2 = random_array(rng, (6, 7), "float32")
    with polymm.use_backend(polymm_backend):
        assert_matches(polymm.matmul(x1, x2), x1, x2)


def test_environment_variable_chooses(polymm_backend, monkeypatch, rng):
    monkeypatch.setenv("POLYMM_BACKEND", polymm_backend)
    x1 = random_array(rng, (5, 6), "float32")
    x2 = random_array(rng, (6, 7), "float32")
    assert_matches(polymm.matmul(x1, x2), x1, x2)


def test_native_arrays_in_native_arrays_out(polymm_backend, polymm_algorithm, rng):
    backend = polymm.get_backend(polymm_backend)
    x1 = random_array(rng, (2, 33, 17), "float32")
    x2 = random_array(rng, (17, 9), "float32")
    d1, d2 = backend.from_numpy(x1), backend.from_numpy(x2)
    result = polymm.matmul(d1, d2, algorithm=polymm_algorithm, backend=polymm_backend)
    assert type(result) is type(d1)
    assert_matches(backend.to_numpy(result), x1, x2)
    out = backend.from_numpy(poison((2, 33, 9), "float32"))
    assert polymm.matmul(d1, d2, algorithm=polymm_algorithm, backend=polymm_backend, out=out) is out
    assert_matches(backend.to_numpy(out), x1, x2)


#: Shapes whose native-array products take the dispatcher's short path (vectors, equal batches, a
#: shared matrix) and the general one (broadcast batches that one launch covers only after a copy).
NATIVE_SHAPES = [
    ((40,), (40, 9)),
    ((9, 40), (40,)),
    ((40,), (40,)),
    ((3, 9, 40), (3, 40, 5)),
    ((1, 9, 40), (1, 40, 5)),
    ((3, 9, 40), (40, 5)),
    ((9, 40), (3, 40, 5)),
    ((3, 9, 40), (40,)),
    ((40,), (3, 40, 5)),
    ((4, 1, 9, 40), (1, 3, 40, 5)),
    ((4, 3, 9, 40), (3, 40, 5)),
    ((2, 4, 1, 9, 40), (3, 40, 5)),
    ((0, 9, 40), (40, 5)),
    ((3, 9, 40), (1, 40, 5)),
]


@pytest.mark.parametrize("shapes", NATIVE_SHAPES, ids=lambda s: f"{s[0]}@{s[1]}")
def test_native_arrays_every_shape_rule(polymm_backend, shapes, rng):
    backend = polymm.get_backend(polymm_backend)
    x1, x2 = (random_array(rng, shape, "float32") for shape in shapes)
    result = polymm.matmul(backend.from_numpy(x1), backend.from_numpy(x2), backend=polymm_backend)
    assert tuple(result.shape) == np.matmul(x1, x2).shape
    assert_matches(backend.to_numpy(result), x1, x2)


def test_array_api_strict_in_and_out(polymm_backend, rng):
    xp = pytest.importorskip("array_api_strict")
    x1 = random_array(rng, (3, 8, 5), "float64")
    x2 = random_array(rng, (5, 4), "float64")
    result = polymm.matmul(xp.asarray(x1), xp.asarray(x2), backend=polymm_backend)
    assert type(result) is type(xp.asarray(x1))
    assert_matches(np.asarray(result), x1, x2)
    with pytest.raises(TypeError):  # array-api-strict's own promotion forbids int @ float
        polymm.matmul(xp.asarray(x1), xp.asarray(np.ones((5, 4), np.int32)), backend=polymm_backend)


def test_torch_cpu_tensors_in_and_out(polymm_backend, rng):
    torch = pytest.importorskip("torch")
    x1 = random_array(rng, (3, 8, 5), "float32")
    x2 = random_array(rng, (5, 4), "int16")
    result = polymm.matmul(torch.from_numpy(x1), torch.from_numpy(x2), backend=polymm_backend)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.float32
    assert_matches(result.numpy(), x1, x2.astype(np.float32))
    out = torch.full((3, 8, 4), float("nan"))
    assert polymm.matmul(torch.from_numpy(x1), torch.from_numpy(x2), backend=polymm_backend, out=out) is out
    assert_matches(out.numpy(), x1, x2.astype(np.float32))


class _OnDevice:
    """An array of another library that only tells its DLPack device (it must not be read)."""

    def __init__(self, device):
        self.device, self.shape, self.dtype = device, (4, 4), np.dtype("float32")

    def __dlpack__(self, **kwargs):
        raise AssertionError("an operand on another device was read")

    def __dlpack_device__(self):
        return self.device


def test_dlpack_operands_on_different_devices_are_refused(polymm_backend):
    with pytest.raises(ValueError, match=r"different devices \(cpu:0 and cuda:1\)"):
        polymm.matmul(_OnDevice((1, 0)), _OnDevice((2, 1)), backend=polymm_backend)


def test_torch_lazy_conjugates_are_resolved(polymm_backend, rng):
    """PyTorch's conj() and neg views (a bit on the tensor, data untouched) multiply as what they show."""
    torch = pytest.importorskip("torch")
    x1 = random_array(rng, (2, 6, 5), "complex64")
    x2 = random_array(rng, (5, 3), "complex64")
    t1, t2 = torch.from_numpy(x1), torch.from_numpy(x2)
    result = polymm.matmul(t1.conj(), -t2.conj(), backend=polymm_backend)
    assert result.dtype == torch.complex64
    assert_matches(result.numpy(), x1.conj(), -x2.conj())


@pytest.mark.skipif(not OPTIONAL, reason="bfloat16 needs ml_dtypes")
def test_torch_bfloat16_tensors_in_and_out(polymm_backend, rng):
    torch = pytest.importorskip("torch")
    x1 = random_array(rng, (3, 8, 5), "bfloat16")
    x2 = random_array(rng, (5, 4), "bfloat16")
    t1, t2 = (torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) for x in (x1, x2))
    require_served(polymm_backend, "auto", "bfloat16", x1, x2)
    result = polymm.matmul(t1, t2, backend=polymm_backend)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.bfloat16
    assert_matches(result.view(torch.int16).numpy().view(x1.dtype), x1, x2)
    out = torch.full((3, 8, 4), float("nan"), dtype=torch.bfloat16)
    assert polymm.matmul(t1, t2, backend=polymm_backend, out=out) is out
    assert_matches(out.view(torch.int16).numpy().view(x1.dtype), x1, x2)
    # PyTorch's promotion: bfloat16 with float32 is float32
    assert polymm.matmul(t1, t2.float(), backend=polymm_backend).dtype == torch.float32
