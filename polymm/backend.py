"""What a backend is: the small interface every plugin implements.

The core (:mod:`polymm.dispatch`) does all of the array-API work -- dtype
promotion, 1-D rules, broadcasting, ``out=``, errors -- and hands a backend
nothing but plain batched 2-D products in the backend's own array type.  A
backend therefore only has to *compute*.

A plugin distribution exposes a factory (usually the backend class itself)
through the entry-point group ``polymm.backends``::

    [project.entry-points."polymm.backends"]
    mine = "my_package:MyBackend"

The factory is called with no arguments the first time the backend is needed.
If it raises (missing driver, no device, ...), the backend is listed by
:func:`polymm.backends` as unavailable with the exception's message as reason.

What :func:`polymm.backends` lists is read without making the backend: from an
optional entry point of the same name in the group ``polymm.backend_info`` (a
callable returning a dict of the class attributes below, for packages whose import
is heavy), else from the factory's attributes (an import, no instantiation).

Thread safety, the promise of :func:`polymm.matmul`: calls from many threads and
asyncio tasks at once give the same results as one at a time, and
:func:`polymm.use_backend` scopes are per thread and per task.  The core makes no
lock around a backend: a backend's ``matmul`` may be entered by several threads at
once and must protect its own shared state (caches of compiled kernels, a kernel
object's arguments, a non-thread-safe runtime).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Backend",
    "BackendUnavailable",
    "CONTRACT_DTYPES",
    "Operand",
    "SizeLimitError",
    "optional_dtypes",
    "is_bfloat16",
    "algorithm_serves",
    "plan_cache_size",
]

#: Every dtype the contract requires of a backend (array API numeric dtypes,
#: plus bool and float16).
CONTRACT_DTYPES = tuple(
    np.dtype(t)
    for t in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
)


def plan_cache_size(default: int) -> int:
    """How many launch plans a backend keeps (keyed by shapes and strides, so a process meeting
    ever new shapes would keep ever more): ``POLYMM_PLAN_CACHE`` where set, else ``default``.
    A full cache starts again: a plan costs microseconds to make, so the bound is the point."""
    text = os.environ.get("POLYMM_PLAN_CACHE", "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"POLYMM_PLAN_CACHE={text!r}: expected a positive whole number of plans")
    return int(text)


@functools.cache
def optional_dtypes() -> tuple[np.dtype, ...]:
    """Dtypes beyond the contract that backends may compute: ``bfloat16`` where ``ml_dtypes``
    (which gives NumPy that dtype) is installed; accumulated in float32 like float16.
    ``ml_dtypes`` is imported on the first call, never by ``import polymm``."""
    try:
        import ml_dtypes
    except ImportError:
        return ()
    return (np.dtype(ml_dtypes.bfloat16),)


def is_bfloat16(dtype) -> bool:
    """Is ``dtype`` NumPy's bfloat16 (ml_dtypes)?  Cheap: no import."""
    return getattr(dtype, "name", None) == "bfloat16" and dtype.itemsize == 2


def algorithm_serves(backend, algorithm: str, dtype) -> bool:
    """Does ``algorithm`` of ``backend`` serve ``dtype`` (:meth:`Backend.algorithm_dtypes`)?"""
    served = getattr(backend, "algorithm_dtypes", dict)().get(algorithm)
    return served is None or np.dtype(dtype) in served


class BackendUnavailable(RuntimeError):
    """Raised by a backend factory when it cannot run here; the message is the reason."""


class DeviceMemoryError(MemoryError):
    """A buffer the device cannot give: larger than the most it allocates at once, or more than
    it has free; the message names the device, the bytes asked for and the limit.  Backends raise
    it in place of their driver's own allocation errors."""


class SizeLimitError(ValueError):
    """A product too large for the algorithm asked for on this device (the ``image`` kernel's
    image size limits); the message names device, dtype and limit.  ``"auto"`` never raises it."""


@dataclass(slots=True)
class Operand:
    """One operand of a batched product, ready for a kernel: element ``[i, r, c]``
    is ``buffer[offset + i * strides[0] + r * strides[1] + c * strides[2]]``.

    The core makes these for every array library whose adapter is not a host one
    (CuPy, PyOpenCL, the libraries plugins bring), so a device backend passes
    ``buffer``, ``offset`` and ``strides`` to its kernels as they are and never
    decodes a view.  Strides may be 0 (a broadcast batch) or negative.
    """

    #: what the kernels take as the base address: a ``pyopencl.Buffer``, a CuPy
    #: array (its data pointer is the origin), or what the library's adapter gives
    buffer: object
    #: elements from the buffer's origin to element ``[0, 0, 0]``
    offset: int
    #: ``(batch, row, column)`` strides, in elements
    strides: tuple[int, int, int]
    #: ``(B, rows, columns)``
    shape: tuple[int, int, int]
    dtype: np.dtype
    #: the library's array the operand lies in (its queue, stream, device, events)
    array: object


class Backend:
    """Base class for polymm backends (subclassing is optional: the core duck-types).

    Attributes a backend provides:

    ``name``
        Its registry name (set by the registry from the entry-point name).
    ``algorithms``
        The kernel variants it offers.  ``"auto"`` is required: it is what
        :func:`polymm.matmul` asks for unless the caller names another, and the
        conformance suite fails a backend without it.
    ``array_library``
        The array library it computes on: ``"numpy"``, or the name of an
        adapter in the entry-point group ``polymm.arrays`` (``"cupy"`` and
        ``"pyopencl"`` come with polymm-cuda and polymm-opencl; a plugin may
        bring its own, see :class:`polymm.arrays.ArrayKind`).  Arrays of that
        library reach :meth:`matmul` as views (NumPy) or as :class:`Operand`;
        NumPy arrays given to a device backend go through :meth:`from_numpy`
        and :meth:`to_numpy`.
    ``precisions``
        The precision modes (:mod:`polymm.precision`) it *accelerates*, listed by
        :func:`polymm.backends`.  During :meth:`matmul`, ``polymm.precision.current()``
        names the mode asked for: the least precision the caller accepts for float32 and
        complex64 products.  A backend may ignore it and compute at full precision (always
        correct); one that uses it must stay within ``polymm.precision.error_bound``.
    ``default_for``
        Array libraries whose arrays this backend computes when the caller
        chose no backend (``("numpy",)`` for ``cpu``).  Empty by default: a
        backend is then used only when named.
    ``priority``
        Among available backends declaring one library in ``default_for``, the
        highest priority is the default (ties: the first name in sorted order).
    ``warmup(dtype, kinds=None)`` (optional method)
        A generator that makes the kernels for ``dtype`` (those named in ``kinds``, when given)
        ready before a first call needs them, yielding a short name per kernel
        (:func:`polymm.warmup`); without it, warmup runs a few products. A backend that compiles
        offers it to compile what its ``"auto"`` path may use.
    ``warmup_groups(dtype)`` (optional method)
        :meth:`warmup`'s names in groups that share compiled code, costliest first, for a backend
        whose compiles land in an on-disk cache that other processes read: ``polymm.warmup(...,
        jobs=N)`` then compiles the groups in N worker processes at once (Numba compiles one
        function at a time in a process), and the caller loads them.
    ``matmul_groups(a, b, out, algorithm)`` (optional method)
        ``out[g] = a[g] @ b[g]`` for every outer index ``g``: a host backend's broadcast batch
        whose operands walk different batch axes, so that no one batch stride reaches every
        product (``(64, 1, 32, 32) @ (1, 64, 32, 32)``). The operands are
        ``(G..., B, M, K)``-shaped views, one :meth:`matmul` problem per outer index, all laid out
        alike; a backend that plans and sizes its threads once for the whole of it offers this.
        Without it the core makes one :meth:`matmul` call per outer index.
    ``conformance_xfail``
        Known failures, declared: ``{test-name pattern: reason}``. The
        conformance suite marks matching tests ``xfail(strict=True)`` with the
        reason, so they stay visible and fail the run once they pass.
    """

    name: str = "?"
    algorithms: tuple[str, ...] = ("auto",)
    array_library: str = "numpy"
    precisions: tuple[str, ...] = ()
    default_for: tuple[str, ...] = ()
    priority: int = 0
    conformance_xfail: dict[str, str] = {}

    def dtypes(self) -> tuple[np.dtype, ...]:
        """Dtypes this backend computes (on at least one of its devices)."""
        return CONTRACT_DTYPES

    def algorithm_dtypes(self) -> dict[str, tuple[np.dtype, ...]]:
        """Algorithms that serve only some of :meth:`dtypes`, with the dtypes they serve (optional).

        The default: every algorithm serves every dtype.  An algorithm handed a dtype it does
        not serve raises ``TypeError`` naming the device and dtype (the conformance suite checks).
        """
        return {}

    def devices(self) -> list[str]:
        """Human-readable descriptions of the devices this backend can use."""
        return []

    def check_dtype(self, dtype: np.dtype, operand) -> None:
        """Raise ``TypeError`` naming the device if ``dtype`` cannot be computed for ``operand``.

        The default accepts everything in :meth:`dtypes`; device backends
        override it for per-device limits (float64 without ``cl_khr_fp64``).
        """
        if dtype not in self.dtypes():
            raise TypeError(f"backend {self.name!r} does not support dtype {dtype}")

    def from_numpy(self, x: np.ndarray):
        """Move a host array to this backend's array type (identity for host backends)."""
        return x

    def lend_numpy(self, x: np.ndarray):
        """``x`` as this backend's array type for the length of one call, which only reads it:
        it may share ``x``'s memory instead of copying it (a device that computes in host
        memory). ``polymm.matmul`` on NumPy operands calls this; the default is :meth:`from_numpy`."""
        return self.from_numpy(x)

    def lend_result(self, shape: tuple, dtype: np.dtype, like):
        """An array of this backend's type for the result of a call on NumPy operands (``like``:
        one, as :meth:`lend_numpy` gave it) whose :meth:`to_numpy` is the NumPy result itself,
        written in place (a device that computes in host memory); None, the default: the result
        is allocated as usual and copied back."""
        return None

    def lend_out(self, out: np.ndarray, like):
        """An array of this backend's type over the caller's ``out=`` NumPy array (C-contiguous,
        aligned, writeable, sharing no memory with the operands: the core checks), for a result
        written there in place; its :meth:`to_numpy` is ``out`` itself. None, the default: the
        result is computed elsewhere and copied into ``out``."""
        return None

    def to_numpy(self, x) -> np.ndarray:
        """Move a result of this backend's array type back to the host."""
        return x

    def synchronize(self) -> None:
        """Wait until work queued by :meth:`matmul` has finished (for timing; host backends return at once)."""

    def matmul(self, a, b, out, algorithm: str) -> None:
        """Compute ``out[i] = a[i] @ b[i]`` for every batch index ``i``.

        Guarantees from the core:

        * ``a`` is ``(B, M, K)``, ``b`` is ``(B, K, N)``, ``out`` is ``(B, M, N)``,
          all of one dtype from :meth:`dtypes`: NumPy views for a host backend
          (``array_library = "numpy"``), else :class:`Operand` of this
          backend's library (buffer, element offset, element strides);
        * ``B, M, N, K >= 1``;
        * ``a`` and ``b`` may have any strides, including 0 (broadcast batch)
          and negative ones; ``out`` is C-contiguous and shares no memory with
          ``a`` or ``b``;
        * ``algorithm`` is one of :attr:`algorithms`.

        It may be called from several threads at once (see the module's notes
        on thread safety).  A device backend enqueues on the queue or stream
        of ``out`` and does not wait for the result.

        Integer products wrap like NumPy's; bool is logical or-of-ands;
        float16 and bfloat16 (if offered, see :func:`optional_dtypes`) accumulate in
        float32; complex is not conjugated.
        """
        raise NotImplementedError

    def replayable(self, a, b, out, algorithm: str):
        """After :meth:`matmul` of these operands: ``launch(...)``, the same plan run again on
        other arrays laid out alike (called with what the array adapter's ``replay`` passes: the
        operands' and a new result's addresses, for CuPy's), or None: the default, every call
        goes through :meth:`matmul`.  For device backends whose planning costs more than a
        launch; the core keeps it under the adapter's ``call_key`` (``polymm.dispatch``)."""
        return None
