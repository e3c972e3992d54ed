"""CuPy arrays for polymm (entry point ``cupy`` of the group ``polymm.arrays``).

CuPy is imported when the adapter is made, i.e. when polymm first meets a CuPy
array (or a DLPack capsule on a CUDA device), never by ``import polymm_cuda``.
"""

from __future__ import annotations

import numpy as np

from polymm.arrays import ArrayKind

__all__ = ["CupyKind"]


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

    def result_type(self, x1, x2):
        return np.dtype(self.cp.result_type(x1.dtype, x2.dtype))

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
