"""polymm's OpenCL backend: the shared polymm kernels through PyOpenCL.

Runs on any OpenCL device: PoCL on a CPU (``pocl-binary-distribution``),
NVIDIA/AMD/Intel GPUs.  Device choice, in order:

* the queue of a ``pyopencl.array.Array`` operand (its context and queue);
* :func:`set_queue` / the :func:`using_queue` context manager;
* ``POLYMM_OPENCL_DEVICE``: ``"P:D"`` platform and device indices, ``"P"``, or
  a case-insensitive substring of the device or platform name;
* otherwise the first GPU, else the first device of any kind.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import threading

import numpy as np

from polymm.backend import CONTRACT_DTYPES, Backend, BackendUnavailable
from polymm.kernels import (
    KernelParams, fast_path, kernel_name, launch_geometry, local_mem_bytes, render,
)

from . import params as _params

__all__ = ["OpenCLBackend", "KernelBuildError", "set_queue", "using_queue", "default_queue",
           "list_devices"]

_FP64_DTYPES = (np.dtype("float64"), np.dtype("complex128"))


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; the message carries the compiler log."""


_queue_var: contextvars.ContextVar = contextvars.ContextVar("polymm_opencl_queue", default=None)
_default_queue = None
_default_lock = threading.Lock()


def set_queue(queue) -> None:
    """Use ``queue`` (a ``pyopencl.CommandQueue``) for NumPy operands from now on (this context)."""
    _queue_var.set(queue)


@contextlib.contextmanager
def using_queue(queue):
    """``with using_queue(q): polymm.matmul(...)`` computes NumPy operands on ``q``'s device."""
    token = _queue_var.set(queue)
    try:
        yield queue
    finally:
        _queue_var.reset(token)


def _all_devices():
    import pyopencl as cl

    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    found = []
    for p_index, platform in enumerate(platforms):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d_index, device in enumerate(devices):
            found.append((p_index, d_index, platform, device))
    return found


def _pick_device():
    import pyopencl as cl

    found = _all_devices()
    if not found:
        raise BackendUnavailable("no OpenCL platform with a device was found "
                                 "(install pocl-binary-distribution for a CPU device)")
    wanted = os.environ.get("POLYMM_OPENCL_DEVICE", "").strip()
    if wanted:
        parts = wanted.split(":")
        if all(p.strip().isdigit() for p in parts) and len(parts) <= 2:
            p_index = int(parts[0])
            d_index = int(parts[1]) if len(parts) == 2 else 0
            for p, d, _, device in found:
                if (p, d) == (p_index, d_index):
                    return device
        else:
            for _, _, platform, device in found:
                if wanted.lower() in device.name.lower() or wanted.lower() in platform.name.lower():
                    return device
        raise BackendUnavailable(
            f"POLYMM_OPENCL_DEVICE={wanted!r} matches no OpenCL device; have: "
            + "; ".join(f"{p}:{d} {dev.name.strip()} ({pl.name.strip()})" for p, d, pl, dev in found))
    for _, _, _, device in found:
        if device.type & cl.device_type.GPU:
            return device
    return found[0][3]


def default_queue():
    """The queue used for NumPy operands: set by :func:`set_queue`, else the chosen default device."""
    global _default_queue
    queue = _queue_var.get()
    if queue is not None:
        return queue
    with _default_lock:
        if _default_queue is None:
            import pyopencl as cl

            device = _pick_device()
            context = cl.Context([device])
            _default_queue = cl.CommandQueue(context, device)
        return _default_queue


def _has_fp64(device) -> bool:
    return "cl_khr_fp64" in device.extensions or device.double_fp_config != 0


def describe_device(platform, device, p_index=None, d_index=None) -> str:
    """One line with what matters for polymm: type, local memory, work-group size, fp64."""
    import pyopencl as cl

    where = f"{p_index}:{d_index} " if p_index is not None else ""
    kinds = [name for name, bit in (("GPU", cl.device_type.GPU), ("CPU", cl.device_type.CPU),
                                    ("accelerator", cl.device_type.ACCELERATOR)) if device.type & bit]
    return (f"{where}{device.name.strip()} [{'/'.join(kinds) or 'other'}] on "
            f"{platform.name.strip()}: {device.max_compute_units} compute units, "
            f"local memory {device.local_mem_size // 1024} KiB, "
            f"max work-group {device.max_work_group_size}, "
            f"fp64 {'yes' if _has_fp64(device) else 'no'}, fp16 via vload_half"
            f"{' and cl_khr_fp16' if 'cl_khr_fp16' in device.extensions else ''}")


def list_devices() -> list[str]:
    """Every OpenCL platform/device, described by :func:`describe_device`."""
    return [describe_device(pl, dev, p, d) for p, d, pl, dev in _all_devices()]


def _upload(queue, x: np.ndarray):
    """Upload ``x`` keeping its strides (0 and negative too) when that costs little.

    The smallest memory span covering ``x`` is copied and viewed with ``x``'s own
    strides, so a broadcast batch is not materialised; sparse or oddly
    aligned views are made contiguous first.
    """
    import pyopencl.array as cl_array

    size = x.dtype.itemsize
    if x.size == 0 or x.flags.c_contiguous:
        return cl_array.to_device(queue, np.ascontiguousarray(x))
    strides_ok = all(s % size == 0 for s in x.strides)
    low = high = 0
    for n, s in zip(x.shape, x.strides):
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    span = high - low + size
    if not strides_ok or span > 2 * x.nbytes or not x.flags.aligned:
        return cl_array.to_device(queue, np.ascontiguousarray(x))
    start = x.__array_interface__["data"][0]
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(start + low))
    buffer = cl_array.to_device(queue, raw.copy())
    return cl_array.Array(queue, x.shape, x.dtype, strides=x.strides, data=buffer.data, offset=-low)


class OpenCLBackend(Backend):
    """The ``opencl`` polymm backend (entry point ``polymm.backends``)."""

    name = "opencl"
    array_library = "pyopencl"
    algorithms = ("naive", "tiled", "tiled-dynamic", "auto")

    def __init__(self):
        try:
            import pyopencl  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise BackendUnavailable(f"pyopencl is not importable: {exc}") from exc
        if not _all_devices():
            raise BackendUnavailable("no OpenCL platform with a device was found "
                                     "(install pocl-binary-distribution for a CPU device)")
        _pick_device()  # an unmatched POLYMM_OPENCL_DEVICE makes the backend unavailable
        self._kernels: dict = {}
        self._lock = threading.Lock()

    # ---- what the core asks -------------------------------------------------------------
    def devices(self) -> list[str]:
        return list_devices()

    def dtypes(self):
        return CONTRACT_DTYPES

    def _queue_for(self, operand):
        queue = getattr(operand, "queue", None)
        return queue if queue is not None else default_queue()

    def check_dtype(self, dtype, operand) -> None:
        dtype = np.dtype(dtype)
        if dtype not in CONTRACT_DTYPES:
            raise TypeError(f"backend 'opencl' does not support dtype {dtype}")
        if dtype in _FP64_DTYPES:
            device = self._queue_for(operand).device
            if not _has_fp64(device):
                raise TypeError(f"OpenCL device {device.name.strip()!r} has no fp64 support "
                                f"(cl_khr_fp64), so it cannot compute {dtype}")

    def from_numpy(self, x):
        return _upload(default_queue(), np.asarray(x))

    def to_numpy(self, x):
        return x.get()

    # ---- kernels ------------------------------------------------------------------------
    def _kernel(self, queue, kernel, dtype, params, vec_a=False, vec_b=False):
        """The built ``cl.Kernel``; programs are built once per (context, device, variant)."""
        import pyopencl as cl

        key = (queue.context.int_ptr, queue.device.int_ptr, kernel, dtype.str, params, vec_a, vec_b)
        found = self._kernels.get(key)
        if found is not None:
            return found
        source = render("opencl", kernel, dtype, params, vec_a=vec_a, vec_b=vec_b)
        options = []
        if params is not None and params.maxrreg and "nvidia" in queue.device.vendor.lower():
            options.append(f"-cl-nv-maxrregcount={params.maxrreg}")
        try:
            program = cl.Program(queue.context, source).build(options=options, devices=[queue.device])
        except cl.RuntimeError as exc:  # build failure: PyOpenCL's message holds the log
            raise KernelBuildError(
                f"polymm: building the OpenCL {kernel} kernel for {dtype} on "
                f"{queue.device.name.strip()} failed ({params}):\n{exc}") from exc
        try:
            built = cl.Kernel(program, kernel_name(kernel))
        except cl.Error as exc:  # e.g. PoCL silently dropping a kernel it cannot lower
            log = program.get_build_info(queue.device, cl.program_build_info.LOG)
            raise KernelBuildError(
                f"polymm: the OpenCL {kernel} kernel for {dtype} is missing from the program built on "
                f"{queue.device.name.strip()} ({params}): {exc}\ncompiler log:\n{log}") from exc
        self._kernels[key] = built
        return built

    def choose(self, device, algorithm, dtype, M, N, K):
        """``(kernel, params)`` for an algorithm name on ``device``."""
        if algorithm == "naive":
            return "naive", None
        if algorithm in ("tiled", "tiled-dynamic"):
            return algorithm, _params.tiled_params(device, dtype)
        return _params.auto_choice(device, dtype, M, N, K)

    def matmul(self, a, b, out, algorithm: str) -> None:
        batch, M, K = a.shape
        kernel, params = self.choose(out.queue.device, algorithm, np.dtype(out.dtype), M, b.shape[2], K)
        self.launch(a, b, out, kernel, params)

    def launch(self, a, b, out, kernel: str, params: KernelParams | None):
        """Enqueue ``kernel`` with ``params`` on ``out``'s queue; returns the event.

        ``a``, ``b``, ``out`` as in :meth:`matmul`.  The regblock fast paths are
        used exactly when :func:`polymm.kernels.fast_path` allows them.
        """
        import pyopencl as cl

        queue = out.queue
        dtype = np.dtype(out.dtype)
        batch, M, K = a.shape
        N = b.shape[2]
        size = dtype.itemsize
        a_off, b_off, c_off = a.offset // size, b.offset // size, out.offset // size
        a_strides = tuple(s // size for s in a.strides)
        b_strides = tuple(s // size for s in b.strides)
        flags = {}
        if kernel == "regblock":
            flags = fast_path("opencl", dtype, params, M, N, K, batch, a_off, a_strides, b_off, b_strides)
        built = self._kernel(queue, kernel, dtype, params, **flags)
        global_size, local_size = launch_geometry(kernel, params, M, N, batch)
        args = [np.int32(M), np.int32(N), np.int32(K),
                a.base_data, np.int64(a_off), *(np.int64(s) for s in a_strides),
                b.base_data, np.int64(b_off), *(np.int64(s) for s in b_strides),
                out.base_data, np.int64(c_off)]
        if kernel == "tiled-dynamic":
            args.append(cl.LocalMemory(local_mem_bytes(kernel, dtype, params)))
        wait_for = list(a.events) + list(b.events) + list(out.events)
        with self._lock:  # a cl.Kernel's arguments are shared state
            built.set_args(*args)
            event = cl.enqueue_nd_range_kernel(queue, built, global_size, local_size,
                                               wait_for=wait_for or None)
        out.add_event(event)
        self.last_event = event
        self.last_choice = (kernel, params, flags)
        return event


__all__ += ["KernelParams"]
