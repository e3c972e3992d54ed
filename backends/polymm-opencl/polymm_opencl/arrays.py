"""PyOpenCL arrays for polymm (entry point ``pyopencl`` of the group ``polymm.arrays``).

PyOpenCL is imported when the adapter is made, i.e. when polymm first meets a
``pyopencl.array.Array``.
"""

from __future__ import annotations

import numpy as np

from polymm.arrays import ArrayKind

__all__ = ["OpenCLKind"]


class OpenCLKind(ArrayKind):
    """PyOpenCL arrays; an operand's buffer is the array's ``base_data`` (a ``pyopencl.Buffer``).

    ``pyopencl.array.Array(...)`` costs ~25 us per call (NumPy reductions over
    the shape), more than a small kernel, so results are made with PyOpenCL's
    own fast constructor; result buffers come
    from a memory pool per queue, as CuPy's do (allocation is a driver call, and
    a fresh large buffer is paged in again on every product)."""

    name = "pyopencl"
    modules = ("pyopencl",)

    def __init__(self):
        import pyopencl.array as cl_array

        self.cl_array = cl_array
        self._array_type = cl_array.Array
        self._pools = {}
        try:  # the fast constructor's keywords are PyOpenCL's own; fall back if they change
            cl_array.Array(
                None, (0,), np.dtype("float32"), strides=(4,), _fast=True, _size=0, _context=None, _queue=None
            )
            self._fast = True
        except TypeError:
            self._fast = False

    def owns(self, x):
        return isinstance(x, self._array_type)

    def origin(self, x):
        return x.base_data, x.offset // x.dtype.itemsize

    def astype(self, x, dtype):
        """``x`` cast to ``dtype``: on the device where PyOpenCL's cast is right (C-contiguous,
        dtypes its kernels name), else through the host -- PyOpenCL's cast refuses other
        layouts, bool and float16, and writes an F-ordered array's elements out of place."""
        dtype = np.dtype(dtype)
        if x.flags.c_contiguous and _device_castable(x.dtype) and _device_castable(dtype):
            return x.astype(dtype)
        return self.cl_array.to_device(x.queue, np.ascontiguousarray(_to_host(x).astype(dtype)))

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


def _device_castable(dtype) -> bool:
    """Whether PyOpenCL's elementwise kernels name ``dtype`` (not bool, float16 or a swapped byte order)."""
    from pyopencl.compyte.dtypes import dtype_to_ctype

    try:
        dtype_to_ctype(dtype)
    except ValueError:
        return False
    return dtype.isnative


def _to_host(x) -> np.ndarray:
    """A NumPy copy of PyOpenCL array ``x`` with any strides (0 and negative too): the
    smallest byte span covering it is read back and viewed with ``x``'s strides."""
    import pyopencl as cl

    low = high = 0
    for n, s in zip(x.shape, x.strides):
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    raw = np.empty(high - low + x.dtype.itemsize, np.uint8)
    cl.enqueue_copy(x.queue, raw, x.base_data, src_offset=x.offset + low)
    return np.ndarray(x.shape, x.dtype, buffer=raw, offset=-low, strides=x.strides).copy()
