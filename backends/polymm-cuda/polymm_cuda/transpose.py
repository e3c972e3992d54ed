"""The tiled transposed copy (``kernels/transpose.cu``): operands copied K-major for the tensor
cores, by :func:`polymm_cuda.tensorcore.repack` and by the launches :mod:`polymm_cuda.wgmma` plans."""

from __future__ import annotations

import numpy as np

from polymm.kernels import GRID_ROWS

from .sources import source

__all__ = ["transposed_copy", "transpose_grid"]


def transposed_copy(xp, v):
    """``xp.ascontiguousarray(v)`` for a 3-D CuPy view ``v``; when ``v`` is a transposed view of
    row-contiguous matrices (unit stride along its rows, ``kernels/transpose.cu``'s case), through
    that tiled kernel."""
    isz = v.itemsize
    bt, rows, cols = v.shape
    s_b, s_c, s_r = v.strides  # v[z, i, j] sits at z s_b + i s_c + j s_r: the source is (z, j, i)
    if not (
        s_c == isz
        and s_r > 0
        and s_r % isz == 0
        and s_b >= 0
        and s_b % isz == 0
        and isz in (1, 2, 4, 8)
        and bt <= GRID_ROWS
        and v.size
    ):
        return xp.ascontiguousarray(v)
    out = xp.empty(v.shape, v.dtype)
    i64 = np.int64
    args = (
        np.uint64(v.data.ptr),
        i64(0),
        i64(s_b // isz),
        i64(s_r // isz),
        out,
        i64(cols),
        np.int32(cols),
        np.int32(rows),
    )
    _transpose_kernel(xp, isz)(transpose_grid(isz, cols, rows, bt), (32, 8, 1), args)
    return out


def transpose_grid(itemsize: int, rows: int, cols: int, batch: int) -> tuple[int, int, int]:
    """The grid of ``kernels/transpose.cu`` (blocks of 32 x 8) copying ``batch`` matrices of
    ``rows`` x ``cols`` (its R and C): tiles of 64 x 64 8- and 16-bit elements, 32 x 32 larger ones."""
    tile = 64 if itemsize <= 2 else 32
    return -(-cols // tile), -(-rows // tile), batch


def _transpose_kernel(xp, itemsize: int):
    """``kernels/transpose.cu`` for elements of ``itemsize`` bytes, built once per GPU."""
    key = (id(xp), xp.cuda.Device().id, itemsize)
    kernel = _TRANSPOSE.get(key)
    if kernel is None:
        module = xp.RawModule(code=source("transpose"), options=("-std=c++17",))
        kernel = _TRANSPOSE[key] = module.get_function(f"polymm_transpose_{itemsize}")
    return kernel


_TRANSPOSE: dict = {}
