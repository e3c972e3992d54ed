"""``polymm.matmul``: the array-API work done once, then a plain batched product per backend.

Steps: identify the array library -> result dtype by that library's promotion
-> shape rules (:mod:`polymm.shapes`) -> choose the backend (:mod:`polymm.registry`)
-> cast and move operands into the backend's array type -> ``(B, M, K)`` operands
(strided NumPy views for host backends, :class:`~polymm.backend.Operand` for the
others; broadcast batches get stride 0, nothing is materialised) -> the backend
computes into a C-contiguous ``(B, M, N)`` buffer -> ``out=`` and foreign arrays.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from . import promotion
from .arrays import (
    DLPACK,
    PLAIN_TYPES,
    is_dask_array,
    kind_for_dlpack_device,
    kind_named,
    kind_of,
    refused_subclass,
    unowned_reason,
)
from .backend import is_bfloat16
from .precision import current as current_precision
from .precision import use_precision
from .registry import _replays, check_algorithm, get_backend, plain_entry, plugin_of, selected_backend
from .shapes import c_strides, collapse_batch, matmul_shape, matrix_strides

__all__ = ["matmul"]


#: ``x1 @ x2`` for Dask arrays (:func:`polymm.dask.matmul`), wired in by the package's
#: ``__init__``: the lazy layer calls this module for every block, so this module never imports it.
lazy_matmul = None
#: ``x1 @ x2`` for PyTorch tensors that require grad (:func:`polymm.autograd.matmul`), wired in the same way.
grad_matmul = None


def _describe(x) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


def _kind_of(x1, x2):
    """The adapter both operands belong to (or :data:`~polymm.arrays.DLPACK`)."""
    k1, k2 = kind_of(x1), kind_of(x2)
    for which, x, k in (("x1", x1, k1), ("x2", x2, k2)):
        if k is None:
            hint = (
                " (convert it with numpy.asarray first)"
                if isinstance(x, (list, tuple, int, float, complex, bool))
                else ""
            )
            why = unowned_reason(x)
            hint += f" (its library's polymm adapter failed: {why})" if why else ""
            raise TypeError(f"polymm.matmul: {which} must be an array, got {_describe(x)}{hint}")
        if type(x) is not np.ndarray:
            refused = refused_subclass(x)
            if refused:
                raise TypeError(f"polymm.matmul: {which} is {refused}")
    if k1 is not k2 or (k1 is DLPACK and type(x1) is not type(x2)):
        raise TypeError(
            f"polymm.matmul: x1 and x2 come from different array libraries "
            f"({_describe(x1)} and {_describe(x2)}); convert one of them first"
        )
    return k1


def matmul(x1, x2, /, *, backend: str | None = None, algorithm: str = "auto", out=None, precision: str | None = None):
    """``x1 @ x2`` with the array API's semantics, computed by a polymm backend.

    ``backend`` picks a backend by name (else :func:`use_backend`, then
    ``POLYMM_BACKEND``, then the inputs' device); ``algorithm`` picks one of
    that backend's kernels; ``out`` receives the result and is returned;
    ``precision`` is the least float32 precision accepted (see
    :mod:`polymm.precision`; else :func:`use_precision`'s, else ``"default"``).
    Dask arrays give a lazy Dask array (see :mod:`polymm.dask`).
    """
    if precision is not None and precision != current_precision():  # backends read it with current()
        with use_precision(precision):
            return matmul(x1, x2, backend=backend, algorithm=algorithm, out=out)
    if type(x2) is type(x1) and (out is None or type(out) is np.ndarray):  # the short paths, for types seen before
        plain = PLAIN_TYPES.get(type(x1))
        if plain is not None:
            result = _matmul_plain(plain, x1, x2, backend, algorithm, out)
        elif out is not None:
            result = None
        else:
            native = _VIEWERS.get(type(x1))
            result = None if native is None else _matmul_viewed(native, x1, x2, backend, algorithm)
        if result is not None:
            return result
    if is_dask_array(x1) or is_dask_array(x2):  # a lazy result, built in its own module (Dask is optional)
        return lazy_matmul(x1, x2, backend=backend, algorithm=algorithm, out=out)
    kind = _kind_of(x1, x2)
    if kind is DLPACK:
        return _matmul_foreign(x1, x2, backend, algorithm, out)
    library = kind.name

    promotion.check_operand_dtype(x1.dtype, "x1")
    promotion.check_operand_dtype(x2.dtype, "x2")
    dtype = promotion.check_operand_dtype(kind.result_type(x1, x2), "the result").newbyteorder("=")
    shape = matmul_shape(tuple(x1.shape), tuple(x2.shape))

    name = selected_backend(backend, library)
    impl = get_backend(name)
    check_algorithm(impl, name, algorithm)
    compute = impl.array_library
    if library != compute and library != "numpy":
        raise TypeError(
            f"polymm.matmul: backend {name!r} computes on {compute} arrays and cannot take "
            f"{library} arrays on {kind.device(x1)}; move them to the host or choose another backend"
        )
    if out is not None:
        _check_out(out, kind, shape.result, dtype)

    impl.check_dtype(dtype, x1)
    if library != compute:
        # Cast on the host: devices may lack conversions (float16 without cl_khr_fp16) or byte swaps.
        # Lent, not copied: the operands are only read, and only within this call.
        # (a backend that does not subclass polymm.Backend may lack both: copies, as before)
        lend, lend_result = getattr(impl, "lend_numpy", impl.from_numpy), getattr(impl, "lend_result", None)
        lend_out = getattr(impl, "lend_out", None) if _lendable_out(out, x1, x2) else None
        x1, x2 = (lend(x if x.dtype == dtype else x.astype(dtype)) for x in (x1, x2))
        kind = kind_named(compute)
        into = lend_out(out, x1) if lend_out else None  # None: its own allocation
        if into is None and lend_result:
            into = lend_result(shape.result, dtype, x1)
    else:
        into = out
    result = _compute(impl, kind, x1, x2, shape, dtype, algorithm, into)
    if library != compute:
        result = impl.to_numpy(result)
        if out is not None:
            if result is not out:  # a result written into ``out`` itself (lend_out) is there already
                out[...] = result
            return out
    return result


def _lendable_out(out, x1, x2) -> bool:
    """Whether a backend may write the result straight into ``out`` (:meth:`Backend.lend_out`):
    one C-contiguous, aligned, writeable NumPy array that shares no memory with an operand (a
    product written over its own operands would read what it has already written)."""
    return (
        type(out) is np.ndarray
        and out.flags.c_contiguous
        and out.flags.aligned
        and out.flags.writeable
        and not any(np.may_share_memory(out, x) for x in (x1, x2))
    )


def _matmul_plain(kind, x1, x2, backend, algorithm, out=None):
    """The common cases without the general machinery (it dominates the cost of small products):
    two non-empty operands of one library and dtype, computed by a backend of that library --
    2-D matrices for a host library; for a device library also vectors and 3-D batches (equal
    batch sizes, or a matrix or vector shared by every entry), handed over as strided operands,
    and a product seen before replayed (see :func:`_replay_key`). ``out``: NumPy's 2-D products
    only (:func:`_plain_out`).

    Returns None whenever any general rule might apply, so the general path decides.
    """
    if kind is None:
        return None
    dtype = x1.dtype
    if x2.dtype != dtype or (dtype not in promotion.SUPPORTED and not is_bfloat16(dtype)):
        return None
    if out is not None and (not kind.views or kind.name != "numpy" or x1.ndim != 2):
        return None
    if kind.views:  # a host library: 2-D, through the backend's 2-D entry (found once per backend and dtype)
        if x1.ndim == 3 and x2.ndim in (2, 3) and kind.name == "numpy":
            return _matmul_plain_batch(kind, x1, x2, backend, algorithm)
        if x1.ndim != 2 or x2.ndim != 2:
            return None
        m, k = x1.shape
        k2, n = x2.shape
        if k != k2 or not (m and n and k):
            return None
        s1, s2 = x1.strides, x2.strides
        if (s1[0] | s1[1] | s2[0] | s2[1]) % dtype.itemsize:
            return None
        if out is not None and not _plain_out(out, x1, x2, (m, n)):
            return None
        return _host_entry(kind, backend, algorithm, x1, x2, x2, (m, n), into=out)
    key = _replay_key(kind, x1, x2, backend, algorithm)
    if key is not None:
        known = _REPLAYS.get(key)
        if known is not None:
            return kind.replay(x1, x2, *known)
    done = _plain_device(kind, x1, x2, backend, algorithm, None)
    if done is None:
        return None
    _remember(key, done, algorithm)
    return done[0]


def _plain_out(out, x1, x2, shape) -> bool:
    """Whether the short path may write a 2-D product of ``x1`` and ``x2`` into ``out``: a
    C-contiguous, writeable plain NumPy array of the result's shape and dtype that cannot overlap
    either operand (the bounds test of ``numpy.may_share_memory``). Anything else goes the general
    way, which checks ``out`` and says what is wrong with it. The general path cost 25-28 us more
    a call (a 32 x 32 float32 product: 30 us against 3 without ``out``; 2-core Xeon, 2026-11-28)."""
    return (
        out.shape == shape
        and out.dtype == x1.dtype
        and out.flags.c_contiguous
        and out.flags.writeable
        and not np.may_share_memory(out, x1)
        and not np.may_share_memory(out, x2)
    )


def _matmul_plain_batch(kind, x1, x2, backend, algorithm):
    """:func:`_matmul_plain` for a host library's 3-D batch times an equal batch or one matrix
    shared by every entry (stride 0): the operands handed to the backend's ``matmul`` as they
    lie. The general path's checks, shapes and views cost 50-90 us a call on a 2-core VM, a third
    of NumPy's time on a batch of 4096 products of 8 x 8 (2026-11-28)."""
    dtype = x1.dtype
    size = dtype.itemsize
    count, m, k = x1.shape
    s1 = x1.strides
    s2 = x2.strides
    if x2.ndim == 3:
        count2, k2, n = x2.shape
        if count2 != count:
            return None
    else:
        k2, n = x2.shape
    if k != k2 or not (count and m and n and k) or (s1[0] | s1[1] | s1[2] | s2[0] | s2[1] | s2[-1]) % size:
        return None
    b = x2 if x2.ndim == 3 else kind.operand(x2, (count, k, n), (0, s2[0] // size, s2[1] // size))
    return _host_entry(kind, backend, algorithm, x1, x2, b, (count, m, n), batched=True)


def _host_entry(kind, backend, algorithm, x1, x2, b, shape, batched=False, into=None):
    """``x1 @ b`` (``b``: ``x2`` as the kernel reads it) into a new result of ``shape`` (or
    ``into``) through the backend's host entry (found once per backend and dtype); None where it
    has none. An error is labelled with the call it came from."""
    name = selected_backend(backend, kind.name)
    compute = plain_entry(name, kind, algorithm, x1.dtype, x1, batched=batched)
    if compute is None:
        return None
    result = kind.empty(shape, x1.dtype, like=x1) if into is None else into
    try:  # free unless raised (3.11+)
        compute(x1, b, result, algorithm)
    except Exception as exc:
        _label(exc, name, x1, x2, algorithm)
        raise
    return result


def _replay_key(kind, x1, x2, backend, algorithm):
    """The key a product of ``x1`` and ``x2`` is replayed under: what the array adapter says
    decides its plan besides the operands' addresses (``kind.call_key``: layouts, dtype, device,
    alignment), the backend's name, the algorithm and the precision mode; None where the adapter
    never replays.  A backend that can (``replayable``: its plan launched again on other
    addresses) gives :func:`_remember` the launch; the next call with the key only allocates its
    result and launches (``kind.replay``): operands, checks and plan lookup skipped."""
    key = kind.call_key(x1, x2)
    if key is None:
        return None
    return key + (selected_backend(backend, kind.name), algorithm, current_precision())


def _remember(key, done, algorithm) -> None:
    """Keep the launch of product ``done`` (what :func:`_plain_device` returned) under ``key``."""
    if key is None or not hasattr(done[1], "replayable"):
        return
    launch = done[1].replayable(*done[2], algorithm)
    if launch is not None:
        if len(_REPLAYS) >= _REPLAYS_KEPT:
            _REPLAYS.clear()
        _REPLAYS[key] = (tuple(done[0].shape), launch)


def _plain_device(kind, x1, x2, backend, algorithm, out):
    """:func:`_matmul_plain` for a device library: ``(result, backend, its three operands)``
    once computed, or None."""
    dtype = x1.dtype
    a = _plain_operand(x1, dtype.itemsize, True)
    b = _plain_operand(x2, dtype.itemsize, False)
    if a is None or b is None:
        return None
    (batch_a, m, k, sa), (batch_b, k2, n, sb) = a, b
    batch = batch_b if batch_a is None else batch_a
    if k != k2 or None not in (batch_a, batch_b) and batch_a != batch_b or not (m and n and k and batch != 0):
        return None
    impl = get_backend(selected_backend(backend, kind.name))
    if impl.array_library != kind.name or algorithm not in impl.algorithms:
        return None
    impl.check_dtype(dtype, x1)
    shape = ((batch,) if batch else ()) + ((m,) if x1.ndim > 1 else ()) + ((n,) if x2.ndim > 1 else ())
    result = kind.empty(shape, dtype, like=x1) if out is None else out
    count = batch or 1
    operands = (
        kind.operand(x1, (count, m, k), sa),
        kind.operand(x2, (count, k, n), sb),
        kind.operand(result, (count, m, n), (m * n, n, 1)),
    )
    _call(impl, *operands, algorithm)
    return result, impl, operands


def _plain_operand(x, size, is_x1):
    """``(batch or None, rows, cols, element strides (batch, row, col))`` of a 1-, 2- or 3-D
    operand of the short path (a vector is x1's row or x2's column); None for anything else."""
    st = x.strides  # (spelled out: a generator over the strides cost a microsecond per call)
    if len(st) == 2:
        s0, s1 = st
        if s0 % size or s1 % size:
            return None
        rows, cols = x.shape
        return None, rows, cols, (0, s0 // size, s1 // size)
    if len(st) == 3:
        s0, s1, s2 = st
        if s0 % size or s1 % size or s2 % size:
            return None
        count, rows, cols = x.shape
        return count, rows, cols, (s0 // size, s1 // size, s2 // size)
    if len(st) == 1 and st[0] % size == 0:
        return (None, 1, x.shape[0], (0, 0, st[0] // size)) if is_x1 else (None, x.shape[0], 1, (0, st[0] // size, 0))
    return None


def _call(impl, a, b, out, algorithm, method=None) -> None:
    """``impl.matmul(a, b, out, algorithm)`` (or ``method``'s), an exception it raises labelled
    with the backend."""
    try:
        (method or impl.matmul)(a, b, out, algorithm)
    except Exception as exc:
        _label(exc, impl.name, a, b, algorithm)
        raise


def _label(exc, name, a, b, algorithm) -> None:
    """Add a note naming the backend (and its plugin) to an exception raised inside it: a
    backend's own error (a broadcast error, say) must not read as the caller's mistake."""
    note = (
        f"raised inside {plugin_of(name)}, computing {tuple(a.shape)} @ {tuple(b.shape)} "
        f"{getattr(a, 'dtype', '?')} with algorithm {algorithm!r}"
    )
    if hasattr(exc, "add_note") and note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


def _check_out(out, kind, result_shape, dtype):
    refused = refused_subclass(out) if type(out) is not np.ndarray else None
    if refused:
        raise TypeError(f"polymm.matmul: out is {refused}")
    if kind_of(out) is not kind:
        raise TypeError(f"polymm.matmul: out must be a {kind.name} array like the inputs, got {_describe(out)}")
    if tuple(out.shape) != result_shape:
        raise ValueError(f"polymm.matmul: out has shape {tuple(out.shape)}, the result has shape {result_shape}")
    if np.dtype(out.dtype) != dtype:
        raise TypeError(f"polymm.matmul: out has dtype {out.dtype}, the result has dtype {dtype}")
    if not kind.writeable(out):
        raise ValueError("polymm.matmul: out is read-only")


def _compute(impl, kind, x1, x2, shape, dtype, algorithm, out):
    """Run the backend on its operands; return ``out`` (filled) or a new result array."""
    direct = (
        out is not None
        and kind.is_c_contiguous(out)
        and not (kind.shares_memory(out, x1) or kind.shares_memory(out, x2))
    )
    result = out if direct else kind.empty(shape.result, dtype, like=x1)
    batch, m, k, n = shape.batch, shape.m, shape.k, shape.n
    if math.prod(shape.result):
        if k == 0:
            kind.assign(result, kind.zeros(shape.result, dtype, like=x1))
        else:
            a = _prepared(kind, x1, dtype)
            b = _prepared(kind, x2, dtype)
            sa = matrix_strides(tuple(x1.shape), kind.elem_strides(a), len(batch), vector_is_row=True)
            sb = matrix_strides(tuple(x2.shape), kind.elem_strides(b), len(batch), vector_is_row=False)
            sc = c_strides(batch + (m, n))
            groups, (ba, bb, bc) = collapse_batch(batch, sa[:-2], sb[:-2], sc[:-2])
            if groups == batch and len(batch) == 2 and not kind.views:
                crossed = _crossed(kind, impl, a, b, sa, sb, batch, m, k, n, dtype, algorithm)
                if crossed is not None:
                    if out is None:
                        return crossed
                    kind.assign(out, crossed)
                    return out
            if len(groups) > 1 and not kind.views:  # one launch over copies, not one per outer index
                (a, sa), (b, sb) = (
                    _spread(kind, x, batch, rows, cols, st, math.prod(shape.result))
                    for x, rows, cols, st in ((a, m, k, sa), (b, k, n, sb))
                )
                groups, (ba, bb, bc) = collapse_batch(batch, sa[:-2], sb[:-2], sc[:-2])
            inner = groups[-1] if groups else 1
            if len(groups) > 1 and kind.views:
                # broadcast batches that do not collapse to one stride: one
                # (outer..., inner, m, k) view per operand, indexed per call
                # (three as_strided views a call cost ~35 us)
                va = kind.operand(a, tuple(groups) + (m, k), ba + sa[-2:])
                vb = kind.operand(b, tuple(groups) + (k, n), bb + sb[-2:])
                vr = kind.operand(result, tuple(groups) + (m, n), bc + (n, 1))
                if hasattr(impl, "matmul_groups"):  # planned, and its threads counted, once
                    _call(impl, va, vb, vr, algorithm, impl.matmul_groups)
                else:  # one call per outer index: each writes its own slice of the result, none twice
                    for index in itertools.product(*(range(g) for g in groups[:-1])):
                        _call(impl, va[index], vb[index], vr[index], algorithm)
            else:
                outer_strides = (ba[:-1], bb[:-1], bc[:-1])
                for index in itertools.product(*(range(g) for g in groups[:-1])):
                    oa, ob, oc = (sum(i * s for i, s in zip(index, st)) for st in outer_strides)
                    _call(
                        impl,
                        kind.operand(a, (inner, m, k), (ba[-1] if ba else 0,) + sa[-2:], oa),
                        kind.operand(b, (inner, k, n), (bb[-1] if bb else 0,) + sb[-2:], ob),
                        kind.operand(result, (inner, m, n), (bc[-1] if bc else 0, n, 1), oc),
                        algorithm,
                    )
    if out is not None and not direct:
        kind.assign(out, result)
        return out
    return result


def crossed_along(batch, ba, bb, m, k, n) -> int | None:
    """The axis A walks (0 or 1) where, of a 2-D broadcast batch, A walks one axis and B the other
    (batch strides ``ba``, ``bb``, 0 where broadcast) and one product of the stacked operands pays
    off: its blocks (m n) at most the operands' copies it saves (m k + k n). Else None. The
    dispatch (:func:`_crossed`) and ``polymm explain`` decide by it."""
    if len(batch) != 2 or m * n > m * k + k * n:
        return None
    for along in (0, 1):
        if ba[1 - along] == 0 and bb[along] == 0 and ba[along] and bb[1 - along]:
            return along
    return None


def _crossed(kind, impl, a, b, sa, sb, batch, m, k, n, dtype, algorithm):
    """``C[i, j] = A[i] @ B[j]`` (or ``A[j] @ B[i]``) where A walks one batch axis and B the other,
    as one product: every A's rows stacked (gA m x k), every B's columns side by side (k x gB n,
    a copy), the gA m x gB n result's blocks then copied into place. Both operands would otherwise
    be copied out to the whole batch and multiplied in small pieces (64 x 64 products of 32 cubes:
    4096 of them). None where the batch is not crossed so, where the blocks (m n) outweigh the
    operands' copies they save (m k + k n), or where the library cannot copy."""
    ba, bb = sa[:2], sb[:2]
    along = crossed_along(batch, ba, bb, m, k, n)
    if along is None:
        return None
    ga, gb = batch[along], batch[1 - along]
    if ba[along] == m * sa[2]:  # the A's rows already lie one stride apart
        rows = kind.operand(a, (1, ga * m, k), (0, sa[2], sa[3]))
    else:
        stacked = kind.broadcast_copy(a, (ga, m, k), (ba[along], sa[2], sa[3]))
        if stacked is None:
            return None
        rows = kind.operand(stacked, (1, ga * m, k), (0, k, 1))
    beside = kind.broadcast_copy(b, (k, gb, n), (sb[2], bb[1 - along], sb[3]))
    if beside is None:
        return None
    blocks = kind.empty((ga * m, gb * n), dtype, like=a)
    columns = kind.operand(beside, (1, k, gb * n), (0, gb * n, 1))
    _call(impl, rows, columns, kind.operand(blocks, (1, ga * m, gb * n), (0, gb * n, 1)), algorithm)
    # block (iA, iB) of the product is C[iA, iB] (A along axis 0) or C[iB, iA]
    step_a, step_b = m * gb * n, n
    strides = (step_a, step_b) if along == 0 else (step_b, step_a)
    return kind.broadcast_copy(blocks, (*batch, m, n), (*strides, gb * n, 1))


def _spread(kind, x, batch, rows, cols, strides, result_size):
    """``(x, strides)`` with ``x`` copied out to the whole broadcast batch (C order) when its
    batch axes do not merge into one stride, so that device libraries run the product as one
    launch instead of one per outer batch index.  Copied when the copy is at most 4 results in
    size, or when it only lays out again what ``x`` holds (no broadcast axis repeated) in fewer
    bytes than the launches it saves would cost (``kind.launch_bytes`` each): a batched trace's
    ``bij,bji->b`` as 64 x 256 dot products took 64 launches, 1.39 ms on an H100, where one
    16 MB copy and one launch take 0.2 ms."""
    groups = collapse_batch(batch, strides[:-2])[0]
    copies = math.prod(batch) * rows * cols
    if groups[1:] == ():
        return x, strides
    held = math.prod(n for n, s in zip(batch, strides[:-2]) if s != 0) * rows * cols
    launches = math.prod(groups[:-1]) - 1
    relaid = copies == held and copies * np.dtype(x.dtype).itemsize <= launches * kind.launch_bytes(x)
    if copies > 4 * result_size and not relaid:
        return x, strides
    spread = kind.broadcast_copy(x, batch + (rows, cols), strides)
    if spread is None:
        return x, strides
    return spread, c_strides(batch + (rows, cols))


def _prepared(kind, x, dtype):
    """``x`` in the result dtype with strides that are whole elements."""
    if np.dtype(x.dtype) != dtype:
        return kind.astype(x, dtype)
    if kind.elem_strides(x) is None:
        return kind.contiguous(x)
    return x


def _matmul_foreign(x1, x2, backend, algorithm, out):
    """PyTorch, JAX, array-api-strict, ...: compute through DLPack, return the caller's kind."""
    import array_api_compat

    if getattr(x1, "requires_grad", False) or getattr(x2, "requires_grad", False):  # PyTorch autograd
        return grad_matmul(x1, x2, backend=backend, algorithm=algorithm, out=out)
    where = x1.__dlpack_device__()
    if x2.__dlpack_device__() != where:
        raise ValueError(
            f"polymm.matmul: x1 and x2 are on different devices ({_dlpack_device_name(where)} and "
            f"{_dlpack_device_name(x2.__dlpack_device__())}); move one of them first"
        )
    native = kind_for_dlpack_device(where[0])
    if out is None and hasattr(native, "view_foreign"):  # e.g. PyTorch CUDA tensors seen by CuPy
        result = _matmul_viewed(native, x1, x2, backend, algorithm)
        if result is not None:
            _VIEWERS[type(x1)] = native
            return result
    xp = array_api_compat.array_namespace(x1, x2)
    dtype = promotion.foreign_result_type(x1, x2)
    to_native = native.from_dlpack
    if out is not None and type(out) is not type(x1):
        raise TypeError(f"polymm.matmul: out must be a {_describe(x1)} like the inputs, got {_describe(out)}")
    a, b = (_from_dlpack(to_native, xp, _resolved(x)).astype(dtype, copy=False) for x in (x1, x2))
    result = matmul(
        a, b, backend=backend, algorithm=algorithm, out=None if out is None else _from_dlpack(to_native, xp, out)
    )
    if out is not None:
        return out
    if is_bfloat16(result.dtype):  # DLPack consumers know bfloat16, NumPy's exporter does not: send its 16-bit words
        words = xp.from_dlpack(result.view(np.int16))
        return words.view(next(x.dtype for x in (x1, x2) if str(x.dtype).endswith("bfloat16")))
    try:
        return xp.from_dlpack(result)
    except (AttributeError, TypeError, BufferError, RuntimeError):
        return xp.asarray(result)


def _dlpack_device_name(device) -> str:
    """``(device type, index)`` of ``__dlpack_device__`` in words (``cuda:0``)."""
    kind, index = int(device[0]), int(device[1])
    name = {1: "cpu", 2: "cuda", 3: "cuda-host", 4: "opencl", 10: "rocm", 13: "cuda-managed"}.get(kind)
    return f"{name}:{index}" if name else f"DLPack device type {kind}, index {index}"


def _matmul_viewed(native, x1, x2, backend, algorithm):
    """Two same-dtype arrays of a foreign library that ``native`` views in place (sharing memory
    and, for GPUs, the stream): the result is allocated by that library and written through a
    view.  The views (``native.view_foreign``) are what ``native.operand`` takes; the general path
    gets ``native.native_array`` of them.  None whenever the general (DLPack) path must decide.
    A product seen before is replayed (:func:`_replay_key`), no views made."""
    if type(x2) is not type(x1) or x1.dtype != x2.dtype or not native.same_stream(x1):
        return None
    key = _replay_key(native, x1, x2, backend, algorithm)
    if key is not None:
        known = _REPLAYS.get(key)
        if known is not None:
            return native.replay(x1, x2, *known)
    a, b = native.view_foreign(x1), native.view_foreign(x2)
    if a is None or b is None:
        return None
    if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]:  # the common case, checked cheaply
        shape = (a.shape[0], b.shape[1])
    else:
        shape = matmul_shape(tuple(a.shape), tuple(b.shape)).result
    result, view = native.new_foreign(x1, a, shape)
    done = _plain_device(native, a, b, backend, algorithm, out=view)
    if done is None:
        a, b, view = (native.native_array(x) for x in (a, b, view))
        matmul(a, b, backend=backend, algorithm=algorithm, out=view)
    else:
        _remember(key, done, algorithm)
    return result


#: Foreign array types (PyTorch tensors) a native adapter has viewed in place: their products go
#: straight to :func:`_matmul_viewed`, which declines (None) whatever it cannot view.
_VIEWERS: dict = {}
#: Products the short path replays: key (:func:`_replay_key`) -> (result shape, launch); cleared
#: when full, and by ``register_backend`` (the registry's ``_replays``).
_REPLAYS = _replays
_REPLAYS_KEPT = 256


def _resolved(x):
    """An operand with PyTorch's lazy conjugation or negation applied (DLPack refuses those views)."""
    if hasattr(x, "is_conj") and (x.is_conj() or x.is_neg()):
        return x.resolve_conj().resolve_neg()
    return x


def _from_dlpack(to_native, xp, x):
    """``x`` as a NumPy/CuPy array; bfloat16 travels as 16-bit words (NumPy's DLPack has no
    bfloat16) and is viewed as ml_dtypes' bfloat16 again (a view: ``out`` stays shared)."""
    if not str(x.dtype).endswith("bfloat16"):
        return to_native(x)
    from .backend import optional_dtypes

    if not optional_dtypes():
        raise TypeError("polymm.matmul: bfloat16 arrays need the ml_dtypes package (pip install ml_dtypes)")
    return to_native(x.view(xp.int16)).view(optional_dtypes()[0])
