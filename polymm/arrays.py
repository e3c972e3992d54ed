"""Array libraries the core understands, each behind one small adapter.

The core's shape and ``out=`` logic is written once against :class:`ArrayKind`;
each adapter maps its handful of primitives (allocation, copies, kernel-ready
operands) onto one library.  NumPy's adapter is the core's own.  The others come
from the entry-point group ``polymm.arrays`` (name: the library; value: the
adapter class): CuPy's ships with polymm-cuda, PyOpenCL's with polymm-opencl,
and a plugin may bring one for its own array type.  Adapters are loaded at the
first array NumPy does not own, and made (importing their library) only for an
array of a module they name.  Any other array-API or DLPack array (PyTorch, JAX,
array-api-strict) is viewed through DLPack by the adapter of its device and the
result handed back as its own kind.
"""

from __future__ import annotations

import sys
import threading
import traceback
from importlib.metadata import entry_points

import numpy as np

from .backend import Operand

__all__ = [
    "ArrayKind",
    "DLPACK",
    "as_operand",
    "is_dask_array",
    "kind_of",
    "kind_named",
    "kind_for_dlpack_device",
    "register_array_kind",
]

ENTRY_POINT_GROUP = "polymm.arrays"


class ArrayKind:
    """Adapter for one array library: the primitives the core needs.

    A plugin's adapter subclasses this and sets :attr:`modules`. Its module must import its
    library only in ``__init__``: the core imports every adapter's module to read
    :attr:`modules`. Its arrays must have ``shape``, ``ndim``, ``dtype`` (a NumPy dtype),
    ``strides`` (in bytes) and ``astype(dtype)``.

    Required (no default): :meth:`owns`, :meth:`origin`, :meth:`empty`, :meth:`zeros`,
    :meth:`contiguous`, :meth:`shares_memory`.

    Required unless the default fits your arrays -- each default needs what it names:

    * :meth:`assign` -- ``dst[...] = src``: needs ``__setitem__`` with an Ellipsis taking an
      array of the library; used for ``out=`` that is not C-contiguous or aliases an input
      (the core computes into a temporary, then assigns), and for K = 0 (zeros assigned);
    * :meth:`is_c_contiguous` -- needs ``x.flags.c_contiguous`` (NumPy-like flags);
    * :meth:`writeable` -- ``True``: override it if the library has read-only arrays;
    * :meth:`elem_strides` -- needs ``x.strides`` in bytes;
    * :meth:`astype` -- needs ``x.astype(dtype)``; :meth:`result_type` -- NumPy's promotion
      of ``x.dtype``; :meth:`device` -- ``"cpu"`` (used in messages).

    Optional: :attr:`dlpack_devices` and :meth:`from_dlpack` (to view other libraries'
    arrays), :meth:`broadcast_copy` (one launch over a broadcast batch) with :meth:`launch_bytes`,
    :meth:`call_key` and :meth:`replay` (the short path's replays), and :meth:`view`, with which the conformance
    suite makes transposed, strided, reversed and read-only arrays of the library to prove
    the adapter on them (without it, those cases are skipped, saying so).
    """

    #: the library's name (set from the entry-point name)
    name = "?"
    #: top-level modules whose array types this adapter may own (default: its name)
    modules: tuple[str, ...] = ()
    #: DLPack device types whose capsules :meth:`from_dlpack` takes (kDLCPU 1, kDLCUDA 2, ...)
    dlpack_devices: tuple[int, ...] = ()
    #: True for host libraries: backends then get views of the library's arrays, not :class:`Operand`
    views = False

    def owns(self, x) -> bool:
        """Whether ``x`` is an array of this library."""
        raise NotImplementedError

    def origin(self, x) -> tuple[object, int]:
        """``(buffer, element offset of x[0, ...])`` for :class:`~polymm.backend.Operand`."""
        raise NotImplementedError

    def operand(self, x, shape, elem_strides, offset=0):
        """What a backend receives for ``x`` seen as ``shape`` with ``elem_strides``,
        starting ``offset`` elements past ``x``'s first element."""
        buffer, start = self.origin(x)
        return Operand(buffer, start + offset, tuple(elem_strides), tuple(shape), np.dtype(x.dtype), x)

    def from_dlpack(self, x):
        raise NotImplementedError

    def result_type(self, x1, x2) -> np.dtype:
        return np.result_type(x1.dtype, x2.dtype)

    def elem_strides(self, x) -> tuple[int, ...] | None:
        """Strides in elements, or None when a byte stride is not a multiple of the item size."""
        size = x.dtype.itemsize
        if any(s % size for s in x.strides):
            return None
        return tuple(s // size for s in x.strides)

    def astype(self, x, dtype):
        return x.astype(dtype)

    def contiguous(self, x):
        raise NotImplementedError

    def broadcast_copy(self, x, shape, elem_strides):
        """A new C-contiguous array of ``x`` seen as ``shape`` with ``elem_strides`` (0 along
        broadcast axes), or None when the library cannot make one (the core then loops)."""
        return None

    def launch_bytes(self, x) -> int:
        """The bytes :meth:`broadcast_copy` moves on ``x``'s device in the time one more product
        launch costs (the device database's ``cost.launch_bytes``; here the value every device
        shares, a GPU's): the core copies a batch that does not merge into one stride rather
        than launch once per outer index where the copy is cheaper by this measure."""
        from .kernels.devices import shared_settings

        return shared_settings()("cost", "launch_bytes")

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

    def view(self, x, shape, elem_strides, offset=0, writeable=True):
        """A view (no copy) of ``x``'s memory as ``shape`` with ``elem_strides`` from element
        ``offset``, read-only unless ``writeable`` -- for the conformance suite's layouts, never
        used by the core. None (the default): the library cannot make one."""
        return None

    def call_key(self, x1, x2):
        """What decides the plan of ``x1 @ x2`` besides the operands' addresses (hashable: dtype,
        shapes, strides, devices, alignment), for the core's short path to replay a device
        backend's launch (``polymm.dispatch._replay_key``); None (the default): never replayed."""
        return None

    def replay(self, x1, x2, shape, launch):
        """A new result of ``shape`` like ``x1``, written by ``launch(address of x1, of x2, of the
        result)`` (an adapter whose :meth:`call_key` gives keys implements this)."""
        raise NotImplementedError


class NumpyKind(ArrayKind):
    name = "numpy"
    modules = ("numpy",)
    dlpack_devices = (1,)  # kDLCPU
    views = True

    def owns(self, x):
        return isinstance(x, (np.ndarray, np.generic))

    def operand(self, x, shape, elem_strides, offset=0):
        """A strided view (host backends read NumPy views)."""
        if not offset and _same_layout(x.shape, self.elem_strides(x), shape, elem_strides):
            return x.reshape(shape)  # cheap, and the common case of unbatched operands
        size = x.dtype.itemsize
        as_strided = np.lib.stride_tricks.as_strided
        if offset:
            # Two elements `offset` apart; keep the second: a view that starts there.
            x = as_strided(x, (2,), (offset * size,))[1:]
        return as_strided(x, shape, tuple(s * size for s in elem_strides))

    def from_dlpack(self, x):
        return np.from_dlpack(x)

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def empty(self, shape, dtype, like):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype, like):
        return np.zeros(shape, dtype)

    def writeable(self, x):
        return bool(x.flags.writeable)

    def view(self, x, shape, elem_strides, offset=0, writeable=True):
        size = x.dtype.itemsize
        start = np.lib.stride_tricks.as_strided(x, (offset + 1,), (size,))[offset:] if offset else x
        return np.lib.stride_tricks.as_strided(start, shape, [s * size for s in elem_strides], writeable=writeable)

    def shares_memory(self, x, y):
        return np.may_share_memory(x, y)


class _DLPackKind(ArrayKind):
    """Marks arrays no adapter owns that speak DLPack (PyTorch, JAX, array-api-strict)."""

    name = "dlpack"


DLPACK = _DLPackKind()


def _same_layout(shape, strides, new_shape, new_strides) -> bool:
    """Whether ``new`` only adds or drops axes of length 1 (so a reshape is a view)."""
    if strides is None:
        return False
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [(n, s) for n, s in zip(new_shape, new_strides) if n != 1]
    return old == new


_NUMPY = NumpyKind()
_lock = threading.Lock()
_kinds: dict[str, ArrayKind] = {"numpy": _NUMPY}
_classes: dict[str, type] | None = None  # adapter classes from the entry points, by library name
_failed: dict[str, str] = {}  # library -> why its adapter could not be loaded or made

#: The adapter of each array type seen so far (an adapter's, not DLPack's); the
#: dispatcher's short path for plain 2-D products looks types up here.
PLAIN_TYPES: dict[type, ArrayKind] = {np.ndarray: _NUMPY}
_other_types: dict[type, ArrayKind | None] = {}  # DLPack arrays and non-arrays seen so far


def _adapter_classes() -> dict[str, type]:
    global _classes
    if _classes is None:
        with _lock:
            if _classes is None:
                found = {}
                for ep in entry_points(group=ENTRY_POINT_GROUP):
                    if ep.name in found or ep.name in _kinds:
                        continue
                    try:
                        found[ep.name] = ep.load()
                    except Exception as exc:  # a broken plugin must not break polymm
                        _failed[ep.name] = _describe_error(exc)
                _classes = found
    return _classes


def register_array_kind(name: str, adapter: type, *, replace: bool = False) -> None:
    """Register an adapter class for array library ``name`` at run time, besides the entry-point
    group (a quick experiment, a test with a deliberately broken adapter); like
    :func:`polymm.register_backend`, refusing to replace one silently."""
    if name == "numpy":
        raise ValueError("the NumPy adapter is the core's own and cannot be replaced")
    classes = _adapter_classes()
    with _lock:
        if (name in classes or name in _kinds) and not replace:
            raise ValueError(f"an adapter for {name!r} arrays is registered; pass replace=True to replace it")
        classes[name] = adapter
        _kinds.pop(name, None)
        _failed.pop(name, None)
        for known in (PLAIN_TYPES, _other_types):  # types seen before are classified again
            for t in [t for t, kind in known.items() if kind is not _NUMPY]:
                del known[t]


def _describe_error(exc) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return f"{type(exc).__name__}: {exc}" + (f" (in {where.filename}:{where.lineno})" if where else "")


def _modules(name, cls) -> tuple[str, ...]:
    return tuple(getattr(cls, "modules", ()) or (name,))


def kind_named(name: str) -> ArrayKind:
    """The adapter for a library by name (made, importing the library, on first use)."""
    kind = _kinds.get(name)
    if kind is not None:
        return kind
    cls = _adapter_classes().get(name)
    if cls is None:
        why = _failed.get(name)
        raise ValueError(
            f"no polymm adapter for array library {name!r}"
            + (f": {why}" if why else f" (adapters come from the entry-point group {ENTRY_POINT_GROUP!r})")
        )
    with _lock:
        kind = _kinds.get(name)
        if kind is None:
            try:
                kind = cls()
            except Exception as exc:
                _failed[name] = _describe_error(exc)
                raise ValueError(f"the polymm adapter for {name!r} arrays cannot be made: {_failed[name]}") from exc
            kind.name = name
            _kinds[name] = kind
    return kind


def kind_of(x) -> ArrayKind | None:
    """The adapter of ``x``'s library, :data:`DLPACK` for other DLPack arrays, or None."""
    t = type(x)
    kind = PLAIN_TYPES.get(t) or _other_types.get(t, _classify)
    if kind is _classify:
        kind = _classify(x)
        if kind is None or kind is DLPACK:
            _other_types[t] = kind
        else:
            PLAIN_TYPES[t] = kind
    return kind


def _classify(x) -> ArrayKind | None:
    if _NUMPY.owns(x):
        return _NUMPY
    top = type(x).__module__.partition(".")[0]
    for name, cls in _adapter_classes().items():
        if top in _modules(name, cls):
            try:
                kind = kind_named(name)
            except ValueError:
                continue
            if kind.owns(x):
                return kind
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return DLPACK
    return None


def refused_subclass(x) -> str | None:
    """Why an array of a NumPy subclass whose product means something else is refused, or None:
    ``numpy.matrix`` (its ``*`` is the product, results stay 2-D) and masked arrays (polymm would
    compute with the masked values, the mask dropped)."""
    if isinstance(x, np.matrix):
        return "a numpy.matrix (its products keep matrix rules); convert it with numpy.asarray(x)"
    if isinstance(x, np.ma.MaskedArray):
        return "a numpy masked array, whose mask polymm would ignore; fill it first (x.filled(0)) or use numpy.ma.dot"
    return None


def unowned_reason(x) -> str:
    """Why no adapter took ``x`` (an adapter for its module that failed), or ''."""
    top = type(x).__module__.partition(".")[0]
    reasons = [f"{n}: {why}" for n, why in _failed.items() if top in _modules(n, (_classes or {}).get(n))]
    return "; ".join(reasons)


def kind_for_dlpack_device(device_type: int) -> ArrayKind:
    """The adapter that views DLPack capsules of ``device_type`` (1 CPU, 2 CUDA, ...)."""
    if device_type in _NUMPY.dlpack_devices:
        return _NUMPY
    for name, cls in _adapter_classes().items():
        if device_type in getattr(cls, "dlpack_devices", ()):
            return kind_named(name)
    raise TypeError(
        f"polymm.matmul: arrays on DLPack device type {device_type} are not supported "
        "(no installed array adapter takes them)"
    )


def as_operand(x):
    """The whole of a 3-D array of a device library as an :class:`~polymm.backend.Operand`
    (for tests and benchmarks that call a backend's ``matmul`` directly)."""
    if isinstance(x, Operand):
        return x
    kind = kind_of(x)
    if kind is None or kind is DLPACK:
        raise TypeError(f"polymm: no array adapter owns {type(x).__module__}.{type(x).__qualname__}")
    return kind.operand(x, tuple(x.shape), kind.elem_strides(x))


def is_dask_array(x) -> bool:
    """Whether ``x`` is a ``dask.array.Array``, told without importing Dask (only a caller that has it can pass one)."""
    return (
        type(x).__module__.startswith("dask.")
        and "dask.array" in sys.modules
        and isinstance(x, sys.modules["dask.array"].Array)
    )
