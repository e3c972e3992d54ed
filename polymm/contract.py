"""The array API's contractions (``tensordot``, ``vecdot``) as one batched product of strided views.

A contraction of two operands is told by labels, one per axis of each operand and of the
result.  Labels of both operands and of the result are the batch; of one operand and the
result, that operand's free axes (``M`` of ``x1``, ``N`` of ``x2``); of both operands only, the
contraction (``K``).  Each operand is then seen as ``batch + (M, K)`` (``batch + (K, N)``): its
axes permuted (a view in every library) and each group merged into one axis (a view where the
group's strides make one stride, else the input library copies), and :func:`polymm.matmul`
computes the product -- the core's own path, so every backend serves it and nothing new is asked
of one.  The result's ``M`` and ``N`` axes are split and permuted into place (views again).

The order of each group's axes is free (the result is permuted back anyway), so it is chosen
to make the merge a view: the caller's order when that merges, else the operand's memory order.
:mod:`polymm.einsum` reduces every einsum to pairs of this kind.
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np

from . import dispatch, promotion
from .arrays import DLPACK, is_dask_array, kind_of
from .precision import check_precision
from .registry import check_algorithm, get_backend, selected_backend

__all__ = ["tensordot", "vecdot", "contract_pair", "run_pair", "namespace", "deliver", "sum_out"]


def tensordot(x1, x2, /, *, axes=2, backend=None, algorithm="auto", out=None, precision=None):
    """The array API's ``tensordot``: ``x1``'s axes ``axes[0]`` contracted with ``x2``'s ``axes[1]``
    (an integer ``n``: ``x1``'s last ``n`` with ``x2``'s first ``n``); the result's axes are
    ``x1``'s free axes then ``x2``'s.  Keywords as :func:`polymm.matmul`."""
    name = "polymm.tensordot"
    options = _options(backend, algorithm, precision)
    key, done = _replayed_or_on_host(
        name, tensordot, ("tensordot", _axes_key(axes)), {"axes": axes}, x1, x2, options, out
    )
    if done is not None:
        return done
    shape1, shape2 = tuple(x1.shape), tuple(x2.shape)
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        count = int(axes)
        if count < 0:
            raise ValueError(f"{name}: axes must be a nonnegative integer or two sequences of axes, got {count}")
        if count > len(shape1) or count > len(shape2):
            raise ValueError(
                f"{name}: axes={count} contracts more axes than x1 (shape {shape1}) or x2 (shape {shape2}) has"
            )
        axes1, axes2 = list(range(len(shape1) - count, len(shape1))), list(range(count))
    else:
        try:
            first, second = axes
            axes1 = [_axis(name, "x1", a, len(shape1)) for a in first]
            axes2 = [_axis(name, "x2", a, len(shape2)) for a in second]
        except (TypeError, ValueError) as exc:
            if isinstance(exc, np.exceptions.AxisError) or str(exc).startswith(name):
                raise
            raise TypeError(
                f"{name}: axes must be a nonnegative integer or a pair of sequences of axes, got {axes!r}"
            ) from None
        if len(axes1) != len(axes2):
            raise ValueError(f"{name}: axes {axes!r} name {len(axes1)} axes of x1 but {len(axes2)} of x2")
        for which, chosen in (("x1", axes1), ("x2", axes2)):
            if len(set(chosen)) != len(chosen):
                raise ValueError(f"{name}: axes {axes!r} repeat an axis of {which}")
    for a1, a2 in zip(axes1, axes2):
        if shape1[a1] != shape2[a2]:
            raise ValueError(
                f"{name}: contracted axes differ in length: axis {a1} of x1 (shape {shape1}) has {shape1[a1]}, "
                f"axis {a2} of x2 (shape {shape2}) has {shape2[a2]}"
            )
    labels1 = [("x1", i) for i in range(len(shape1))]
    labels2 = [("x2", j) for j in range(len(shape2))]
    for a1, a2 in zip(axes1, axes2):
        labels2[a2] = labels1[a1]
    kept = [labels1[i] for i in range(len(shape1)) if i not in axes1]
    kept += [labels2[j] for j in range(len(shape2)) if j not in axes2]
    return deliver(name, _kept_pair(key, False, x1, labels1, x2, labels2, kept, options), out)


def vecdot(x1, x2, /, *, axis=-1, backend=None, algorithm="auto", out=None, precision=None):
    """The array API's ``vecdot``: ``sum(conj(x1) * x2, axis=axis)`` over broadcast operands (the
    vectors' axis counted from the end, and not broadcast).  Keywords as :func:`polymm.matmul`."""
    name = "polymm.vecdot"
    options = _options(backend, algorithm, precision)
    key, done = _replayed_or_on_host(name, vecdot, ("vecdot", axis), {"axis": axis}, x1, x2, options, out)
    if done is not None:
        return done
    shape1, shape2 = tuple(x1.shape), tuple(x2.shape)
    if not shape1 or not shape2:
        raise ValueError(f"{name}: operands must have at least one dimension, got shapes {shape1} and {shape2}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}: axis must be an integer, got {type(axis).__name__} {axis!r}")
    axis = int(axis)
    if axis >= 0:  # counts from the front only where that means one axis of both operands (NumPy's rule)
        if len(shape1) != len(shape2):
            raise ValueError(
                f"{name}: axis must be negative (counted from the last axis) when x1 (shape {shape1}) and "
                f"x2 (shape {shape2}) differ in dimensions, got {axis}"
            )
        axis -= len(shape1)
    least = min(len(shape1), len(shape2))
    if not -least <= axis <= -1:
        raise np.exceptions.AxisError(axis, least, f"{name}: x1 has shape {shape1}, x2 has shape {shape2}")
    if shape1[axis] != shape2[axis]:
        raise ValueError(
            f"{name}: x1 (shape {shape1}) and x2 (shape {shape2}) differ in length along axis {axis} "
            f"({shape1[axis]} and {shape2[axis]})"
        )
    # a label per axis: its place counted from the end, so broadcast batch axes share theirs
    labels1 = [len(shape1) - i for i in range(len(shape1))]
    labels2 = [len(shape2) - j for j in range(len(shape2))]
    kept = [r for r in range(max(len(shape1), len(shape2)), 0, -1) if r != -axis]
    _check_sizes(name, (shape1, shape2), (labels1, labels2))
    conj = _is_complex(x1.dtype)
    if conj:
        x1 = namespace(x1).conj(x1)
    return deliver(name, _kept_pair(key, conj, x1, labels1, x2, labels2, kept, options), out)


def _kept_pair(key, conj, x1, labels1, x2, labels2, kept, options):
    """:func:`contract_pair`, what it did kept under ``key`` (with ``conj``: ``x1`` conjugated
    first) for :func:`_replay_pair`."""
    record = [] if key is not None else None
    result = contract_pair(x1, labels1, x2, labels2, kept, options, record)
    if record is not None:
        keep(_CALLS, key, (record[0], record[1], conj))
    return result


def _replay_pair(known, x1, x2, options):
    plan, last, conj = known
    if conj:
        x1 = namespace(x1).conj(x1)
    return _apply(run_pair(plan, x1, x2, options), last)


def _axes_key(axes):
    """``tensordot``'s ``axes`` as a key: the integer, or the pair of tuples; None where neither."""
    if isinstance(axes, (int, np.integer)):
        return ("n", bool(isinstance(axes, bool)), int(axes))
    try:
        return tuple(tuple(int(a) for a in group) for group in axes)
    except (TypeError, ValueError):
        return None


def layout_key(call, operands):
    """What decides all a contraction does besides its data: ``call`` (the subscripts, or the
    function and its axes) and each operand's type, dtype, shape and strides; None for Dask arrays
    (sizes maybe unknown) and for what is no array."""
    if call is None or (isinstance(call, tuple) and call[-1] is None):
        return None
    try:
        layouts = tuple((type(x), x.dtype, tuple(x.shape), _raw_strides(x)) for x in operands)
        key = (call, id(sys.modules.get("opt_einsum"))) + layouts
        hash(key)
    except (AttributeError, TypeError):
        return None
    if any(is_dask_array(x) for x in operands):
        return None
    return key


def keep(kept, key, value):
    """``kept[key] = value``, ``kept`` emptied first when it holds :data:`_PLANS_KEPT` entries."""
    if len(kept) >= _PLANS_KEPT:
        kept.clear()
    kept[key] = value


#: tensordot and vecdot calls done, by layout (:func:`layout_key`): the plan to replay.
_CALLS: dict = {}


def contract_pair(x1, labels1, x2, labels2, kept, options, record=None):
    """Sum of ``x1 * x2`` over every label not ``kept``, the result's axes in ``kept``'s order (see
    :func:`_pair`); ``record``: a list the pair's plan and the result's last steps are added to
    (:func:`run_pair` replays them)."""
    product, split = _pair(x1, labels1, x2, labels2, set(kept), options, kept, record)
    sizes = dict(zip(split, product.shape))
    last = _grouping(split, sizes, list(kept), [sizes[a] for a in kept])
    if record is not None:
        record.append(tuple(last))
    return _apply(product, last)


def run_pair(plan, x1, x2, options):
    """The product of ``x1`` and ``x2`` by a plan :func:`_pair` made for operands of their layout."""
    product = dispatch.matmul(_apply(x1, plan[0]), _apply(x2, plan[1]), **options)
    return _apply(product, plan[2])


def _pair(x1, labels1, x2, labels2, wanted, options, preferred=None, record=None):
    """``(product, its labels)``: the sum of ``x1 * x2`` over every label not in ``wanted``, by one
    :func:`polymm.matmul` of the operands seen as ``batch + (M, K)`` and ``batch + (K, N)``; its
    axes are the batch, then ``x1``'s free axes, then ``x2``'s (as ``preferred`` orders them where
    the strides allow), a view of the product's C-contiguous result.

    Labels are unique within an operand (diagonals are taken before); a label of length 1 in
    one operand and longer in the other is broadcast; a label of one operand only that is not
    wanted is summed out of it first.

    The reduction is decided once per layout (labels, shapes, strides, dtypes, array types) and
    kept (:data:`_PLANS`): a later call only replays its steps on the new operands -- views,
    the copies the strides force, the sums -- so a contraction costs its products and a few
    microseconds, not the tens it takes to decide."""
    key = _plan_key(x1, labels1, x2, labels2, wanted, preferred)
    plan = _PLANS.get(key) if key is not None else None
    if plan is None:
        steps1, steps2, after = [], [], []
        a, b, split = _plan_pair(x1, list(labels1), x2, list(labels2), wanted, preferred, steps1, steps2, after)
        plan = (tuple(steps1), tuple(steps2), tuple(after), tuple(split))
        if key is not None:
            if len(_PLANS) >= _PLANS_KEPT:
                _PLANS.clear()
            _PLANS[key] = plan
    else:
        a, b = _apply(x1, plan[0]), _apply(x2, plan[1])
    if record is not None:
        record.append(plan)
    product = dispatch.matmul(a, b, **options)
    return _apply(product, plan[2]), list(plan[3])


#: Reductions decided (:func:`_pair`), by layout; cleared when this many are kept.
_PLANS: dict = {}
_PLANS_KEPT = 512


def _plan_key(x1, labels1, x2, labels2, wanted, preferred):
    """What decides :func:`_pair`'s steps: the labels, the operands' types, dtypes, shapes and
    strides; None for Dask arrays (whose sizes may be unknown) and unhashable dtypes."""
    try:
        key = (
            type(x1),
            type(x2),
            x1.dtype,
            x2.dtype,
            tuple(x1.shape),
            tuple(x2.shape),
            _raw_strides(x1),
            _raw_strides(x2),
            tuple(labels1),
            tuple(labels2),
            frozenset(wanted),
            None if preferred is None else tuple(preferred),
        )
        hash(key)
    except TypeError:
        return None
    if is_dask_array(x1) or is_dask_array(x2):  # a Dask array's sizes may be unknown (NaN): never the same key
        return None
    return key


def _raw_strides(x):
    strides = getattr(x, "strides", None)
    if isinstance(strides, tuple):
        return strides
    stride = getattr(x, "stride", None)  # PyTorch
    return tuple(stride()) if callable(stride) else None


def _apply(x, steps):
    """``x`` after ``steps``: ``("permute", axes)``, ``("reshape", shape)``, ``("sum", labels, wanted)``."""
    for step in steps:
        what = step[0]
        if what == "permute":
            x = x.transpose(step[1]) if type(x) is np.ndarray else namespace(x).permute_dims(x, step[1])
        elif what == "reshape":
            if type(x) is np.ndarray:
                x = x.reshape(step[1])
            elif is_dask_array(x) and 0 in tuple(x.shape):  # Dask cannot reshape empty arrays; no element to keep
                x = namespace(x).zeros(step[1], dtype=x.dtype)
            else:
                x = namespace(x).reshape(x, step[1])
        else:
            x = sum_out(x, list(step[1]), step[2])[0]
    return x


def _run(x, steps, more):
    """``x`` after ``more``, which are added to ``steps``."""
    steps.extend(more)
    return _apply(x, more)


def _plan_pair(x1, labels1, x2, labels2, wanted, preferred, steps1, steps2, after):
    """:func:`_pair`'s decisions, made on ``x1`` and ``x2``: ``(A, B, the product's labels)``, the
    steps that made A and B from them added to ``steps1`` / ``steps2``, and those that make the
    product's result from its C-contiguous ``batch + (M, N)`` array to ``after``."""
    sizes1, sizes2 = dict(zip(labels1, x1.shape)), dict(zip(labels2, x2.shape))
    dropped1 = [a for a in labels1 if sizes1[a] == 1 and sizes2.get(a, 1) != 1]
    dropped2 = [a for a in labels2 if sizes2[a] == 1 and sizes1.get(a, 1) != 1]
    if dropped1:  # broadcast against x2: the axes of length 1 go
        labels1 = [a for a in labels1 if a not in dropped1]
        x1 = _run(x1, steps1, [("reshape", tuple(sizes1[a] for a in labels1))])
    if dropped2:
        labels2 = [a for a in labels2 if a not in dropped2]
        x2 = _run(x2, steps2, [("reshape", tuple(sizes2[a] for a in labels2))])
    if any(a not in wanted and a not in labels2 for a in labels1):  # x1's own labels not wanted: summed out first
        x1 = _run(x1, steps1, [("sum", tuple(labels1), frozenset(wanted | set(labels2)))])
        labels1 = [a for a in labels1 if a in wanted or a in labels2]
    if any(a not in wanted and a not in labels1 for a in labels2):
        x2 = _run(x2, steps2, [("sum", tuple(labels2), frozenset(wanted | set(labels1)))])
        labels2 = [a for a in labels2 if a in wanted or a in labels1]
    sizes = dict(zip(labels1, x1.shape)) | dict(zip(labels2, x2.shape))
    in1, in2 = set(labels1), set(labels2)
    strides1, strides2 = _strides(x1, labels1), _strides(x2, labels2)
    order = list(preferred) if preferred is not None else labels1 + [a for a in labels2 if a not in in1]
    batch = [a for a in order if a in in1 and a in in2 and a in wanted]
    rows = _merging_order([a for a in order if a in in1 and a not in in2], sizes, strides1)
    cols = _merging_order([a for a in order if a in in2 and a not in in1], sizes, strides2)
    inner = _shared_order(
        [a for a in labels1 if a in in2 and a not in wanted],
        sizes,
        strides1,
        strides2,
        math.prod(x1.shape),
        math.prod(x2.shape),
    )
    summed = _summed_batch(batch, rows, inner, cols, sizes, strides1, strides2, x1, x2)
    if summed:  # row dots: the contracted axes that would force a copy become batch axes, summed after
        inner = [a for a in inner if a not in summed]
        batch = batch + summed
    lead = [sizes[a] for a in batch]
    m, k, n = (math.prod(sizes[a] for a in group) for group in (rows, inner, cols))
    a = _run(x1, steps1, _matrix(x1, labels1, strides1, batch, rows, inner, lead, m, k))
    b = _run(x2, steps2, _matrix(x2, labels2, strides2, batch, inner, cols, lead, k, n))
    split = batch + rows + cols
    if lead + [m, n] != [sizes[a] for a in split]:  # (batch, M, N) split: a view of the new array
        after.append(("reshape", tuple(sizes[a] for a in split)))
    if summed:
        after.append(("sum", tuple(split), frozenset(split) - frozenset(summed)))
        split = [a for a in split if a not in summed]
    return a, b, split


#: The most elements a summed batch (:func:`_summed_batch`) may add to the product, as a share of
#: the copy it saves: the product then stays a small part of what the copy would have moved.
_SUMMED_SHARE = 1 / 16


def _summed_batch(batch, rows, inner, cols, sizes, strides1, strides2, x1, x2):
    """The fewest contracted labels whose removal lets the rest merge in both operands, where
    their strides forbid one contracted axis (one operand would be copied): as batch axes of the
    product, summed over afterwards, they cost ``batch x them x M x N`` elements instead of a copy
    of the operand -- worth it where ``M x N`` is small (``bij,bji->b``, a batched trace of a
    product: 64 x 256 dot products of 256 over B's columns, then 64 sums of 256, instead of a
    transposed copy of B that cost 3.5x the product). None where the operands merge already,
    where a library does not tell its strides, or where the product would outgrow the copy."""
    if len(inner) < 2 or strides1 is None or strides2 is None:
        return None
    if _merges(inner, sizes, strides1) and _merges(inner, sizes, strides2):
        return None
    copied = min(math.prod(x1.shape), math.prod(x2.shape))
    outer = math.prod(sizes[a] for a in batch + rows + cols)
    best = None
    for count in range(1, len(inner)):
        for moved in itertools.combinations(inner, count):
            rest = [a for a in inner if a not in moved]
            extra = outer * math.prod(sizes[a] for a in moved)
            if extra > copied * _SUMMED_SHARE or (best is not None and extra >= best[0]):
                continue
            order = _shared_order(rest, sizes, strides1, strides2, 0, 0)
            if _merges(order, sizes, strides1) and _merges(order, sizes, strides2):
                best = (extra, list(moved))
        if best is not None:
            return best[1]
    return None


def _matrix(x, labels, strides, batch, first, second, lead, p, q):
    """The steps that make ``x`` ``batch + (first, second)`` (shape ``lead + [p, q]``): views where
    the strides allow; where a group's strides do not merge, the library's copy, laid out with
    ``second``'s axes outermost where that follows ``x``'s memory order more closely (the copy then
    reads ``x`` in long runs: ``aibj,jkbi->ak``'s second operand took 7.5 ms to copy in the order
    ``(ibj, k)``, 0.75 ms as ``(k, ibj)``), seen transposed."""
    order = batch + first + second
    sizes = dict(zip(labels, x.shape))
    if strides is None or (_merges(first, sizes, strides) and _merges(second, sizes, strides)):
        return _grouping(labels, sizes, order, lead + [p, q])
    swapped = batch + second + first

    def reads(o):  # the source's strides in the copy's order, outermost first: larger outer is better
        return [abs(strides[a]) for a in o if sizes[a] != 1]

    if reads(swapped) <= reads(order):
        return _grouping(labels, sizes, order, lead + [p, q])
    axes = tuple(range(len(lead))) + (len(lead) + 1, len(lead))
    return _grouping(labels, sizes, swapped, lead + [q, p]) + [("permute", axes)]


def _grouping(labels, sizes, order, shape):
    """The steps of :func:`_grouped`: a permutation (where the order differs), a reshape (where
    the shape does)."""
    perm = tuple(labels.index(a) for a in order)
    steps = [] if perm == tuple(range(len(perm))) else [("permute", perm)]
    if [sizes[a] for a in order] != list(shape):
        steps.append(("reshape", tuple(shape)))
    return steps


def _grouped(x, labels, order, shape):
    """``x`` with its axes (``labels``) permuted to ``order`` and reshaped to ``shape``: views
    wherever the strides allow."""
    xp = namespace(x)
    if is_dask_array(x) and 0 in tuple(x.shape):  # Dask cannot reshape empty arrays; no element to keep
        return xp.zeros(tuple(shape), dtype=x.dtype)
    perm = [labels.index(a) for a in order]
    if perm != list(range(len(perm))):
        x = xp.permute_dims(x, tuple(perm))
    return x if tuple(x.shape) == tuple(shape) else xp.reshape(x, tuple(shape))


def sum_out(x, labels, wanted):
    """``x`` summed over its labels not in ``wanted``, in its own dtype (wrapping integers,
    ``any`` for bool, float32 accumulation for the 16-bit floats)."""
    axes = tuple(i for i, a in enumerate(labels) if a not in wanted)
    if not axes:
        return x, labels
    xp = namespace(x)
    dtype = promotion.numpy_dtype_of(x.dtype)
    if dtype == np.bool_:
        summed = xp.any(x, axis=axes)
    elif dtype.itemsize == 2 and dtype.kind not in "iu":  # float16, bfloat16: accumulate in float32
        summed = xp.astype(xp.sum(xp.astype(x, xp.float32), axis=axes), x.dtype)
    else:
        summed = xp.sum(x, axis=axes, dtype=x.dtype)
    if isinstance(summed, np.generic):  # NumPy's full reduction is a scalar: polymm returns arrays (a 0-d one)
        summed = np.asarray(summed)
    return summed, [a for i, a in enumerate(labels) if i not in axes]


def _strides(x, labels):
    """Element strides by label, or None where the library does not tell them (Dask, array-api-strict)."""
    strides = getattr(x, "strides", None)
    if isinstance(strides, tuple) and hasattr(x.dtype, "itemsize"):
        size = x.dtype.itemsize
        return dict(zip(labels, (s // size for s in strides)))
    stride = getattr(x, "stride", None)  # PyTorch: elements already
    if callable(stride):
        return dict(zip(labels, stride()))
    return None


def _merges(group, sizes, strides) -> bool:
    """Whether the axes ``group`` (in this order) make one axis of one stride."""
    if strides is None:
        return True  # the library decides (Dask rechunks, array-api-strict copies)
    axes = [a for a in group if sizes[a] != 1]
    return all(strides[p] == strides[q] * sizes[q] for p, q in zip(axes, axes[1:]))


def _memory_order(group, strides):
    return sorted(group, key=lambda a: -abs(strides[a])) if strides is not None else group


def _merging_order(group, sizes, strides):
    """The caller's order of ``group`` where it merges, else the operand's memory order (if that does)."""
    if _merges(group, sizes, strides):
        return group
    other = _memory_order(group, strides)
    return other if _merges(other, sizes, strides) else group


def _shared_order(group, sizes, strides1, strides2, size1, size2):
    """An order of the contracted axes that merges in both operands where one does; else one
    that merges in the larger operand (the smaller is the one copied)."""
    candidates = [group, _memory_order(group, strides1), _memory_order(group, strides2)]
    for order in candidates:
        if _merges(order, sizes, strides1) and _merges(order, sizes, strides2):
            return order
    big = strides1 if size1 >= size2 else strides2
    return next((order for order in candidates if _merges(order, sizes, big)), group)


# -- the input library's operations ---------------------------------------------------------


def namespace(x):
    """The array-API namespace of ``x``'s library (array-api-compat's), or :class:`StridedArrays` for
    an adapter's arrays that have none (PyOpenCL)."""
    xp = _NAMESPACES.get(type(x))
    if xp is not None:
        return xp
    import array_api_compat

    try:
        xp = array_api_compat.array_namespace(x)
    except TypeError:
        kind = kind_of(x)
        if kind is None or kind is DLPACK:
            raise
        xp = StridedArrays(kind)
    if type(x).__module__.partition(".")[0] in ("numpy", "cupy", "torch", "pyopencl"):  # one namespace per type
        _NAMESPACES[type(x)] = xp
    return xp


#: Namespaces by array type, for the libraries whose arrays of one type share one (array-api-compat's
#: look-up costs microseconds, and a contraction asks a few times).
_NAMESPACES: dict = {}


class StridedArrays:
    """The few array-API operations a contraction needs, for arrays with ``transpose``, ``reshape``,
    ``conj`` and ``get`` but no namespace (``pyopencl.array.Array``): permutes and merges are views
    (a copy through the adapter where the strides forbid), sums and diagonals run on the host."""

    float32 = np.float32

    def __init__(self, kind):
        self.kind = kind
        self.linalg = self

    def permute_dims(self, x, axes):
        return x.transpose(axes)

    def reshape(self, x, shape):
        try:
            return x.reshape(shape)
        except ValueError:  # the strides do not merge: a C-contiguous copy does, on the device where it can
            copy = self.kind.broadcast_copy(x, tuple(x.shape), self.kind.elem_strides(x))
            return (copy if copy is not None else self._on_host(x, np.ascontiguousarray)).reshape(shape)

    def conj(self, x):
        return x.conj()

    def astype(self, x, dtype):
        return x.astype(dtype)

    def _on_host(self, x, compute):
        host = np.ascontiguousarray(compute(x.get()))
        result = self.kind.empty(host.shape, host.dtype, like=x)
        result.set(host)
        return result

    def sum(self, x, axis, dtype=None):
        return self._on_host(x, lambda h: np.sum(h, axis=axis, dtype=dtype))

    def any(self, x, axis):
        return self._on_host(x, lambda h: np.any(h, axis=axis))

    def diagonal(self, x):
        return self._on_host(x, lambda h: np.diagonal(h, axis1=-2, axis2=-1))


# -- arguments and results ------------------------------------------------------------------


def _options(backend, algorithm, precision) -> dict:
    """The keywords every product of the contraction takes."""
    return {"backend": backend, "algorithm": algorithm, "precision": precision}


def check_options(options, x) -> None:
    """The errors :func:`polymm.matmul` gives for bad keywords, for contractions that end up
    computing no product (a single operand's sum or transpose of ``x``)."""
    if options["precision"] is not None:
        check_precision(options["precision"])
    if options["backend"] is not None or options["algorithm"] != "auto":
        kind = kind_of(x)
        name = selected_backend(options["backend"], "numpy" if kind in (None, DLPACK) else kind.name)
        check_algorithm(get_backend(name), name, options["algorithm"])


def viewless(operands) -> bool:
    """Whether the operands are of an adapter's library with no array API and no ``transpose``
    (the example's TinyArray): the core computes on them, but cannot view them anew."""
    x = operands[0]
    if type(x).__module__.partition(".")[0] in ("numpy", "dask") or hasattr(x, "transpose"):
        return False
    kind = kind_of(x)
    return kind is not None and kind is not DLPACK and not hasattr(x, "__array_namespace__")


def _replayed_or_on_host(name, function, call_key, keywords, x1, x2, options, out):
    """``(layout key, result)`` of the start every two-operand contraction shares: the result where
    a call laid out so was checked and planned before (replayed), or where the operands have no
    view polymm reads (computed on the host copies); else ``(key, None)``, the operands checked."""
    key = layout_key(call_key, (x1, x2))
    known = _CALLS.get(key) if key is not None else None
    if known is not None:
        return key, deliver(name, _replay_pair(known, x1, x2, options), out)
    _check_arrays(name, x1, x2)
    if viewless((x1, x2)):
        return key, via_host(function, (x1, x2), keywords, options, out)
    return key, None


def via_host(function, operands, keywords, options, out):
    """``function`` of such operands computed on NumPy copies (moved by the chosen backend) and moved back."""
    kind = kind_of(operands[0])
    name = selected_backend(options["backend"], kind.name)
    impl = get_backend(name)
    result = function(*(impl.to_numpy(x) for x in operands), **keywords, **(options | {"backend": name}))
    return deliver(f"polymm.{function.__name__}", impl.from_numpy(np.asarray(result)), out)


def _check_arrays(name, *operands):
    """A ``TypeError`` for what is no array (a list, a scalar), and for unsupported dtypes."""
    for i, x in enumerate(operands):
        which = f"x{i + 1}" if name != "polymm.einsum" else f"operand {i}"
        if not is_dask_array(x) and kind_of(x) is None:
            raise TypeError(
                f"{name}: {which} must be an array, got {dispatch._describe(x)}"
                + (
                    " (convert it with numpy.asarray first)"
                    if isinstance(x, (list, tuple, int, float, complex))
                    else ""
                )
            )
        promotion.check_operand_dtype(promotion.numpy_dtype_of(x.dtype), which, name)


def _check_sizes(name, shapes, label_lists):
    """A ``ValueError`` naming the label whose lengths neither agree nor broadcast (one of them 1)."""
    seen = {}
    for i, (shape, labels) in enumerate(zip(shapes, label_lists)):
        for n, a in zip(shape, labels):
            if n == 1:
                continue
            if a in seen and seen[a][0] != n:
                raise ValueError(
                    f"{name}: operands cannot be broadcast together: shapes {tuple(shapes[seen[a][1]])} and "
                    f"{tuple(shape)} differ in length along {_label_name(a)} ({seen[a][0]} and {n})"
                )
            seen.setdefault(a, (n, i))


def _label_name(a) -> str:
    if isinstance(a, str):
        return f"subscript {a!r}"
    return f"axis {-a}" if isinstance(a, int) else f"axis {a[1]} of {a[0]}"


def _axis(name, which, axis, ndim) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name}: axes of {which} must be integers, got {type(axis).__name__} {axis!r}")
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(int(axis), ndim, f"{name}: axes of {which}")
    return int(axis) % ndim


def _is_complex(dtype) -> bool:
    try:
        return promotion.numpy_dtype_of(dtype).kind == "c"
    except TypeError:
        return False


def deliver(name, result, out):
    """``result``, or ``out`` filled with it (exact shape and dtype, as :func:`polymm.matmul`'s ``out=``;
    computed first, so ``out`` may alias an operand)."""
    if out is None:
        return result
    if is_dask_array(result) or is_dask_array(out):
        raise TypeError(
            f"{name}: out= cannot be used with Dask arrays (they are immutable), got out of type "
            f"{dispatch._describe(out)}; use the returned Dask array"
        )
    kind = kind_of(result)
    if kind is DLPACK:
        if type(out) is not type(result):
            raise TypeError(
                f"{name}: out must be a {dispatch._describe(result)} like the inputs, got {dispatch._describe(out)}"
            )
        if tuple(out.shape) != tuple(result.shape):
            raise ValueError(f"{name}: out has shape {tuple(out.shape)}, the result has shape {tuple(result.shape)}")
        if out.dtype != result.dtype:
            raise TypeError(f"{name}: out has dtype {out.dtype}, the result has dtype {result.dtype}")
        out[...] = result
        return out
    try:
        dispatch._check_out(out, kind, tuple(result.shape), np.dtype(result.dtype))
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("polymm.matmul", name)) from None
    kind.assign(out, result)
    return out
