"""Array libraries the core understands, each behind one small adapter.

The core's shape and ``out=`` logic is written once against :class:`ArrayKind`;
each adapter maps its handful of primitives (strided views, allocation, copies)
onto one library.  NumPy, CuPy and PyOpenCL are computed on natively; any other
array-API or DLPack array (PyTorch, JAX, array-api-strict) is viewed through
DLPack as NumPy (host) or CuPy (CUDA) and the result handed back as its own kind.
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["ArrayKind", "is_dask_array", "kind_of", "kind_named"]


class ArrayKind:
    """Adapter for one array library: the primitives the core needs."""

    name = "?"

    def result_type(self, x1, x2) -> np.dtype:
        return np.result_type(x1.dtype, x2.dtype)

    def elem_strides(self, x) -> tuple[int, ...] | None:
        """Strides in elements, or None when a byte stride is not a multiple of the item size."""
        size = x.dtype.itemsize
        if any(s % size for s in x.strides):
            return None
        return tuple(s // size for s in x.strides)

    def view(self, x, shape, elem_strides, offset=0):
        """A view with the given shape and element strides, starting ``offset`` elements past ``x``'s start."""
        raise NotImplementedError

    def astype(self, x, dtype):
        return x.astype(dtype)

    def contiguous(self, x):
        raise NotImplementedError

    def empty(self, shape, dtype, like):
        raise NotImplementedError

    def zeros(self, shape, dtype, like):
        raise NotImplementedError

    def assign(self, dst, src) -> None:
        """``dst[...] = src`` (same shape and dtype)."""
        dst[...] = src

    def is_c_contiguous(self, x) -> bool:
        return bool(x.flags.c_contiguous)

    def writeable(self, x) -> bool:
        return True

    def shares_memory(self, x, y) -> bool:
        raise NotImplementedError

    def device(self, x) -> str:
        return "cpu"


class NumpyKind(ArrayKind):
    name = "numpy"

    def view(self, x, shape, elem_strides, offset=0):
        if not offset and _same_layout(x.shape, self.elem_strides(x), shape, elem_strides):
            return x.reshape(shape)  # cheap, and the common case of unbatched operands
        return _strided(np.lib.stride_tricks.as_strided, x, shape, elem_strides, offset)

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def empty(self, shape, dtype, like):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype, like):
        return np.zeros(shape, dtype)

    def writeable(self, x):
        return bool(x.flags.writeable)

    def shares_memory(self, x, y):
        return np.may_share_memory(x, y)


class CupyKind(ArrayKind):
    name = "cupy"

    def __init__(self):
        import cupy

        self.cp = cupy
        PLAIN_TYPES[cupy.ndarray] = self

    def result_type(self, x1, x2):
        return np.dtype(self.cp.result_type(x1.dtype, x2.dtype))

    def view(self, x, shape, elem_strides, offset=0):
        return _strided(self.cp.lib.stride_tricks.as_strided, x, shape, elem_strides, offset)

    def contiguous(self, x):
        return self.cp.ascontiguousarray(x)

    def empty(self, shape, dtype, like):
        device = like.device
        if device.id == self.cp.cuda.runtime.getDevice():
            return self.cp.empty(shape, dtype)
        with device:
            return self.cp.empty(shape, dtype)

    def zeros(self, shape, dtype, like):
        with like.device:
            return self.cp.zeros(shape, dtype)

    def shares_memory(self, x, y):
        return self.cp.may_share_memory(x, y)

    def device(self, x):
        return f"cuda:{x.device.id}"


class OpenCLKind(ArrayKind):
    """PyOpenCL arrays.  ``pyopencl.array.Array(...)`` costs ~25 us per call
    (NumPy reductions over the shape), more than a small kernel, so views and
    results are made with PyOpenCL's own fast constructor; result buffers come
    from a memory pool per queue, as CuPy's do (allocation is a driver call, and
    a fresh large buffer is paged in again on every product)."""

    name = "pyopencl"

    def __init__(self):
        import pyopencl.array as cl_array

        self.cl_array = cl_array
        self._pools = {}
        PLAIN_TYPES[cl_array.Array] = self
        try:  # the fast constructor's keywords are PyOpenCL's own; fall back if they change
            cl_array.Array(
                None, (0,), np.dtype("float32"), strides=(4,), _fast=True, _size=0, _context=None, _queue=None
            )
            self._fast = True
        except TypeError:
            self._fast = False

    def _array(self, queue, shape, dtype, strides, data, offset, allocator=None):
        if self._fast:
            size = 1
            for n in shape:
                size *= n
            return self.cl_array.Array(
                None,
                shape,
                dtype,
                strides=strides,
                data=data,
                offset=offset,
                allocator=allocator,
                _fast=True,
                _size=size,
                _context=queue.context,
                _queue=queue,
            )
        return self.cl_array.Array(queue, shape, dtype, strides=strides, data=data, offset=offset, allocator=allocator)

    def view(self, x, shape, elem_strides, offset=0):
        size = x.dtype.itemsize
        return self._array(
            x.queue,
            tuple(shape),
            x.dtype,
            tuple(s * size for s in elem_strides),
            x.base_data,
            x.offset + offset * size,
            x.allocator,
        )

    def contiguous(self, x):
        if not x.flags.c_contiguous:
            raise TypeError("polymm cannot re-layout a non-contiguous pyopencl array; pass a contiguous one")
        return x

    def empty(self, shape, dtype, like):
        queue = like.queue
        dtype = np.dtype(dtype)
        shape = tuple(shape)
        nbytes = dtype.itemsize
        for n in shape:
            nbytes *= n
        if nbytes == 0 or like.allocator is not None or not self._fast:
            return self.cl_array.empty(queue, shape, dtype, allocator=like.allocator)
        pool = self._pools.get(queue)
        if pool is None:
            from pyopencl.tools import ImmediateAllocator, MemoryPool

            pool = self._pools[queue] = MemoryPool(ImmediateAllocator(queue))
        if len(shape) == 2:
            strides = (shape[1] * dtype.itemsize, dtype.itemsize)
        else:
            strides, step = [], dtype.itemsize
            for n in reversed(shape):
                strides.append(step)
                step *= max(n, 1)
            strides = tuple(reversed(strides))
        return self.cl_array.Array(
            None,
            shape,
            dtype,
            strides=strides,
            data=pool(nbytes),
            _fast=True,
            _size=nbytes // dtype.itemsize,
            _context=like.context,
            _queue=queue,
        )

    def zeros(self, shape, dtype, like):
        return self.cl_array.zeros(like.queue, shape, dtype)

    def assign(self, dst, src):
        import pyopencl as cl

        if not dst.flags.c_contiguous:
            raise ValueError("out= must be a C-contiguous pyopencl array")
        cl.enqueue_copy(
            dst.queue,
            dst.base_data,
            src.base_data,
            byte_count=src.nbytes,
            src_offset=src.offset,
            dst_offset=dst.offset,
        )

    def shares_memory(self, x, y):
        return x.base_data is not None and x.base_data == y.base_data

    def device(self, x):
        return f"opencl:{x.queue.device.name.strip()}"


def _same_layout(shape, strides, new_shape, new_strides) -> bool:
    """Whether ``new`` only adds or drops axes of length 1 (so a reshape is a view)."""
    if strides is None:
        return False
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [(n, s) for n, s in zip(new_shape, new_strides) if n != 1]
    return old == new


def _strided(as_strided, x, shape, elem_strides, offset):
    size = x.dtype.itemsize
    if offset:
        # Two elements `offset` apart; keep the second: a view that starts there.
        x = as_strided(x, (2,), (offset * size,))[1:]
    return as_strided(x, shape, tuple(s * size for s in elem_strides))


_KINDS: dict[str, ArrayKind] = {"numpy": NumpyKind()}

#: Array types whose plain 2-D products take the dispatcher's short path (CuPy joins once it is seen).
PLAIN_TYPES: dict[type, ArrayKind] = {np.ndarray: _KINDS["numpy"]}


def kind_named(name: str) -> ArrayKind:
    """The adapter for a library by name (imports the library on first use)."""
    kind = _KINDS.get(name)
    if kind is None:
        factory = {"cupy": CupyKind, "pyopencl": OpenCLKind}.get(name)
        if factory is None:
            raise ValueError(f"unknown array library {name!r}")
        kind = _KINDS[name] = factory()
    return kind


def kind_of(x) -> str | None:
    """Name of the library ``x`` belongs to: 'numpy', 'cupy', 'pyopencl', 'dlpack', or None."""
    if isinstance(x, (np.ndarray, np.generic)):
        return "numpy"
    module = type(x).__module__.partition(".")[0]
    if module == "cupy" and "cupy" in sys.modules:
        return "cupy"
    if module == "pyopencl" and "pyopencl.array" in sys.modules:
        if isinstance(x, sys.modules["pyopencl.array"].Array):
            return "pyopencl"
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return "dlpack"
    return None


def is_dask_array(x) -> bool:
    """Whether ``x`` is a ``dask.array.Array``, told without importing Dask (only a caller that has it can pass one)."""
    return (
        type(x).__module__.startswith("dask.")
        and "dask.array" in sys.modules
        and isinstance(x, sys.modules["dask.array"].Array)
    )
