"""The array API's matmul shape rules, and the reduction to plain batched 2-D problems.

Everything here works on shapes and element strides only, so it is shared by
every array library and every backend.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MatmulShape:
    """``x1 @ x2`` as a batched ``(M, K) @ (K, N)`` product."""

    batch: tuple[int, ...]
    m: int
    k: int
    n: int
    result: tuple[int, ...]


def matmul_shape(shape1: tuple[int, ...], shape2: tuple[int, ...]) -> MatmulShape:
    """Apply the 1-D promotion, contraction and batch-broadcast rules, or raise ``ValueError``."""
    if not shape1 or not shape2:
        raise ValueError(
            f"polymm.matmul: operands must have at least one dimension, got shapes {shape1} and {shape2} "
            "(0-d arrays are not allowed in matmul; use multiply)"
        )
    m, k1 = (1, shape1[0]) if len(shape1) == 1 else shape1[-2:]
    k2, n = (shape2[0], 1) if len(shape2) == 1 else shape2[-2:]
    if k1 != k2:
        raise ValueError(
            f"polymm.matmul: contraction dimensions differ: x1 has shape {shape1} (K={k1}), "
            f"x2 has shape {shape2} (K={k2})"
        )
    batch = broadcast_batch(shape1[:-2], shape2[:-2], shape1, shape2)
    result = batch + ((m,) if len(shape1) > 1 else ()) + ((n,) if len(shape2) > 1 else ())
    return MatmulShape(batch, m, k1, n, result)


def broadcast_batch(b1, b2, shape1, shape2) -> tuple[int, ...]:
    ndim = max(len(b1), len(b2))
    p1 = (1,) * (ndim - len(b1)) + tuple(b1)
    p2 = (1,) * (ndim - len(b2)) + tuple(b2)
    out = []
    for d1, d2 in zip(p1, p2):
        if d1 != d2 and d1 != 1 and d2 != 1:
            raise ValueError(
                f"polymm.matmul: batch dimensions {tuple(b1)} of x1 (shape {shape1}) and {tuple(b2)} "
                f"of x2 (shape {shape2}) cannot be broadcast together"
            )
        out.append(d1 if d2 == 1 else d2)
    return tuple(out)


def matrix_strides(shape, strides, batch_ndim: int, vector_is_row: bool) -> tuple[int, ...]:
    """Element strides of an operand seen as ``batch + (rows, cols)``, 0 along broadcast axes.

    A 1-D operand becomes a row (``x1``: ``(1, K)``) or a column (``x2``: ``(K, 1)``).
    """
    if len(shape) == 1:
        mat = (0, strides[0]) if vector_is_row else (strides[0], 0)
        batch_shape, batch_strides = (), ()
    else:
        mat = tuple(strides[-2:])
        batch_shape, batch_strides = shape[:-2], strides[:-2]
    lead = batch_ndim - len(batch_shape)
    padded = (0,) * lead + tuple(0 if n == 1 else s for n, s in zip(batch_shape, batch_strides))
    return padded + mat


def c_strides(shape) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def collapse_batch(batch, *strides):
    """Merge batch axes that every operand walks with one stride.

    Returns ``(groups, [per-operand stride tuples])``: the batch reduced to as
    few axes as the strides allow (usually one).  Axes of length 1 vanish.
    """
    dims, per = [], [[] for _ in strides]
    for axis, n in enumerate(batch):
        if n == 1:
            continue
        if dims and all(st[axis] * n == p[-1] for st, p in zip(strides, per)):
            dims[-1] *= n
            for st, p in zip(strides, per):
                p[-1] = st[axis]
            continue
        dims.append(n)
        for st, p in zip(strides, per):
            p.append(st[axis])
    return tuple(dims), [tuple(p) for p in per]
