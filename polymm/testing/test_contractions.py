"""The conformance suite's contractions: ``tensordot``, ``vecdot``, ``linalg`` and ``einsum`` on one backend.

They reach a backend as the same batched products as ``matmul``, so a backend implements
nothing for them; these cases prove it computes them right through that path: every dtype,
operands of permuted and sliced layouts, broadcasting, the standard's errors, ``out=``,
arrays in and out of each library.  Values are checked against the higher-precision
reference (:func:`polymm.testing.reference.assert_contraction_matches`), outputs poisoned.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import polymm
from polymm.testing.reference import assert_contraction_matches, poison, random_array
from polymm.backend import algorithm_serves
from polymm.testing.test_conformance import DTYPES, OPTIONAL, given, rng  # noqa: F401  (rng is a fixture)

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def tensordot_subscripts(ndim1, ndim2, axes1, axes2) -> str:
    """The einsum that means ``tensordot(x1, x2, axes=(axes1, axes2))`` (for the reference)."""
    first = list(LETTERS[:ndim1])
    second = list(LETTERS[ndim1 : ndim1 + ndim2])
    for a1, a2 in zip(axes1, axes2):
        second[a2] = first[a1]
    kept = [c for i, c in enumerate(first) if i not in axes1] + [c for j, c in enumerate(second) if j not in axes2]
    return f"{''.join(first)},{''.join(second)}->{''.join(kept)}"


def vecdot_subscripts(ndim1, ndim2, axis) -> str:
    """The einsum of ``vecdot`` (with ``x1`` conjugated by the caller) over broadcast operands."""
    ndim = max(ndim1, ndim2)
    labels = LETTERS[:ndim]
    kept = labels[: ndim + axis] + labels[ndim + axis + 1 :]
    return f"{labels[ndim - ndim1 :]},{labels[ndim - ndim2 :]}->{kept}"


def computed(inputs, result):
    """A Dask result checked to be lazy, then computed; any other result as NumPy."""
    if inputs == "numpy":
        assert type(result) is np.ndarray, f"NumPy arrays in gave {type(result)} out"
        return result
    from polymm.arrays import is_dask_array

    assert is_dask_array(result), f"Dask arrays in gave {type(result)} out"
    value = result.compute(scheduler="threads")
    assert (value.shape, value.dtype) == (result.shape, result.dtype), "the lazy result's shape/dtype lied"
    return value


def require_served(backend, algorithm, dtype, call, operand):
    """Skip when ``backend`` cannot compute ``dtype`` on this device or ``algorithm`` does not serve
    it, after checking that ``call()`` refuses it with a ``TypeError`` naming the dtype."""
    dtype = np.dtype(dtype)
    impl = polymm.get_backend(backend)
    try:
        impl.check_dtype(dtype, operand)
        if algorithm_serves(impl, algorithm, dtype):
            return
    except TypeError:
        pass
    with pytest.raises(TypeError, match=re.escape(str(dtype))):
        call()
    pytest.skip(f"{backend}/{algorithm} refuses {dtype} on this device (checked: clear TypeError)")


def check(function, subscripts, operands, backend, algorithm="auto", inputs="numpy", dtype=None, **keywords):
    """``function(*operands, **keywords)`` against the reference of ``einsum(subscripts, ...)``,
    without and with a poisoned ``out=``; returns the result."""
    dtype = np.dtype(dtype) if dtype is not None else np.result_type(*operands)
    options = dict(backend=backend, algorithm=algorithm, **keywords)
    if len(operands) == 2 and all(np.size(x) for x in operands):
        require_served(backend, algorithm, dtype, lambda: function(*operands, **options), operands[0])
    result = computed(inputs, function(*(given(inputs, x) for x in operands), **options))
    reference_operands = list(operands)
    if function is polymm.vecdot and np.dtype(dtype).kind == "c":
        reference_operands[0] = np.conj(operands[0])
    assert_contraction_matches(result, subscripts, reference_operands, dtype)
    out = poison(result.shape, dtype)
    if inputs == "dask":
        with pytest.raises(TypeError, match="out="):
            function(*(given(inputs, x) for x in operands), out=out, **options)
        return result
    assert function(*operands, out=out, **options) is out
    assert_contraction_matches(out, subscripts, reference_operands, dtype)
    return result


def einsum_of(subscripts):
    def run(*operands, **options):
        return polymm.einsum(subscripts, *operands, **options)

    return run


# -- every dtype ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + OPTIONAL)
def test_einsum_every_dtype(polymm_backend, polymm_algorithm, dtype, rng):  # noqa: F811
    # attention scores over a permuted key (its last axis contracted in place) and a sliced query
    q = random_array(rng, (2, 3, 9, 2 * 17), dtype)[..., ::2]
    k = random_array(rng, (2, 11, 3, 17), dtype).transpose(0, 2, 1, 3)
    check(einsum_of("bhqd,bhkd->bhqk"), "bhqd,bhkd->bhqk", [q, k], polymm_backend, polymm_algorithm)
    # a tensor-network pair with permuted shared indices
    a = random_array(rng, (5, 4, 7), dtype)
    b = random_array(rng, (7, 6, 5), dtype)
    check(einsum_of("ijk,kli->jl"), "ijk,kli->jl", [a, b], polymm_backend, polymm_algorithm)


@pytest.mark.parametrize("dtype", DTYPES + OPTIONAL)
def test_tensordot_every_dtype(polymm_backend, dtype, rng):  # noqa: F811
    a = random_array(rng, (4, 5, 6), dtype)
    b = random_array(rng, (6, 5, 3), dtype)
    for axes, (axes1, axes2) in ((1, ([2], [0])), (([1, 2], [1, 0]), ([1, 2], [1, 0])), (0, ([], []))):
        result = check(polymm.tensordot, tensordot_subscripts(3, 3, axes1, axes2), [a, b], polymm_backend, axes=axes)
        assert result.shape == np.tensordot(a, b, axes=axes).shape


@pytest.mark.parametrize("dtype", DTYPES + OPTIONAL)
def test_vecdot_every_dtype(polymm_backend, dtype, rng):  # noqa: F811
    x1 = random_array(rng, (3, 1, 33), dtype)
    x2 = random_array(rng, (4, 33), dtype)
    result = check(polymm.vecdot, vecdot_subscripts(3, 2, -1), [x1, x2], polymm_backend)
    assert result.shape == (3, 4)


# -- semantics --------------------------------------------------------------------------------

#: (subscripts, shapes): NumPy's notation in its forms, run on NumPy and on Dask operands.
EINSUMS = [
    ("ij,jk->ik", [(7, 5), (5, 9)]),
    ("ij,jk", [(7, 5), (5, 9)]),  # implicit output
    ("ij,kj->ik", [(7, 5), (9, 5)]),
    ("ji,jk->ki", [(5, 7), (5, 9)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]),
    ("bij,jk->bik", [(3, 4, 5), (5, 6)]),
    ("i,i->", [(33,), (33,)]),
    ("i,i", [(33,), (33,)]),
    ("i,j->ij", [(4,), (5,)]),  # outer product: K = 1
    ("ij,j->i", [(6, 8), (8,)]),
    ("ij,ij->ij", [(1, 5), (4, 5)]),  # broadcast label
    ("ij,jk->ik", [(4, 1), (3, 6)]),  # a broadcast contracted label (NumPy sums the other)
    ("ij,ij->", [(6, 8), (6, 8)]),
    ("ij,ji->i", [(6, 8), (8, 6)]),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 6)]),
    ("abc,cd->", [(2, 3, 4), (4, 5)]),
    ("ij,jk->i", [(4, 5), (5, 6)]),  # k summed out of one operand
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),  # ellipsis broadcast, implicit output
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]),
    ("i...,i...->...", [(5, 2, 3), (5, 1, 3)]),
    ("ii", [(6, 6)]),  # trace
    ("ii->i", [(6, 6)]),  # diagonal
    ("ij->ji", [(4, 6)]),
    ("ijk->", [(3, 4, 5)]),
    ("iij->j", [(4, 4, 3)]),
    ("bii,bij->bj", [(2, 4, 4), (2, 4, 3)]),  # batched trace-like: a diagonal, then a product
    ("ii,ij->j", [(5, 5), (5, 3)]),
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 3)]),  # three operands, pairwise
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("i,ij,j->", [(5,), (5, 6), (6,)]),  # a bilinear form
    ("ij,jk->ik", [(0, 5), (5, 3)]),  # empty results
    ("ij,jk->ik", [(4, 0), (0, 3)]),  # empty contraction: zeros
    (",ij->ij", [(), (3, 4)]),  # a 0-d operand scales
]


@pytest.mark.parametrize("subscripts,shapes", EINSUMS, ids=[s for s, _ in EINSUMS])
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_einsum_notation(polymm_backend, subscripts, shapes, dtype, polymm_inputs, rng):  # noqa: F811
    operands = [random_array(rng, shape, dtype) for shape in shapes]
    result = check(einsum_of(subscripts), subscripts, operands, polymm_backend, inputs=polymm_inputs)
    assert result.shape == np.einsum(subscripts, *operands).shape


TENSORDOTS = [
    ((3, 4, 5), (4, 5, 6), 2),
    ((3, 4, 5), (5, 6), 1),
    ((3, 4), (5, 6), 0),
    ((3, 4, 5), (4, 3, 2), ([1, 0], [0, 1])),
    ((3, 4, 5), (5, 3), ([-1, 0], [0, -1])),
    ((4,), (4,), 1),
    ((), (3, 2), 0),
    ((2, 0, 3), (0, 3, 4), 2),
]


@pytest.mark.parametrize("s1,s2,axes", TENSORDOTS, ids=[f"{a}.{b}-{c}" for a, b, c in TENSORDOTS])
def test_tensordot_axes(polymm_backend, s1, s2, axes, polymm_inputs, rng):  # noqa: F811
    x1 = random_array(rng, s1, "float32")
    x2 = random_array(rng, s2, "float32")
    if isinstance(axes, int):
        axes1, axes2 = list(range(len(s1) - axes, len(s1))), list(range(axes))
    else:
        axes1, axes2 = ([a % len(s) for a in ax] for ax, s in zip(axes, (s1, s2)))
    subscripts = tensordot_subscripts(len(s1), len(s2), axes1, axes2)
    result = check(polymm.tensordot, subscripts, [x1, x2], polymm_backend, inputs=polymm_inputs, axes=axes)
    assert result.shape == np.tensordot(x1, x2, axes=axes).shape


VECDOTS = [((5,), (5,), -1), ((3, 5), (5,), -1), ((2, 1, 5), (4, 5), -1), ((5, 3), (5, 3), -2), ((2, 5, 3), (5, 1), -2)]


@pytest.mark.parametrize("s1,s2,axis", VECDOTS, ids=[f"{a}.{b}-{c}" for a, b, c in VECDOTS])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_vecdot_broadcasts_and_conjugates(polymm_backend, s1, s2, axis, dtype, polymm_inputs, rng):  # noqa: F811
    x1 = random_array(rng, s1, dtype)
    x2 = random_array(rng, s2, dtype)
    subscripts = vecdot_subscripts(len(s1), len(s2), axis)
    result = check(polymm.vecdot, subscripts, [x1, x2], polymm_backend, inputs=polymm_inputs, axis=axis)
    assert result.shape == np.vecdot(x1, x2, axis=axis).shape
    np.testing.assert_allclose(result, np.vecdot(x1, x2, axis=axis), rtol=1e-12, atol=1e-12)


def test_vecdot_conjugates_x1_only(polymm_backend):
    x1 = np.array([1 + 2j, 3 - 1j], np.complex128)
    x2 = np.array([2 - 1j, 1j], np.complex128)
    result = polymm.vecdot(x1, x2, backend=polymm_backend)
    assert result == (1 - 2j) * (2 - 1j) + (3 + 1j) * 1j


def test_linalg_namespace(polymm_backend, rng):  # noqa: F811
    assert polymm.linalg.matmul is polymm.matmul
    assert polymm.linalg.tensordot is polymm.tensordot
    assert polymm.linalg.vecdot is polymm.vecdot
    x1 = random_array(rng, (3, 6, 5), "float32")
    x2 = random_array(rng, (5, 4), "float32")
    assert_contraction_matches(polymm.linalg.matmul(x1, x2, backend=polymm_backend), "bij,jk->bik", [x1, x2])


@pytest.mark.parametrize("dtype", ["int8", "uint64", "bool"])
def test_integers_wrap_and_bools_or(polymm_backend, dtype, rng):  # noqa: F811
    # full-range integers: products and sums wrap exactly like NumPy's; bool is any-of-and
    a = random_array(rng, (3, 40, 7), dtype)
    b = random_array(rng, (7, 40, 5), dtype)
    result = check(einsum_of("aik,kib->ab"), "aik,kib->ab", [a, b], polymm_backend)
    np.testing.assert_array_equal(result, np.einsum("aik,kib->ab", a, b))


def test_float16_accumulates_in_float32(polymm_backend):
    # 4096 ones: a float16 accumulator stops at 2048
    x1 = np.ones((2, 64, 64), np.float16)
    x2 = np.ones((64, 64, 3), np.float16)
    require_served(polymm_backend, "auto", "float16", lambda: polymm.tensordot(x1, x2, backend=polymm_backend), x1)
    result = polymm.tensordot(x1, x2, axes=2, backend=polymm_backend)
    np.testing.assert_array_equal(result, np.full((2, 3), 4096, np.float16))


def test_nan_propagates(polymm_backend, rng):  # noqa: F811
    a = random_array(rng, (4, 5, 6), "float32")
    b = random_array(rng, (6, 5, 3), "float32")
    a[1, 2, 3] = np.nan
    b[0, 1, 2] = np.inf
    check(einsum_of("ijk,kjl->il"), "ijk,kjl->il", [a, b], polymm_backend)


def test_out_may_alias_an_operand(polymm_backend, rng):  # noqa: F811
    x1 = random_array(rng, (6, 6), "float64")
    x2 = random_array(rng, (6, 6), "float64")
    expected = np.einsum("ij,kj->ik", x1, x2)
    keep = x1.copy()
    assert polymm.einsum("ij,kj->ik", x1, x2, out=x1, backend=polymm_backend) is x1
    np.testing.assert_allclose(x1, expected, rtol=1e-12)
    assert_contraction_matches(x1, "ij,kj->ik", [keep, x2])


def test_out_is_checked(polymm_backend, rng):  # noqa: F811
    x1 = random_array(rng, (3, 4), "float32")
    x2 = random_array(rng, (4, 5), "float32")
    for function, args, keywords in ((polymm.tensordot, (x1, x2), {"axes": 1}), (polymm.einsum, ("ij,jk", x1, x2), {})):
        with pytest.raises(ValueError, match=r"shape \(3, 4\).*\(3, 5\)"):
            function(*args, out=np.empty((3, 4), np.float32), backend=polymm_backend, **keywords)
        with pytest.raises(TypeError, match="float64"):
            function(*args, out=np.empty((3, 5), np.float64), backend=polymm_backend, **keywords)
    with pytest.raises(ValueError, match="read-only"):
        out = np.empty(4, np.float32)
        out.flags.writeable = False
        polymm.vecdot(x1.T.copy(), x1.T.copy(), out=out, backend=polymm_backend)


# -- errors -----------------------------------------------------------------------------------


def assert_names(exc, message):
    """``message``'s parts (literal text, ``.*`` between them) appear in ``exc``'s message, in order."""
    text, at = str(exc), 0
    for part in message.split(".*"):
        found = text.find(part, at)
        assert found >= 0, f"{part!r} not in the message (after position {at}): {text}"
        at = found + len(part)


BAD_EINSUMS = [
    ("ij,jk->ik", [(3, 4), (5, 6)], "'j'.*4 and 5"),
    ("ij,jk,kl->il", [(3, 4), (4, 5)], "3 operand.*2 were given"),
    ("ij->ji", [(3, 4), (4, 5)], "1 operand.*2 were given"),
    ("ij,jk->ikk", [(3, 4), (4, 5)], "'k' appears more than once"),
    ("ij,jk->iz", [(3, 4), (4, 5)], "'z' appears in no operand"),
    ("i1,jk", [(3, 4), (4, 5)], "invalid subscript '1'"),
    ("ijk,jk", [(3, 4), (4, 5)], "operand 0 has 2 dimension"),
    ("ii->i", [(3, 4)], "'i' repeats in operand 0.*3 and 4"),
    ("...ij->ij", [(2, 3, 4)], "no '...'"),
    ("ij->->ij", [(3, 4)], "at most one '->'"),
]


@pytest.mark.parametrize("subscripts,shapes,message", BAD_EINSUMS, ids=[s for s, _, _ in BAD_EINSUMS])
def test_einsum_errors_name_the_problem(polymm_backend, subscripts, shapes, message, polymm_inputs):
    operands = [given(polymm_inputs, np.ones(shape, np.float32)) for shape in shapes]
    with pytest.raises(ValueError) as caught:
        polymm.einsum(subscripts, *operands, backend=polymm_backend)
    assert_names(caught.value, message)


BAD_TENSORDOTS = [
    ((3, 4), (5, 6), 1, ValueError, r"axis 1 of x1.*has 4, axis 0 of x2.*has 5"),
    ((3, 4), (4, 6), -1, ValueError, "nonnegative"),
    ((3, 4), (4, 6), 3, ValueError, "more axes than"),
    ((3, 4), (4, 6), ([2], [0]), np.exceptions.AxisError, "axis 2 is out of bounds"),
    ((3, 4), (4, 4), ([1, 1], [0, 1]), ValueError, "repeat an axis of x1"),
    ((3, 4), (4, 6), ([1], [0, 1]), ValueError, "1 axes of x1 but 2 of x2"),
    ((3, 4), (4, 6), "x", TypeError, "axes must be"),
]


@pytest.mark.parametrize("s1,s2,axes,error,message", BAD_TENSORDOTS, ids=[str(c[2]) for c in BAD_TENSORDOTS])
def test_tensordot_errors(polymm_backend, s1, s2, axes, error, message, polymm_inputs):
    x1, x2 = (given(polymm_inputs, np.ones(s, np.float32)) for s in (s1, s2))
    with pytest.raises(error) as caught:
        polymm.tensordot(x1, x2, axes=axes, backend=polymm_backend)
    assert_names(caught.value, message)


BAD_VECDOTS = [
    ((3, 4), (3, 5), -1, ValueError, "differ in length along axis -1"),
    ((3, 4), (2, 4), -1, ValueError, "cannot be broadcast"),
    ((3, 4), (4,), -2, np.exceptions.AxisError, "out of bounds"),
    ((3, 4), (4,), 0, ValueError, "axis must be negative"),
    ((), (4,), -1, ValueError, "at least one dimension"),
]


@pytest.mark.parametrize("s1,s2,axis,error,message", BAD_VECDOTS, ids=[f"{c[0]}.{c[1]}-{c[2]}" for c in BAD_VECDOTS])
def test_vecdot_errors(polymm_backend, s1, s2, axis, error, message, polymm_inputs):
    x1, x2 = (given(polymm_inputs, np.ones(s, np.float32)) for s in (s1, s2))
    with pytest.raises(error) as caught:
        polymm.vecdot(x1, x2, axis=axis, backend=polymm_backend)
    assert_names(caught.value, message)


def test_bad_operands_and_keywords(polymm_backend):
    x = np.ones((3, 3), np.float32)
    with pytest.raises(TypeError, match=r"polymm.einsum: operand 1 must be an array.*list"):
        polymm.einsum("ij,jk", x, [[1.0]], backend=polymm_backend)
    with pytest.raises(TypeError, match="polymm.tensordot: x1 has unsupported dtype <U1"):
        polymm.tensordot(np.array(["a"]), x, axes=0, backend=polymm_backend)
    with pytest.raises(ValueError, match="known backends"):
        polymm.vecdot(x, x, backend="no-such-backend")
    with pytest.raises(ValueError, match="no algorithm 'no-such'"):
        polymm.einsum("ij,jk", x, x, backend=polymm_backend, algorithm="no-such")
    with pytest.raises(ValueError, match="no algorithm 'no-such'"):  # no product computed, still checked
        polymm.einsum("ij->ji", x, backend=polymm_backend, algorithm="no-such")
    with pytest.raises(ValueError, match="tf32x3"):
        polymm.einsum("ii", x, precision="fp8")
    with pytest.raises(TypeError, match="different array libraries"):
        torch = pytest.importorskip("torch")
        polymm.einsum("ij,jk", x, torch.ones(3, 3), backend=polymm_backend)


# -- choices, and arrays of each library --------------------------------------------------------


def test_scoped_choices_apply(polymm_backend, rng):  # noqa: F811
    x1 = random_array(rng, (9, 40), "float32")
    x2 = random_array(rng, (40, 7), "float32")
    with polymm.use_backend(polymm_backend), polymm.use_precision("tf32"):
        result = polymm.einsum("ik,kj->ij", x1, x2)
    assert_contraction_matches(result, "ik,kj->ij", [x1, x2], precision="tf32")
    exact = polymm.tensordot(x1, x2, axes=1, backend=polymm_backend, precision="default")
    assert_contraction_matches(exact, "ik,kj->ij", [x1, x2], precision="default")


def test_contractions_native_arrays_in_native_arrays_out(polymm_backend, rng):  # noqa: F811
    backend = polymm.get_backend(polymm_backend)
    a = random_array(rng, (2, 3, 9, 8), "float32")
    b = random_array(rng, (2, 3, 7, 8), "float32")
    d1, d2 = backend.from_numpy(a), backend.from_numpy(b)
    cases = [
        ("bhqd,bhkd->bhqk", lambda: polymm.einsum("bhqd,bhkd->bhqk", d1, d2, backend=polymm_backend), [a, b]),
        ("bhqd,bhkd->kq", lambda: polymm.einsum("bhqd,bhkd->kq", d1, d2, backend=polymm_backend), [a, b]),
        (
            "abcd,abed->ce",
            lambda: polymm.tensordot(d1, d2, axes=([0, 1, 3], [0, 1, 3]), backend=polymm_backend),
            [a, b],
        ),
        ("abcd,abcd->abc", lambda: polymm.vecdot(d1, d1, backend=polymm_backend), [a, a]),
    ]
    for subscripts, compute, operands in cases:
        result = compute()
        assert type(result) is type(d1), f"{subscripts}: {type(d1)} in gave {type(result)} out"
        assert_contraction_matches(backend.to_numpy(result), subscripts, operands)
    out = backend.from_numpy(poison((2, 3, 9, 7), "float32"))
    assert polymm.einsum("bhqd,bhkd->bhqk", d1, d2, backend=polymm_backend, out=out) is out
    assert_contraction_matches(backend.to_numpy(out), "bhqd,bhkd->bhqk", [a, b])


def test_torch_tensors_in_and_out(polymm_backend, rng):  # noqa: F811
    torch = pytest.importorskip("torch")
    a = random_array(rng, (2, 5, 4), "complex64")
    b = random_array(rng, (2, 6, 4), "complex64")
    result = polymm.einsum("bqd,bkd->bkq", torch.from_numpy(a), torch.from_numpy(b), backend=polymm_backend)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.complex64
    assert_contraction_matches(result.numpy(), "bqd,bkd->bkq", [a, b])
    result = polymm.vecdot(torch.from_numpy(a), torch.from_numpy(a), backend=polymm_backend)
    assert_contraction_matches(result.numpy(), "bqd,bqd->bq", [a.conj(), a])
    out = torch.full((2, 5, 2, 6), float("nan"), dtype=torch.complex64)
    returned = polymm.tensordot(
        torch.from_numpy(a), torch.from_numpy(b), axes=([2], [2]), backend=polymm_backend, out=out
    )
    assert returned is out
    assert_contraction_matches(out.numpy(), "aqd,bkd->aqbk", [a, b])


def test_contractions_array_api_strict_in_and_out(polymm_backend, rng):  # noqa: F811
    xp = pytest.importorskip("array_api_strict")
    a = random_array(rng, (3, 8, 5), "float64")
    b = random_array(rng, (5, 8), "float64")
    result = polymm.tensordot(xp.asarray(a), xp.asarray(b), axes=([1, 2], [1, 0]), backend=polymm_backend)
    assert type(result) is type(xp.asarray(a))
    assert_contraction_matches(np.asarray(result), "aij,ji->a", [a, b])
    result = polymm.linalg.vecdot(xp.asarray(a), xp.asarray(a), axis=-2, backend=polymm_backend)
    assert_contraction_matches(np.asarray(result), "aij,aij->aj", [a, a])
    with pytest.raises(TypeError):  # array-api-strict's own promotion forbids int with float
        polymm.tensordot(xp.asarray(a), xp.asarray(np.ones((5, 8), np.int32)), axes=([1, 2], [1, 0]))


def test_reports_where_a_product_would_be_wrong(polymm_backend, rng):  # noqa: F811
    """The suite's own check: a result off by one element is refused."""
    a = random_array(rng, (4, 5), "float32")
    b = random_array(rng, (5, 3), "float32")
    result = polymm.einsum("ij,jk->ik", a, b, backend=polymm_backend)
    result[1, 2] += 1e-3 * (1 + abs(result[1, 2]))
    with pytest.raises(AssertionError, match=re.escape("1 elements off")):
        assert_contraction_matches(result, "ij,jk->ik", [a, b])
