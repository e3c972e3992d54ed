"""The ``opencl`` backend itself: what the core asks of it, and each product's way through it.

A product looks up its plan (:mod:`polymm_opencl.plans`) by queue, dtype, algorithm, shapes,
strides and offsets, and runs it; devices, queues and programs are the other modules' business.
"""

from __future__ import annotations

import numpy as np

from polymm.arrays import as_operand
from polymm.backend import CONTRACT_DTYPES, Backend, BackendUnavailable, Operand, optional_dtypes, plan_cache_size
from polymm.kernels import KernelParams, planner
from polymm.kernels.params import DeviceInfo

from . import drivercache
from . import image as _image
from .arrays import DRIVER_LOCK, _to_host, host_result, lent_out, lent_result, upload
from .devices import _all_devices, _pick_device, device_info, list_devices
from .plans import make_plan, plan_or_fallback, run
from .programs import ProgramCache
from .queues import _QueueFacts, default_queue

__all__ = ["OpenCLBackend"]

_FP64_DTYPES = frozenset((np.dtype("float64"), np.dtype("complex128")))
_CONTRACT_SET = frozenset(CONTRACT_DTYPES)

#: Plans kept per backend; when full the cache starts again (shapes in a program are few).
_PLAN_CACHE_SIZE = plan_cache_size(1024)  # POLYMM_PLAN_CACHE overrides


class OpenCLBackend(Backend):
    """The ``opencl`` polymm backend (entry point ``polymm.backends``).

    A call looks up a *plan* by (queue, dtype, algorithm, shapes, strides,
    offsets): the launches the shared planner (:mod:`polymm.kernels.planner`)
    made, each a ``cl.Kernel`` with its scalar arguments already set.  So a repeated
    product costs a dictionary look-up, three buffer arguments and an
    enqueue per launch; no device queries, no event lists on an in-order
    queue whose operands live on it.
    """

    name = "opencl"
    array_library = "pyopencl"
    default_for = ("pyopencl",)
    algorithms = ("naive", "image", "tiled", "tiled-dynamic", "auto")

    def __init__(self):
        try:
            import pyopencl  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise BackendUnavailable(f"pyopencl is not importable: {exc} (pip install pyopencl)") from exc
        for _, _, platform, _ in _all_devices():  # before any build: PoCL aborts the process on them
            drivercache.check_once(platform.name)
        _pick_device()  # no device, or an unmatched POLYMM_OPENCL_DEVICE: the backend is unavailable
        self._programs = ProgramCache()
        self._facts: dict = {}
        self._plans: dict = {}
        # One thread at a time plans, uploads and enqueues (Dask runs tasks on threads): a cl.Kernel's
        # arguments and the scratch MemoryPool are shared state, and the NVIDIA driver crashed
        # (SIGSEGV) under concurrent downloads, uploads, kernel creation and enqueues. The lock is
        # the array adapter's too (its allocations, casts and copies).
        self._lock = DRIVER_LOCK
        self._warned: set = set()  # (device, kernel variant) that failed to build, warned about once
        self.last_event = None
        self.last_choice = None

    # ---- what the core asks -------------------------------------------------------------
    def devices(self) -> list[str]:
        return list_devices()

    def dtypes(self):
        return CONTRACT_DTYPES + optional_dtypes()

    def algorithm_dtypes(self) -> dict:
        """Algorithms that serve fewer dtypes than :meth:`dtypes`: ``image``, the texel formats of
        the default device (none on a device without image support)."""
        queue = default_queue()
        return {"image": _image.served_dtypes(queue.context, queue.device)}

    def _facts_for(self, queue) -> _QueueFacts:
        facts = self._facts.get(queue)
        if facts is None:
            facts = self._facts[queue] = _QueueFacts(queue)
        return facts

    def _queue_for(self, operand):
        queue = getattr(operand, "queue", None)
        return queue if queue is not None else default_queue()

    def check_dtype(self, dtype, operand) -> None:
        if dtype not in _CONTRACT_SET and dtype not in optional_dtypes():
            raise TypeError(f"backend 'opencl' does not support dtype {dtype}")
        if dtype in _FP64_DTYPES:
            facts = self._facts_for(self._queue_for(operand))
            if not facts.fp64:
                raise TypeError(
                    f"OpenCL device {facts.name!r} has no fp64 support (cl_khr_fp64), so it cannot compute {dtype}"
                )

    def from_numpy(self, x, lend: bool = False):
        x = np.asarray(x)
        if not x.dtype.isnative:  # kernels read the device's own byte order
            x = x.astype(x.dtype.newbyteorder("="))
        with self._lock:
            return upload(default_queue(), x, lend=lend)

    def lend_numpy(self, x):
        """On a device that computes in host memory (PoCL), the device reads ``x`` where it lies."""
        return self.from_numpy(x, lend=True)

    def lend_result(self, shape, dtype, like):
        """On a device that computes in host memory, a large result is written straight into the
        NumPy array returned: copying a 64 MiB result back cost a third of a 4096 x 4096 x 32
        product's call on PoCL."""
        with self._lock:
            return lent_result(like.queue, shape, dtype)

    def lend_out(self, out, like):
        """On a device that computes in host memory, a large result is written straight into the
        caller's ``out=`` array (:meth:`lend_result`'s reason: no copy back)."""
        with self._lock:
            return lent_out(like.queue, out)

    def to_numpy(self, x):
        """``x`` in host memory; PyOpenCL's ``get()`` reads only contiguous arrays, so views are read by their span."""
        with self._lock:
            if getattr(x, "polymm_result", None) is not None:
                return host_result(x)
            return x.get() if x.flags.c_contiguous else _to_host(x)

    def synchronize(self) -> None:
        if self.last_event is not None:
            self.last_event.wait()

    def planner_device(self, operand) -> DeviceInfo:
        """The planner's description of the device ``operand`` (an array) is computed on."""
        return self._facts_for(self._queue_for(operand)).info

    def choose(self, device, algorithm, dtype, M, N, K, batch=1, a_strides=None, b_strides=None):
        """The planner's :class:`~polymm.kernels.planner.Choice` for ``algorithm`` on an OpenCL ``device``."""
        return planner.choose(device_info(device), algorithm, dtype, M, N, K, batch, a_strides, b_strides)

    def matmul(self, a, b, out, algorithm: str) -> None:
        """``a``, ``b``, ``out``: :class:`polymm.Operand` (arrays, from tests and benchmarks, are made operands)."""
        if type(out) is not Operand:
            a, b, out = as_operand(a), as_operand(b), as_operand(out)
        with self._lock:
            self._matmul(a, b, out, algorithm)

    def _matmul(self, a, b, out, algorithm: str) -> None:
        queue = out.array.queue
        facts = self._facts.get(queue) or self._facts_for(queue)
        if algorithm == "image":
            self.last_event = _image.matmul(self._programs, facts, a, b, out)
            return
        key = (queue, out.dtype, algorithm, a.shape, b.shape, a.strides, b.strides, a.offset, b.offset, out.offset)
        plan = self._plans.get(key)
        if plan is None:
            plan = plan_or_fallback(self._programs, self._warned, facts, a, b, out, algorithm)
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = plan
        self.last_event = run(facts, plan, a, b, out)
        self.last_choice, self.last_plan = plan.last_choice, plan.choice

    def explain(self, a, b, out, algorithm: str) -> dict:
        """The plan a call would run, with what the compiler reports per launch (for
        :func:`polymm.tools.explain.explain`; OpenCL reports local and private memory, not registers)."""
        import pyopencl as cl

        a, b, out = as_operand(a), as_operand(b), as_operand(out)
        facts = self._facts_for(out.array.queue)
        plan = make_plan(self._programs, facts, a, b, out, algorithm, None)
        info = cl.kernel_work_group_info
        compiled = [
            {
                "local_mem": step.kernel.get_work_group_info(info.LOCAL_MEM_SIZE, facts.device),
                "private_mem": step.kernel.get_work_group_info(info.PRIVATE_MEM_SIZE, facts.device),
                "registers": None,
            }
            for step in plan.steps
        ]
        return {"device": facts.info, "plan": plan.plan, "compiled": compiled}

    def launch(self, a, b, out, kernel: str, params: KernelParams | None):
        """Enqueue ``kernel`` with ``params`` on ``out``'s queue; returns the event.

        ``a``, ``b``, ``out`` as in :meth:`matmul`, or 3-D PyOpenCL arrays.  The vector fast paths are
        used exactly when :func:`polymm.kernels.fast_path` allows them.
        """
        a, b, out = as_operand(a), as_operand(b), as_operand(out)
        with self._lock:
            facts = self._facts_for(out.array.queue)
            plan = make_plan(self._programs, facts, a, b, out, None, planner.Choice(kernel, params, "explicit"))
            event = self.last_event = run(facts, plan, a, b, out)
            self.last_choice, self.last_plan = plan.last_choice, plan.choice
            return event
