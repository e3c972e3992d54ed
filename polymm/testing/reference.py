"""Inputs, a higher-precision reference, and the comparison the suite applies."""

from __future__ import annotations

import numpy as np

from ..backend import is_bfloat16
from ..precision import REDUCED_DTYPES, error_bound
from ..precision import current as current_precision

INTEGER_KINDS = "biu"


def _finfo(dtype):
    """``np.finfo``, also for ml_dtypes' bfloat16 (whose kind is ``V``)."""
    if is_bfloat16(dtype):
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random values that exercise the dtype: full integer ranges (so products wrap), signs, no zeros-only."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        real = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return real.astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def poison(shape, dtype) -> np.ndarray:
    """An output buffer full of a value no correct product produces by accident."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc" or is_bfloat16(dtype):
        return np.full(shape, np.nan, dtype)
    if dtype == np.bool_:
        return np.full(shape, True)
    return np.full(shape, np.iinfo(dtype).max - 3, dtype)


@np.errstate(all="ignore")  # NaN/Inf inputs are deliberate in the suite
def reference_matmul(x1: np.ndarray, x2: np.ndarray, dtype) -> np.ndarray:
    """``x1 @ x2`` in higher precision: exact for integers (wrap-around included), float64/longdouble otherwise."""
    return _in_wide(np.matmul, (x1, x2), dtype)


@np.errstate(all="ignore")
def reference_einsum(subscripts: str, operands, dtype) -> np.ndarray:
    """``numpy.einsum(subscripts, *operands)`` in higher precision, as :func:`reference_matmul`."""
    return _in_wide(lambda *xs: np.einsum(subscripts, *xs), operands, dtype)


def _in_wide(compute, operands, dtype) -> np.ndarray:
    """``compute(*operands)`` exact for integers and bool (arithmetic mod 2**64, then truncated: exactly
    NumPy's wrap-around for every width), in float64 or longdouble (complex alike) otherwise."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return compute(*(x.astype(np.uint64) for x in operands)) != 0
    if dtype.kind in "iu":
        return compute(*(x.astype(np.uint64) for x in operands)).astype(dtype)
    wide = np.clongdouble if dtype.kind == "c" else np.longdouble
    if dtype.itemsize < (16 if dtype.kind == "c" else 8):
        wide = np.complex128 if dtype.kind == "c" else np.float64
    return compute(*(x.astype(wide) for x in operands))


@np.errstate(all="ignore")
def tolerance(x1: np.ndarray, x2: np.ndarray, dtype, k: int, precision: str = "default") -> np.ndarray:
    """Elementwise bound ``c * K * eps * (|x1| @ |x2|)``, the classical dot-product error bound,
    or the looser one ``precision`` documents (:func:`polymm.precision.error_bound`) for the
    dtypes a precision mode affects."""
    mag = np.matmul(np.abs(x1).astype(np.float64), np.abs(x2).astype(np.float64))
    return _bound(mag, dtype, k, precision)


def _bound(mag, dtype, k: int, precision: str, roundings: int = 1) -> np.ndarray:
    """The bound for results of magnitude ``mag`` (the product of the operands' absolute values),
    ``k`` terms a result, rounded to a narrow dtype ``roundings`` times (once per pairwise product)."""
    dtype = np.dtype(dtype)
    if dtype.name not in REDUCED_DTYPES:
        precision = "default"
    narrow = dtype == np.float16 or is_bfloat16(dtype)
    compute = np.dtype(np.float32) if narrow else dtype  # float16 and bfloat16 accumulate in float32
    eps = float(np.finfo(compute).eps)
    bound = (2.0 if dtype.kind == "c" else 1.0) * error_bound(precision, k, eps) * mag
    if narrow:
        # plus the roundings to the narrow type: relative for normal results, and up to
        # half the spacing of its subnormals for results in that range
        bound = bound + roundings * (float(_finfo(dtype).eps) * mag + float(_finfo(dtype).smallest_subnormal) / 2)
    return bound + float(np.finfo(compute).tiny)


@np.errstate(all="ignore")
def assert_matches(result, x1: np.ndarray, x2: np.ndarray, dtype=None, precision: str | None = None) -> None:
    """Check ``result`` against the reference of ``x1 @ x2`` (shape, dtype, values, NaN/Inf placement),
    within the error bound of ``precision`` (:mod:`polymm.precision`; default: the mode in scope,
    which is what a call without ``precision=`` computes in)."""
    precision = precision or current_precision()
    x1, x2 = np.asarray(x1), np.asarray(x2)
    expected_dtype = np.dtype(dtype) if dtype is not None else np.result_type(x1, x2)
    x1, x2 = x1.astype(expected_dtype), x2.astype(expected_dtype)
    ref = reference_matmul(x1, x2, expected_dtype)
    k = x1.shape[-1]
    _compare(
        np.asarray(result), ref, lambda: tolerance(x1, x2, expected_dtype, k, precision), expected_dtype, k, precision
    )


@np.errstate(all="ignore")
def assert_contraction_matches(result, subscripts: str, operands, dtype=None, precision: str | None = None) -> None:
    """Check ``result`` against the reference of ``numpy.einsum(subscripts, *operands)`` as
    :func:`assert_matches` does, ``K`` being the number of terms summed into each result (and, for
    the narrow floats, a rounding per pairwise product and per operand summed before one)."""
    from ..notation import parse

    precision = precision or current_precision()
    operands = [np.asarray(x) for x in operands]
    expected_dtype = np.dtype(dtype) if dtype is not None else np.result_type(*operands)
    operands = [x.astype(expected_dtype) for x in operands]
    ref = reference_einsum(subscripts, operands, expected_dtype)
    inputs, output = parse(subscripts, [x.shape for x in operands])
    sizes = {a: n for x, labels in zip(operands, inputs) for a, n in zip(labels, x.shape)}
    k = int(np.prod([n for a, n in sizes.items() if a not in output])) + len(operands) - 1

    def bound():
        mag = np.einsum(subscripts, *(np.abs(x).astype(np.float64) for x in operands))
        return _bound(mag, expected_dtype, k, precision, roundings=2 * len(operands) - 1)

    _compare(np.asarray(result), ref, bound, expected_dtype, k, precision)


@np.errstate(all="ignore")
def _compare(result, ref, tolerance_of, expected_dtype, k, precision) -> None:
    """``result`` against ``ref``: dtype, shape, exact integers, NaN/Inf placement, then values within
    ``tolerance_of()``."""
    assert result.dtype == expected_dtype, f"dtype {result.dtype}, expected {expected_dtype}"
    assert result.shape == ref.shape, f"shape {result.shape}, expected {ref.shape}"
    if expected_dtype.kind in INTEGER_KINDS:
        bad = np.argwhere(result != ref)
        assert bad.size == 0, (
            f"{len(bad)} wrong elements, first at {tuple(bad[0])}: {result[tuple(bad[0])]} != {ref[tuple(bad[0])]}"
        )
        return
    tol = tolerance_of()
    finite = np.isfinite(ref)
    if expected_dtype.kind == "c":
        # Complex Inf arithmetic differs between correct implementations; where the value is finite matters.
        assert np.array_equal(np.isfinite(result), finite), "non-finite values in different places than the reference"
    else:
        assert np.array_equal(np.isnan(result), np.isnan(ref)), "NaN in different places than the reference"
        assert np.array_equal(result[np.isinf(ref)], ref[np.isinf(ref)].astype(result.dtype)), (
            "Inf differs from the reference"
        )
    if expected_dtype.kind == "f" or is_bfloat16(expected_dtype):
        # a finite sum past the type's largest value correctly rounds to +-Inf (float16: from 65520)
        fmax = float(_finfo(expected_dtype).max)
        threshold = fmax + float(_finfo(expected_dtype).eps) * fmax / 4  # max + half an ulp of max
        reach = np.abs(ref) + np.broadcast_to(tol, ref.shape) >= threshold
        overflowed = finite & reach & np.isinf(result) & (np.sign(result) == np.sign(ref))
        finite = finite & ~overflowed
    err = np.abs(result[finite].astype(ref.dtype) - ref[finite]).astype(np.float64)
    bound = np.broadcast_to(tol, ref.shape)[finite]
    if err.size and not np.all(err <= bound):
        worst = np.argmax(err - bound)
        raise AssertionError(
            f"{int(np.sum(err > bound))} elements off; worst error {err[worst]:.3g} exceeds bound "
            f"{bound[worst]:.3g} (K={k}, dtype {expected_dtype}, precision {precision})"
        )
