"""polymm on Dask arrays: a lazy ``x1 @ x2`` whose block products run :func:`polymm.matmul` on the workers.

Dask is optional: this module is imported only when a Dask array reaches
:func:`polymm.matmul` (or when a user imports it), so ``import polymm`` never
imports Dask.  The graph is built here, on the client, with the contract's
rules checked at once (shapes, dtypes, backend and algorithm names); each task
then calls :func:`polymm.matmul` on NumPy or CuPy blocks with the keywords the
caller gave (``backend=``, ``algorithm=``, and any later ones), so the worker
picks its kernels exactly as a local call would.

The contraction over K is built one of two ways (``docs/scaling.md`` compares
them with SUMMA):

``"panel"``
    one task per output block multiplies a whole row panel of ``x1`` by a whole
    column panel of ``x2`` (the K blocks concatenated inside the task): one big
    kernel call per output block, which is what GPUs want;
``"tree"``
    one task per ``(output block, K block)`` pair, the partial products summed
    in a tree (:meth:`dask.array.Array.sum`): no task ever holds more than one
    block of each operand, at the price of more, smaller calls and the sums.

``"auto"`` takes the panel when one output block's two panels fit in
``panel_limit`` bytes (default 1 GiB, or the Dask config key
``polymm.panel-limit``), else the tree.
"""

from __future__ import annotations

import inspect
import math

import dask
import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array
from dask.utils import parse_bytes

from . import dispatch, promotion
from .arrays import DLPACK, is_dask_array, kind_named, kind_of
from .precision import current as current_precision
from .registry import BackendUnavailable, check_algorithm, get_backend, scoped_backend
from .shapes import matmul_shape

__all__ = ["matmul", "REDUCTIONS", "PANEL_LIMIT"]

#: How the contraction over K may be built.
REDUCTIONS = ("auto", "panel", "tree")

#: Default bytes of the two K panels one output block may need before ``"auto"`` prefers the tree.
PANEL_LIMIT = 2**30

#: Chunk libraries whose blocks polymm computes on natively.
CHUNK_LIBRARIES = ("numpy", "cupy")


def matmul(x1, x2, /, *, reduction: str | None = None, panel_limit=None, out=None, **options):
    """``x1 @ x2`` for Dask arrays: a lazy Dask array, each block product computed by :func:`polymm.matmul`.

    ``options`` (``backend=``, ``algorithm=``, ...) are handed to every block
    product; a backend chosen with :func:`polymm.use_backend` around this call
    is carried into the graph too.  ``reduction`` is ``"auto"``, ``"panel"`` or
    ``"tree"`` (default: the Dask config key ``polymm.reduction``, else
    ``"auto"``); ``panel_limit`` (bytes, or a string like ``"2GiB"``) is the
    largest pair of K panels ``"auto"`` gives one task.

    One operand may be a NumPy (or CuPy) array when the other is a Dask array of
    NumPy (or CuPy) chunks: it is wrapped with :func:`dask.array.from_array`,
    chunked like the Dask operand along K.
    """
    if out is not None:
        raise TypeError(
            f"polymm.matmul: out= cannot be used with Dask arrays (they are immutable), got out of type "
            f"{type(out).__module__}.{type(out).__qualname__}; use the returned Dask array "
            "(dask.array.store writes it into an existing array)"
        )
    reduction = reduction if reduction is not None else dask.config.get("polymm.reduction", "auto")
    if reduction not in REDUCTIONS:
        raise ValueError(f"polymm.matmul: unknown reduction {reduction!r}; choose one of {', '.join(REDUCTIONS)}")
    x1, x2, library = _operands(x1, x2)

    promotion.check_operand_dtype(x1.dtype, "x1")
    promotion.check_operand_dtype(x2.dtype, "x2")
    dtype = promotion.check_operand_dtype(kind_named(library).result_type(x1, x2), "the result").newbyteorder("=")
    shape = matmul_shape(tuple(x1.shape), tuple(x2.shape))
    options = _carried(options)

    x1, x2 = _common_k_chunks(x1, x2)
    ind1, ind2, out_ind = _indices(x1.ndim, x2.ndim, len(shape.batch))
    if reduction == "auto":
        limit = panel_limit if panel_limit is not None else dask.config.get("polymm.panel-limit", PANEL_LIMIT)
        single_k_block = len(x1.chunks[-1]) == 1
        reduction = "panel" if single_k_block or _panel_bytes(x1, x2) <= parse_bytes(limit) else "tree"

    if reduction == "panel":
        return da.blockwise(
            _panel_product,
            out_ind,
            x1,
            ind1,
            x2,
            ind2,
            concatenate=True,
            dtype=dtype,
            meta=meta_from_array(x1._meta, ndim=len(out_ind), dtype=dtype),
            token="polymm-matmul-panel",
            options=options,
        )
    accumulate = _accumulation_dtype(dtype)
    partial = da.blockwise(
        _block_product,
        out_ind + ("k",),
        x1,
        ind1,
        x2,
        ind2,
        adjust_chunks={"k": 1},
        dtype=accumulate,
        meta=meta_from_array(x1._meta, ndim=len(out_ind) + 1, dtype=accumulate),
        token="polymm-matmul-block",
        options=options,
        dtype_in=dtype,
        accumulate=accumulate,
    )
    total = partial.sum(axis=-1, dtype=accumulate, keepdims=True)
    return total.map_blocks(
        _drop_k_axis,
        dtype,
        drop_axis=-1,
        dtype=dtype,
        meta=meta_from_array(x1._meta, ndim=len(out_ind), dtype=dtype),
        token="polymm-matmul-tree",
    )


def _panel_product(a, b, options):
    """One output block: a row panel of ``x1`` times a column panel of ``x2`` (whole K)."""
    return dispatch.matmul(a, b, **options)


def _block_product(a, b, options, dtype_in, accumulate):
    """One K block's contribution to one output block, with a trailing axis of length 1 for the tree sum.

    Where the result dtype accumulates in a wider one (float16 in float32), the
    operands are widened first: products of float16 values are exact in float32,
    so the sum rounds to float16 once, at the end, as a single kernel would.
    """
    if accumulate != dtype_in:
        a = a.astype(dtype_in, copy=False).astype(accumulate)
        b = b.astype(dtype_in, copy=False).astype(accumulate)
    return dispatch.matmul(a, b, **options)[..., None]


def _drop_k_axis(total, dtype):
    """A summed block without its K axis, in the result dtype (a 0-d array, never a scalar, for 1-D @ 1-D)."""
    return total.reshape(total.shape[:-1]).astype(dtype, copy=False)


def _accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype partial products are summed in: float32 for the half-precision floats, else the result's."""
    if dtype.name in ("float16", "bfloat16"):
        return np.dtype(np.float32)
    return dtype


def _operands(x1, x2):
    """Both operands as Dask arrays of one chunk library (NumPy or CuPy), or a ``TypeError`` saying why not."""
    if not (is_dask_array(x1) or is_dask_array(x2)):
        raise TypeError("polymm.dask.matmul: at least one operand must be a dask.array.Array; use polymm.matmul")
    library = None
    for which, x in (("x1", x1), ("x2", x2)):
        if is_dask_array(x):
            chunk_library = _library_name(x._meta)
            if chunk_library not in CHUNK_LIBRARIES:
                raise TypeError(
                    f"polymm.matmul: {which} is a Dask array of {dispatch._describe(x._meta)} chunks; "
                    f"polymm computes on Dask arrays of {' or '.join(CHUNK_LIBRARIES)} chunks"
                )
            if library is not None and chunk_library != library:
                raise TypeError(
                    f"polymm.matmul: x1 and x2 are Dask arrays of different chunk libraries ({library} and "
                    f"{chunk_library}); convert one of them first (e.g. x.map_blocks(cupy.asarray))"
                )
            library = chunk_library
            for axis, n in enumerate(x.shape):
                if isinstance(n, float) and math.isnan(n):
                    raise ValueError(
                        f"polymm.matmul: {which} has unknown chunk sizes (shape {x.shape}, axis {axis}); "
                        f"call {which}.compute_chunk_sizes() first"
                    )
    dask_operand = x1 if is_dask_array(x1) else x2
    wrapped = []
    for which, x in (("x1", x1), ("x2", x2)):
        if not is_dask_array(x):
            if kind_of(x) is None:
                raise TypeError(f"polymm.matmul: {which} must be an array, got {dispatch._describe(x)}")
            if _library_name(x) != library:
                raise TypeError(
                    f"polymm.matmul: x1 and x2 come from different array libraries ({dispatch._describe(x)} and a Dask "
                    f"array of {library} chunks); pass a {library} array or a Dask array"
                )
            x = _wrap(x, which, dask_operand)
        wrapped.append(x)
    return wrapped[0], wrapped[1], library


def _library_name(x) -> str | None:
    """The name of the array library ``x`` belongs to ('numpy', 'cupy', ...), or None."""
    kind = kind_of(x)
    return None if kind is None or kind is DLPACK else kind.name


def _wrap(x, which, other):
    """A NumPy/CuPy operand as a Dask array: one block, except along K where it takes the Dask operand's chunks."""
    chunks = list(x.shape)
    if x.ndim and other.ndim:
        k_axis = _k_axis(which, x.ndim)
        other_k = other.chunks[_k_axis("x2" if which == "x1" else "x1", other.ndim)]
        if sum(other_k) == x.shape[k_axis]:  # else matmul_shape names the mismatch
            chunks[k_axis] = other_k
    return da.from_array(x, chunks=tuple(chunks))


def _k_axis(which: str, ndim: int) -> int:
    """The contracted axis: last of ``x1``; second to last of ``x2`` (its only one when 1-D)."""
    return ndim - 1 if which == "x1" or ndim == 1 else ndim - 2


def _common_k_chunks(x1, x2):
    """Give both operands one chunking along K: the operand with more K blocks is rechunked to the other's.

    Fewer, larger blocks along K keep the block products large; the rechunk is
    an ordinary Dask rechunk, so the values are never affected.
    """
    a1, a2 = _k_axis("x1", x1.ndim), _k_axis("x2", x2.ndim)
    c1, c2 = x1.chunks[a1], x2.chunks[a2]
    if c1 == c2:
        return x1, x2
    if len(c1) <= len(c2):
        return x1, x2.rechunk({a2: c1})
    return x1.rechunk({a1: c2}), x2


def _indices(ndim1: int, ndim2: int, batch_ndim: int):
    """Blockwise indices of ``x1``, ``x2`` and the result.

    Batch axes are aligned from the right and broadcast by Dask (an axis of
    length 1 pairs with every block of the other); 1-D operands keep their one
    axis, and each block product applies the 1-D rules itself.
    """
    batch = tuple(f"b{i}" for i in range(batch_ndim))
    rows = ("m",) if ndim1 > 1 else ()
    cols = ("n",) if ndim2 > 1 else ()
    ind1 = batch[batch_ndim - max(ndim1 - 2, 0) :] + rows + ("k",)
    ind2 = batch[batch_ndim - max(ndim2 - 2, 0) :] + ("k",) + cols
    return ind1, ind2, batch + rows + cols


def _panel_bytes(x1, x2) -> int:
    """Bytes of the largest row panel of ``x1`` plus the largest column panel of ``x2`` (whole K)."""
    total = 0
    for which, x in (("x1", x1), ("x2", x2)):
        k_axis = _k_axis(which, x.ndim)
        elements = x.shape[k_axis]
        for axis, chunks in enumerate(x.chunks):
            if axis != k_axis:
                elements *= max(chunks, default=0)
        total += elements * x.dtype.itemsize
    return total


def _block_keywords() -> set[str]:
    """The keywords :func:`polymm.matmul` takes, ``out`` aside: what a block product may be given."""
    parameters = inspect.signature(dispatch.matmul).parameters.values()
    return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY} - {"out"}


def _carried(options: dict) -> dict:
    """The block products' keywords: the caller's, plus the backend and precision in scope here, checked here when possible.

    ``use_backend(...)`` and ``use_precision(...)`` are contexts of this process that the
    workers do not share, so the scoped names are written into the graph.  ``POLYMM_BACKEND``
    and the chunks' device are the workers' own and are read there.
    """
    accepted = _block_keywords()
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise TypeError(
            f"polymm.matmul: unexpected keyword(s) {', '.join(unknown)}; the block products take "
            f"{', '.join(sorted(accepted))} (and polymm.dask.matmul reduction, panel_limit)"
        )
    options = dict(options)
    if options.get("precision") is None:  # use_precision(...) is a context of this process, too
        options.pop("precision", None)
        if current_precision() != "default":
            options["precision"] = current_precision()
    if options.get("backend") is None:
        options.pop("backend", None)
        name = scoped_backend()
        if name is not None:
            options["backend"] = name
    name = options.get("backend")
    if name is not None:
        try:
            impl = get_backend(name)  # an unknown name is a ValueError listing the known ones
        except BackendUnavailable:
            impl = None  # it may be available on the workers (a GPU backend seen from a CPU-only client)
        if impl is not None and "algorithm" in options:
            check_algorithm(impl, name, options["algorithm"])
    return options
