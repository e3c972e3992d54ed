"""The queue polymm computes NumPy operands on, and what the backend knows of a queue.

A ``pyopencl.array.Array`` operand brings its own queue; for NumPy operands the queue is the
one :func:`set_queue` / :func:`using_queue` set in this context, else one made once per process
on the default device (:func:`polymm_opencl.devices._pick_device`). A queue's device facts are
asked once (:class:`_QueueFacts`): each device query is a driver call.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

from .devices import _has_fp64, _pick_device, device_info

__all__ = ["set_queue", "using_queue", "default_queue"]

_queue_var: contextvars.ContextVar = contextvars.ContextVar("polymm_opencl_queue", default=None)
_default_queue = _default_context = None
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
            global _default_context  # held: Intel's CPU runtime frees a context its queue still uses
            _default_context = cl.Context([device])
            _default_queue = cl.CommandQueue(_default_context, device)
        return _default_queue


class _QueueFacts:
    """What the backend needs to know about a queue's device, asked once:
    device queries are driver calls (``queue.device``, ``.extensions`` cost
    microseconds each), far too slow for every product."""

    __slots__ = ("queue", "device", "info", "program_key", "fp64", "nvidia", "in_order", "pool", "name")

    def __init__(self, queue):
        import pyopencl as cl
        from pyopencl.tools import ImmediateAllocator, MemoryPool

        device = queue.device
        self.queue = queue
        self.device = device
        self.info = device_info(device)
        self.program_key = (queue.context.int_ptr, device.int_ptr)
        self.fp64 = _has_fp64(device)
        self.nvidia = "nvidia" in device.vendor.lower()
        self.in_order = not (queue.properties & cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE)
        self.pool = MemoryPool(ImmediateAllocator(queue))  # scratch: packed operands, split-K partials
        self.name = device.name.strip()
