"""polymm's OpenCL backend: the shared polymm kernels through PyOpenCL.

Runs on any OpenCL device: PoCL on a CPU (``pocl-binary-distribution``),
NVIDIA/AMD/Intel GPUs.  Device choice, in order:

* the queue of a ``pyopencl.array.Array`` operand (its context and queue);
* :func:`set_queue` / the :func:`using_queue` context manager;
* ``POLYMM_OPENCL_DEVICE``: ``"P:D"`` platform and device indices, ``"P"``, or
  a case-insensitive substring of the device or platform name;
* otherwise the first GPU, else the first device of any kind.

``POLYMM_OPENCL_PLAN_AS=gpu`` plans for every device as for a GPU (the shared
planner's GPU paths, local-memory kernels): a CPU device such as PoCL then runs
the kernels a GPU would, which is how those paths are tested and fuzzed without one.

The modules, by role: :mod:`.devices` (which devices there are, which one computes, what
each is), :mod:`.queues` (the queue NumPy operands go to, what is known of a queue),
:mod:`.programs` (kernels built and kept), :mod:`.plans` (the planner's launches as
``cl.Kernel`` objects, and their launch), :mod:`.backend` (:class:`OpenCLBackend`, what the
core calls), :mod:`.image` (the ``image`` algorithm), :mod:`.arrays` (``pyopencl.array``
operands), :mod:`.drivercache` (PoCL's kernel cache checked before use).
"""

from __future__ import annotations

from polymm.kernels import KernelParams

from .backend import OpenCLBackend
from .devices import describe_device as describe_device, device_info, list_devices
from .programs import KernelBuildError
from .queues import default_queue, set_queue, using_queue

__all__ = [
    "OpenCLBackend",
    "KernelBuildError",
    "set_queue",
    "using_queue",
    "default_queue",
    "list_devices",
    "device_info",
    "KernelParams",
]
