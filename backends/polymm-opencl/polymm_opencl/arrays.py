"""PyOpenCL arrays for polymm (entry point ``pyopencl`` of the group ``polymm.arrays``).

PyOpenCL is imported when the adapter is made, i.e. when polymm first meets a
``pyopencl.array.Array``. :func:`upload` copies a NumPy array to a queue with its strides where
that costs little (the backend's ``from_numpy``); :data:`DRIVER_LOCK` serializes the driver calls.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from polymm.arrays import ArrayKind
from polymm.backend import DeviceMemoryError

__all__ = [
    "OpenCLKind",
    "DRIVER_LOCK",
    "upload",
    "reads_host_memory",
    "lent_out",
    "lent_result",
    "lent_result_bytes",
    "host_result",
]

#: One thread at a time calls into the OpenCL driver through polymm: the backend's plans, uploads
#: and enqueues, and this adapter's allocations (a PyOpenCL ``MemoryPool`` is not thread-safe),
#: casts, fills and copies. Dask runs tasks on threads, and the NVIDIA driver crashed (SIGSEGV)
#: under concurrent calls: with the backend's calls alone serialized, still once in nine runs of
#: the conformance suite on the H100 (2026-11-24, a Dask case).
DRIVER_LOCK = threading.RLock()


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
        self._gather = {}  # (context, item size) -> program; (..., scalar arguments) -> its kernel
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
        with DRIVER_LOCK:
            if x.flags.c_contiguous and _device_castable(x.dtype) and _device_castable(dtype):
                return x.astype(dtype)
            return self.cl_array.to_device(x.queue, np.ascontiguousarray(_to_host(x).astype(dtype)))

    def broadcast_copy(self, x, shape, elem_strides):
        """A C-contiguous copy of ``x`` seen as ``shape`` with ``elem_strides``, gathered on the
        device by one kernel (PyOpenCL copies only contiguous arrays)."""
        if len(shape) > _GATHER_DIMS:
            return None
        out = self.empty(shape, x.dtype, like=x)  # from the queue's pool: a fresh buffer is paged in again
        self._strided_copy("polymm_gather", out, x, shape, elem_strides)
        return out

    def launch_bytes(self, x) -> int:
        """The device database's ``cost.launch_bytes`` for ``x``'s device: a GPU's copy, or on a
        CPU device (PoCL) far less, where the gather copies scattered elements at a CPU's speed."""
        from polymm.kernels.devices import settings_for

        from .devices import device_info

        return settings_for(device_info(x.queue.device))("cost", "launch_bytes")

    def _strided_copy(self, name, dense, strided, shape, elem_strides):
        """One kernel between C-contiguous ``dense`` and ``strided`` seen as ``shape`` with
        ``elem_strides``: ``polymm_gather`` reads ``strided`` into ``dense``, ``polymm_scatter`` writes
        ``dense`` into it."""
        import pyopencl as cl

        total = dense.size
        if not total:
            return
        buffer, start = self.origin(strided)
        pad = _GATHER_DIMS - len(shape)
        sizes, strides = (1,) * pad + tuple(shape), (0,) * pad + tuple(elem_strides)
        gather = name == "polymm_gather"
        group, items = 256, total
        if strides[-1] == 1 and sizes[-1] >= _ROW_MIN and dense.queue.device.type & cl.device_type.CPU:
            # a CPU work-item per contiguous row: the position's divisions once a row, not once
            # an element (PoCL, 2 cores: the copies of a crossed 64 x 64 batch of 32-cubes, 20 ms -> 2 ms)
            name, group, items = name + "_rows", 16, total // sizes[-1]
        with DRIVER_LOCK:  # a kernel object's arguments are shared state too
            scalars = (start, items, *sizes[1:], *strides)
            kernel = self._gather_kernel(dense.queue.context, dense.dtype.itemsize, scalars, name)
            kernel.set_arg(0, dense.base_data if gather else buffer)
            kernel.set_arg(1, buffer if gather else dense.base_data)
            cl.enqueue_nd_range_kernel(dense.queue, kernel, (-(-items // group) * group,), (group,))

    def _gather_kernel(self, context, itemsize, scalars, name="polymm_gather"):
        """The gather kernel with these scalar arguments already set: one ``cl.Kernel`` per
        geometry, since setting a dozen scalars costs more than the copy of a small batch (about
        120 us per call on the H100 host through PyOpenCL's ``set_args``)."""
        import pyopencl as cl

        key = (context, itemsize, scalars, name)
        kernel = self._gather.get(key)
        if kernel is None:
            program = self._gather.get((context, itemsize))
            if program is None:
                source = _GATHER_SOURCE.replace("ELEMENT", _BITS[itemsize])
                program = self._gather[(context, itemsize)] = cl.Program(context, source).build()
            if len(self._gather) > _GATHER_KERNELS:
                self._gather = {k: v for k, v in self._gather.items() if len(k) == 2}  # keep the programs
            kernel = self._gather[key] = cl.Kernel(program, name)
            for index, value in enumerate(scalars, start=2):
                kernel.set_arg(index, np.int64(value))
        return kernel

    def contiguous(self, x):
        if x.flags.c_contiguous:
            return x
        copy = self.broadcast_copy(x, x.shape, self.elem_strides(x))
        if copy is None:
            raise TypeError(
                f"polymm cannot re-layout a non-contiguous pyopencl array of {x.ndim} dimensions (at most "
                f"{_GATHER_DIMS}); pass a contiguous one"
            )
        return copy

    def empty(self, shape, dtype, like):
        queue = like.queue
        dtype = np.dtype(dtype)
        shape = tuple(shape)
        nbytes = dtype.itemsize
        for n in shape:
            nbytes *= n
        if nbytes == 0 or like.allocator is not None or not self._fast:
            with DRIVER_LOCK:
                return allocate(queue, nbytes, self.cl_array.empty, queue, shape, dtype, allocator=like.allocator)
        if len(shape) == 2:
            strides = (shape[1] * dtype.itemsize, dtype.itemsize)
        else:
            strides, step = [], dtype.itemsize
            for n in reversed(shape):
                strides.append(step)
                step *= max(n, 1)
            strides = tuple(reversed(strides))
        with DRIVER_LOCK:
            pool = self._pools.get(queue)
            if pool is None:
                from pyopencl.tools import ImmediateAllocator, MemoryPool

                pool = self._pools[queue] = MemoryPool(ImmediateAllocator(queue))
            data = allocate(queue, nbytes, pool, nbytes)
        return self.cl_array.Array(
            None,
            shape,
            dtype,
            strides=strides,
            data=data,
            _fast=True,
            _size=nbytes // dtype.itemsize,
            _context=like.context,
            _queue=queue,
        )

    def zeros(self, shape, dtype, like):
        with DRIVER_LOCK:
            return self.cl_array.zeros(like.queue, shape, dtype)

    def assign(self, dst, src):
        """``dst[...] = src``: one copy, or one scatter kernel into a strided ``dst``."""
        import pyopencl as cl

        src = self.contiguous(src)
        if not dst.flags.c_contiguous:
            if dst.ndim > _GATHER_DIMS:
                raise ValueError(f"out= of more than {_GATHER_DIMS} dimensions must be a C-contiguous pyopencl array")
            self._strided_copy("polymm_scatter", src, dst, dst.shape, self.elem_strides(dst))
            return
        with DRIVER_LOCK:
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

    def view(self, x, shape, elem_strides, offset=0, writeable=True):
        """A strided view for the conformance suite's layouts (PyOpenCL has no read-only arrays: None then)."""
        if not writeable:
            return None
        size = x.dtype.itemsize
        strides = tuple(s * size for s in elem_strides)
        with DRIVER_LOCK:
            return self.cl_array.Array(
                x.queue, shape, x.dtype, strides=strides, data=x.base_data, offset=x.offset + offset * size
            )

    def device(self, x):
        return f"opencl:{x.queue.device.name.strip()}"


#: Dimensions :meth:`OpenCLKind.broadcast_copy` gathers (batch axes and the matrix).
_GATHER_DIMS = 6
_GATHER_KERNELS = 256  # gather kernels kept, one per geometry
#: An element as raw bits, by item size.
_BITS = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}
_GATHER_SOURCE = """
// Where element i (C order) of a view of up to six dimensions lies: sizes n1..n5 of all but the
// first dimension, strides s0..s5, in elements from start.
inline long polymm_at(long i, long start, long n1, long n2, long n3, long n4, long n5,
                      long s0, long s1, long s2, long s3, long s4, long s5)
{
    long rest = i, at = start;
    at += (rest % n5) * s5; rest /= n5;
    at += (rest % n4) * s4; rest /= n4;
    at += (rest % n3) * s3; rest /= n3;
    at += (rest % n2) * s2; rest /= n2;
    at += (rest % n1) * s1; rest /= n1;
    return at + rest * s0;
}

__kernel void polymm_gather(__global ELEMENT *dst, __global const ELEMENT *src, long start, long total,
                            long n1, long n2, long n3, long n4, long n5,
                            long s0, long s1, long s2, long s3, long s4, long s5)
{
    long i = get_global_id(0);
    if (i < total) dst[i] = src[polymm_at(i, start, n1, n2, n3, n4, n5, s0, s1, s2, s3, s4, s5)];
}

__kernel void polymm_scatter(__global ELEMENT *dst, __global const ELEMENT *src, long start, long total,
                             long n1, long n2, long n3, long n4, long n5,
                             long s0, long s1, long s2, long s3, long s4, long s5)
{
    long i = get_global_id(0);
    if (i < total) dst[polymm_at(i, start, n1, n2, n3, n4, n5, s0, s1, s2, s3, s4, s5)] = src[i];
}

// The same a row at a time, where the last dimension is contiguous (s5 == 1): ``rows`` rows of
// n5 elements, the row's place found once.
__kernel void polymm_gather_rows(__global ELEMENT *dst, __global const ELEMENT *src, long start, long rows,
                                 long n1, long n2, long n3, long n4, long n5,
                                 long s0, long s1, long s2, long s3, long s4, long s5)
{
    long r = get_global_id(0);
    if (r >= rows) return;
    long at = polymm_at(r * n5, start, n1, n2, n3, n4, n5, s0, s1, s2, s3, s4, s5);
    __global ELEMENT *d = dst + r * n5;
    for (long j = 0; j < n5; ++j) d[j] = src[at + j];
}

__kernel void polymm_scatter_rows(__global ELEMENT *dst, __global const ELEMENT *src, long start, long rows,
                                  long n1, long n2, long n3, long n4, long n5,
                                  long s0, long s1, long s2, long s3, long s4, long s5)
{
    long r = get_global_id(0);
    if (r >= rows) return;
    long at = polymm_at(r * n5, start, n1, n2, n3, n4, n5, s0, s1, s2, s3, s4, s5);
    __global const ELEMENT *v = src + r * n5;
    for (long j = 0; j < n5; ++j) dst[at + j] = v[j];
}
"""
#: Shortest contiguous last dimension copied a row per work-item on a CPU device.
_ROW_MIN = 8


def _device_castable(dtype) -> bool:
    """Whether PyOpenCL's elementwise kernels name ``dtype`` (not bool, float16 or a swapped byte order)."""
    from pyopencl.compyte.dtypes import dtype_to_ctype

    try:
        dtype_to_ctype(dtype)
    except ValueError:
        return False
    return dtype.isnative


def byte_span(shape, strides) -> tuple[int, int]:
    """Byte offsets of the lowest and the highest element of a strided array from its first."""
    low = high = 0
    for n, s in zip(shape, strides):
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    return low, high


def upload(queue, x: np.ndarray, lend: bool = False):
    """Upload ``x`` keeping its strides (0 and negative too) when that costs little.

    The smallest memory span covering ``x`` is copied and viewed with ``x``'s own
    strides, so a broadcast batch is not materialised; sparse or oddly
    aligned views are made contiguous first. ``lend`` (an operand used within one call): on a
    device that computes in host memory (:func:`reads_host_memory`; elsewhere a copy is made as
    usual), the device reads ``x``'s own memory (``CL_MEM_USE_HOST_PTR``, no copy) for as long as
    the returned array lives: a copy into fresh device memory cost 40 ms per 64 MiB on PoCL (page faults, then one
    thread copying), more than half of a deep 128 x 65536 x 128 float64 product.
    """
    lend = lend and reads_host_memory(queue)
    return allocate(queue, x.nbytes, _copied_to, queue, x, lend)  # a span copy may take up to twice that


def reads_host_memory(queue) -> bool:
    """Whether ``queue``'s device computes in host memory (a CPU device: PoCL)."""
    import pyopencl as cl

    return bool(queue.device.type & cl.device_type.CPU)


def _copied_to(queue, x, lend=False):
    """:func:`upload`'s copy (or, ``lend``, its view of ``x``'s memory)."""
    import pyopencl as cl
    import pyopencl.array as cl_array

    size = x.dtype.itemsize
    if x.size == 0:
        return cl_array.to_device(queue, np.ascontiguousarray(x))
    low, high = byte_span(x.shape, x.strides)
    span = high - low + size
    if not all(s % size == 0 for s in x.strides) or span > 2 * x.nbytes or not x.flags.aligned:
        x = np.ascontiguousarray(x)
        low, span = 0, x.nbytes
    if x.flags.c_contiguous and not lend:
        return cl_array.to_device(queue, x)
    start = x.__array_interface__["data"][0]
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(start + low))
    if lend:
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR
        lent = cl_array.Array(
            queue, x.shape, x.dtype, strides=x.strides, data=cl.Buffer(queue.context, flags, hostbuf=raw), offset=-low
        )
        lent.polymm_host = x  # the memory the device reads stays alive with the array
        return lent
    buffer = cl_array.to_device(queue, raw.copy())
    return cl_array.Array(queue, x.shape, x.dtype, strides=x.strides, data=buffer.data, offset=-low)


def lent_result_bytes(queue) -> int:
    """From how many bytes on a result is written into host memory on ``queue``'s device (which
    computes there): the device database's ``cost.lent_result_bytes``, with its evidence."""
    from polymm.kernels.devices import settings_for

    from .devices import device_info

    return settings_for(device_info(queue.device))("cost", "lent_result_bytes")


def lent_result(queue, shape, dtype):
    """A device array over a new NumPy array (``CL_MEM_USE_HOST_PTR``) for a result that
    :func:`host_result` then hands back without a copy, or None: the device does not compute in
    host memory, or the result is under :func:`lent_result_bytes`."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if not _written_in_host_memory(queue, nbytes):
        return None
    # past the device's largest buffer: its clear error
    return allocate(queue, nbytes, lambda: _written_in_place(queue, np.empty(shape, dtype)))


def lent_out(queue, out: np.ndarray):
    """A device array over the caller's ``out=`` array (``CL_MEM_USE_HOST_PTR``) that the
    product writes in place and :func:`host_result` hands back, or None: the device does not
    compute in host memory, or ``out`` is under :func:`lent_result_bytes` (``out`` is
    C-contiguous, aligned and apart from the operands: the core checked)."""
    if not out.dtype.isnative or not _written_in_host_memory(queue, out.nbytes):
        return None
    return allocate(queue, out.nbytes, lambda: _written_in_place(queue, out))


def _written_in_host_memory(queue, nbytes: int) -> bool:
    """Whether a result of ``nbytes`` is written where the host reads it on ``queue``'s device:
    the device computes in host memory and the result is at least :func:`lent_result_bytes`
    (:func:`lent_result`'s and :func:`lent_out`'s rule)."""
    return reads_host_memory(queue) and nbytes >= lent_result_bytes(queue)


def _written_in_place(queue, host: np.ndarray):
    """A device array over ``host``'s memory (``CL_MEM_USE_HOST_PTR``) whose :func:`host_result`
    is ``host`` itself: :func:`lent_result`'s and :func:`lent_out`'s."""
    import pyopencl as cl
    import pyopencl.array as cl_array

    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
    lent = cl_array.Array(queue, host.shape, host.dtype, data=cl.Buffer(queue.context, flags, hostbuf=host))
    lent.polymm_result = host
    return lent


def host_result(x) -> np.ndarray:
    """The NumPy array a :func:`lent_result` array was written into, once the device's writes
    are visible there (mapping the buffer waits for them, and syncs a driver that kept a copy)."""
    import pyopencl as cl

    mapped, event = cl.enqueue_map_buffer(x.queue, x.base_data, cl.map_flags.READ, 0, x.shape, x.dtype)
    event.wait()
    mapped.base.release(x.queue)
    return x.polymm_result


#: The most each queue's device allocates in one buffer (``CL_DEVICE_MAX_MEM_ALLOC_SIZE``), asked once.
_MAX_ALLOC: dict = {}


def allocate(queue, nbytes: int, make, *args, **kwargs):
    """``make(*args, **kwargs)``, a device allocation of ``nbytes``: more than the device gives in
    one buffer is refused before the driver is asked (it answers ``INVALID_BUFFER_SIZE``), and the
    driver's allocation failures become :class:`~polymm.backend.DeviceMemoryError`, naming the
    device. A plain call, not a context manager: it sits on every product's path."""
    most = _MAX_ALLOC.get(queue)
    if most is None:
        most = _MAX_ALLOC[queue] = queue.device.max_mem_alloc_size
    if nbytes > most:
        raise DeviceMemoryError(
            f"polymm: {nbytes:,} bytes in one buffer is more than OpenCL device {queue.device.name.strip()!r} "
            f"allocates at once ({most:,} bytes, CL_DEVICE_MAX_MEM_ALLOC_SIZE); split the product (Dask "
            "arrays of smaller chunks) or use another backend"
        )
    try:
        return make(*args, **kwargs)
    except Exception as exc:
        import pyopencl as cl

        if not isinstance(exc, cl.MemoryError):
            raise
        raise DeviceMemoryError(
            f"polymm: OpenCL device {queue.device.name.strip()!r} could not allocate {nbytes:,} bytes: {exc}"
        ) from exc


def _to_host(x) -> np.ndarray:
    """A NumPy copy of PyOpenCL array ``x`` with any strides (0 and negative too): the
    smallest byte span covering it is read back and viewed with ``x``'s strides."""
    import pyopencl as cl

    low, high = byte_span(x.shape, x.strides)
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    raw = np.empty(high - low + x.dtype.itemsize, np.uint8)
    cl.enqueue_copy(x.queue, raw, x.base_data, src_offset=x.offset + low)
    return np.ndarray(x.shape, x.dtype, buffer=raw, offset=-low, strides=x.strides).copy()
