"""An array type polymm's core has never heard of, its adapter, and a backend selected by it.

:class:`TinyArray` is a whole array library in a few lines: a strided view of a
flat buffer.  It is not a NumPy array and speaks no DLPack, so polymm can
compute on it only through what this module registers (see ``pyproject.toml``):

* :class:`TinyKind`, entry point ``tiny`` of the group ``polymm.arrays``: the
  adapter that tells the core how to allocate, copy and describe TinyArrays;
* :class:`TinyBackend`, entry point ``tiny`` of the group ``polymm.backends``:
  ``array_library = "tiny"`` and ``default_for = ("tiny",)``, so
  ``polymm.matmul(x, y)`` on TinyArrays computes here with no ``backend=``.

The backend receives :class:`polymm.Operand` (buffer, element offset, element
strides) and its "kernel" reads the buffer through them, as a device kernel would.
"""

from __future__ import annotations

import numpy as np

import polymm
from polymm.arrays import ArrayKind

__all__ = ["TinyArray", "TinyKind", "TinyBackend"]


class TinyArray:
    """``shape`` elements of ``storage`` (a flat NumPy buffer) from ``offset``, ``elem_strides`` apart."""

    def __init__(self, storage: np.ndarray, shape, elem_strides, offset: int = 0, writeable: bool = True):
        self.storage = storage
        self.shape = tuple(shape)
        self.elem_strides = tuple(elem_strides)
        self.offset = offset
        self.writeable = writeable

    @classmethod
    def empty(cls, shape, dtype):
        shape = tuple(shape)
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= max(n, 1)
        return cls(np.empty(max(step, 1), dtype), shape, tuple(reversed(strides)))

    @classmethod
    def from_numpy(cls, x) -> TinyArray:
        x = np.asarray(x)
        out = cls.empty(x.shape, x.dtype)
        out._host()[...] = x
        return out

    @property
    def dtype(self) -> np.dtype:
        return self.storage.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """In bytes, as NumPy's."""
        return tuple(s * self.dtype.itemsize for s in self.elem_strides)

    def _host(self) -> np.ndarray:
        """The elements as a NumPy view of the storage (how this library reads and writes itself)."""
        start = self.storage[self.offset :]
        return np.lib.stride_tricks.as_strided(start, self.shape, self.strides)

    def to_numpy(self) -> np.ndarray:
        return self._host().copy()

    def astype(self, dtype) -> TinyArray:
        return TinyArray.from_numpy(self._host().astype(dtype))

    def __repr__(self):
        return f"TinyArray({self.to_numpy()!r})"


class TinyKind(ArrayKind):
    """What polymm's core needs to know about TinyArrays."""

    modules = ("polymm_example",)

    def owns(self, x):
        return isinstance(x, TinyArray)

    def origin(self, x):
        return x.storage, x.offset

    def elem_strides(self, x):
        return x.elem_strides

    def contiguous(self, x):
        return TinyArray.from_numpy(x.to_numpy())

    def empty(self, shape, dtype, like):
        return TinyArray.empty(shape, dtype)

    def zeros(self, shape, dtype, like):
        return TinyArray.from_numpy(np.zeros(shape, dtype))

    def assign(self, dst, src):
        dst._host()[...] = src._host()

    def is_c_contiguous(self, x):
        return x.elem_strides == TinyArray.empty(x.shape, x.dtype).elem_strides

    def writeable(self, x):
        return x.writeable

    def shares_memory(self, x, y):
        return x.storage is y.storage

    def view(self, x, shape, elem_strides, offset=0, writeable=True):
        return TinyArray(x.storage, shape, elem_strides, x.offset + offset, writeable)

    def device(self, x):
        return "host (TinyArray)"


def _index(op: polymm.Operand) -> np.ndarray:
    """Where element ``[i, r, c]`` of an operand lies: ``offset + i*s0 + r*s1 + c*s2`` in its buffer."""
    (b, rows, cols), (s0, s1, s2) = op.shape, op.strides
    return (
        op.offset
        + (np.arange(b) * s0)[:, None, None]
        + (np.arange(rows) * s1)[None, :, None]
        + (np.arange(cols) * s2)[None, None, :]
    )


class TinyBackend(polymm.Backend):
    """Computes TinyArrays (and NumPy arrays, moved in and out) from kernel-ready operands."""

    algorithms = ("auto",)
    array_library = "tiny"
    default_for = ("tiny",)

    def devices(self):
        return ["host (TinyArray, NumPy gathers)"]

    def from_numpy(self, x):
        return TinyArray.from_numpy(x)

    def to_numpy(self, x):
        return x.to_numpy()

    @np.errstate(all="ignore")  # NaN and Inf propagate silently, as from the other backends
    def matmul(self, a, b, out, algorithm):
        acc = np.float32 if out.dtype == np.float16 else out.dtype  # float16 accumulates in float32
        product = np.matmul(a.buffer[_index(a)].astype(acc), b.buffer[_index(b)].astype(acc))
        out.buffer[_index(out)] = product.astype(out.dtype)
