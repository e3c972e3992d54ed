"""CuPy arrays for polymm (entry point ``cupy`` of the group ``polymm.arrays``).

CuPy is imported when the adapter is made, i.e. when polymm first meets a CuPy
array (or a DLPack capsule on a CUDA device), never by ``import polymm_cuda``.
"""

from __future__ import annotations

import numpy as np

from polymm.arrays import ArrayKind
from polymm.backend import DeviceMemoryError
from polymm.shapes import c_strides

__all__ = ["CupyKind"]


def out_of_memory(cp, device_id: int, exc) -> DeviceMemoryError:
    """CuPy's allocation failure as polymm's :class:`~polymm.backend.DeviceMemoryError`, with
    what the device has free (CuPy's own message says what was asked for)."""
    with cp.cuda.Device(device_id):
        free, total = cp.cuda.runtime.memGetInfo()
    return DeviceMemoryError(
        f"polymm: CUDA device {device_id} could not allocate a buffer ({free:,} of {total:,} bytes free): {exc}"
    )


class CupyKind(ArrayKind):
    """CuPy arrays; an operand's buffer is the CuPy array itself (its data pointer is the origin)."""

    name = "cupy"
    modules = ("cupy",)
    dlpack_devices = (2, 13)  # kDLCUDA, kDLCUDAManaged

    def __init__(self):
        import cupy

        self.cp = cupy
        self._ndarray = cupy.ndarray

    def owns(self, x):
        return isinstance(x, self._ndarray)

    def origin(self, x):
        return x, 0

    def from_dlpack(self, x):
        return self.cp.from_dlpack(x)

    def same_stream(self, x) -> bool:
        """Whether ``x`` is a PyTorch CUDA tensor on CuPy's current device whose current PyTorch
        stream is CuPy's current stream: work on it stays ordered without DLPack's stream
        handshake (which costs a PyTorch call about 0.1 ms)."""
        if not _is_torch(type(x)) or not x.is_cuda:
            return False
        device = x.get_device()  # (x.device.index makes a device object: half a microsecond)
        if device != self.cp.cuda.runtime.getDevice():
            return False
        return _torch_stream(device) == self.cp.cuda.get_current_stream().ptr

    def view_foreign(self, x):
        """A :class:`ForeignView` of ``x``, a PyTorch tensor, or None (not on a GPU, empty,
        autograd, a dtype polymm does not compute: the DLPack path decides).  Lazily conjugated
        or negated tensors are resolved first."""
        dtype = _torch_dtypes().get(x.dtype)
        if dtype is None or x.requires_grad or not x.is_cuda or 0 in x.shape:
            return None
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        return ForeignView(x, dtype)

    def call_key(self, x1, x2):
        """What decides the plan of ``x1 @ x2`` besides the addresses (``ArrayKind.call_key``):
        dtype, shapes, strides, devices, addresses modulo 16.  CuPy arrays, and PyTorch tensors
        on CuPy's current device and stream (checked by the caller); None for tensors only the
        whole short path takes as they are (autograd, lazy conjugation or negation)."""
        if type(x1) is self._ndarray:
            d1, d2 = x1.data, x2.data
            return (
                x1.dtype,
                x1.shape,
                x1.strides,
                x2.shape,
                x2.strides,
                d1.device_id,
                d2.device_id,
                d1.ptr & 15,
                d2.ptr & 15,
            )
        if x1.requires_grad or x2.requires_grad or x1.is_conj() or x2.is_conj() or x1.is_neg() or x2.is_neg():
            return None
        p1, p2 = x1.data_ptr(), x2.data_ptr()
        return x1.dtype, x1.shape, x1.stride(), x2.shape, x2.stride(), x2.get_device(), p1 & 15, p2 & 15

    def replay(self, x1, x2, shape, launch):
        """A new result of ``shape`` like ``x1`` (a CuPy array, or a PyTorch tensor), written by
        ``launch`` (a backend's ``replayable``)."""
        if type(x1) is self._ndarray:
            result = self.empty(shape, x1.dtype, like=x1)
            launch(x1.data.ptr, x2.data.ptr, result.data.ptr)
            return result
        result = x1.new_empty(shape)
        launch(x1.data_ptr(), x2.data_ptr(), result.data_ptr())
        return result

    def native_array(self, x):
        """A CuPy array for ``x``, a CuPy array or a :class:`ForeignView` (the general path's)."""
        return x.cupy() if type(x) is ForeignView else x

    @staticmethod
    def new_foreign(like, like_view, shape):
        """A new array of ``like``'s library, dtype and device (PyTorch: ``new_empty``), and its
        :class:`ForeignView` (C-contiguous, with ``like_view``'s dtype and device: made without
        asking PyTorch for them again)."""
        result = like.new_empty(shape)
        return result, ForeignView.fresh(result, shape, like_view)

    def result_type(self, x1, x2):
        return np.dtype(self.cp.result_type(x1.dtype, x2.dtype))

    def contiguous(self, x):
        return self.cp.ascontiguousarray(x)

    def broadcast_copy(self, x, shape, elem_strides):
        size = x.dtype.itemsize
        view = self.cp.lib.stride_tricks.as_strided(x, shape, tuple(s * size for s in elem_strides))
        with x.device:
            return self.cp.ascontiguousarray(view)

    def empty(self, shape, dtype, like):
        device = like.device
        try:
            if device.id == self.cp.cuda.runtime.getDevice():
                return self.cp.empty(shape, dtype)
            with device:
                return self.cp.empty(shape, dtype)
        except self.cp.cuda.memory.OutOfMemoryError as exc:
            raise out_of_memory(self.cp, device.id, exc) from None

    def zeros(self, shape, dtype, like):
        try:
            with like.device:
                return self.cp.zeros(shape, dtype)
        except self.cp.cuda.memory.OutOfMemoryError as exc:
            raise out_of_memory(self.cp, like.device.id, exc) from None

    def view(self, x, shape, elem_strides, offset=0, writeable=True):
        """A strided view for the conformance suite's layouts (CuPy has no read-only arrays: None then)."""
        if not writeable:
            return None
        size, as_strided = x.dtype.itemsize, self.cp.lib.stride_tricks.as_strided
        start = as_strided(x, (offset + 1,), (size,))[offset:] if offset else x
        return as_strided(start, shape, tuple(s * size for s in elem_strides))

    def shares_memory(self, x, y):
        return self.cp.may_share_memory(x, y)

    def device(self, x):
        return f"cuda:{x.device.id}"


class ForeignView:
    """A PyTorch CUDA tensor seen in place: what polymm's short path and the cuda backend read of
    a CuPy array (``shape``, ``dtype``, byte ``strides``, ``ndim``, ``data.ptr``,
    ``data.device_id``), without making one: a CuPy view of a tensor cost 4.2 us of host time on
    the H100 (2026-11-24), and a product makes three.  :meth:`cupy` makes that view where the
    backend copies or the general path needs an array; the view keeps the tensor alive."""

    __slots__ = ("shape", "dtype", "strides", "ndim", "ptr", "device_id", "tensor")

    def __init__(self, tensor, dtype: np.dtype):
        self.tensor = tensor
        self.shape = tuple(tensor.shape)
        self.ndim = len(self.shape)
        self.dtype = dtype
        self.strides = tuple(map(dtype.itemsize.__mul__, tensor.stride()))
        self.ptr = tensor.data_ptr()
        self.device_id = tensor.get_device()

    @classmethod
    def fresh(cls, tensor, shape, like: "ForeignView") -> "ForeignView":
        """The view of ``tensor``, just made C-contiguous of ``shape`` with ``like``'s dtype on its
        device (three PyTorch queries fewer than ``ForeignView(tensor, dtype)``: 3 us a call)."""
        view = cls.__new__(cls)
        view.tensor, view.shape, view.ndim, view.dtype = tensor, tuple(shape), len(shape), like.dtype
        view.strides = tuple(like.dtype.itemsize * s for s in c_strides(view.shape))
        view.ptr, view.device_id = tensor.data_ptr(), like.device_id
        return view

    @property
    def data(self):
        """Itself: ``data.ptr`` and ``data.device_id``, as of a CuPy array's memory pointer."""
        return self

    def cupy(self):
        """The CuPy view of the same memory (it spans the elements the tensor reaches; PyTorch
        strides are never negative)."""
        import cupy

        extent = self.dtype.itemsize + sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        memory = cupy.cuda.UnownedMemory(self.ptr, extent, self.tensor, self.device_id)
        return cupy.ndarray(self.shape, self.dtype, cupy.cuda.MemoryPointer(memory, 0), self.strides)


_TORCH_DTYPES: dict | None = None
_TORCH_TYPES: dict = {}


def _is_torch(kind: type) -> bool:
    """Whether ``kind`` is one of PyTorch's types (by its module; remembered per type)."""
    found = _TORCH_TYPES.get(kind)
    if found is None:
        found = _TORCH_TYPES[kind] = kind.__module__.split(".")[0] == "torch"
    return found


def _torch_stream(device: int) -> int:
    """The handle of PyTorch's current CUDA stream on ``device``: through PyTorch's internal
    accessor where it has one (0.3 us on the H100's host against 4 us for the public
    ``torch.cuda.current_stream(device).cuda_stream``, a fifth of a small product's call)."""
    global _TORCH_STREAM
    if _TORCH_STREAM is None:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _TORCH_STREAM = raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)
    return _TORCH_STREAM(device)


_TORCH_STREAM = None


def _torch_dtypes() -> dict:
    """PyTorch dtype -> NumPy dtype for what polymm computes (bfloat16: ml_dtypes', when installed)."""
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        import torch

        from polymm.backend import optional_dtypes

        names = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64")
        table = {getattr(torch, n): np.dtype(n) for n in names}
        table.update({torch.complex64: np.dtype("complex64"), torch.complex128: np.dtype("complex128")})
        table.update({torch.bfloat16: d for d in optional_dtypes()})
        _TORCH_DTYPES = table
    return _TORCH_DTYPES
