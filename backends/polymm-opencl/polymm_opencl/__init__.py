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
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import os
import threading
import warnings

import numpy as np

from polymm.arrays import as_operand
from polymm.backend import CONTRACT_DTYPES, Backend, BackendUnavailable, Operand, optional_dtypes, plan_cache_size
from polymm.kernels import KernelParams, abi, kernel_name, planner, render
from polymm.kernels.params import DeviceInfo, tiled_params

from . import drivercache
from .arrays import DRIVER_LOCK, byte_span
from . import image as _image

__all__ = [
    "OpenCLBackend",
    "KernelBuildError",
    "set_queue",
    "using_queue",
    "default_queue",
    "list_devices",
    "device_info",
]

_FP64_DTYPES = frozenset((np.dtype("float64"), np.dtype("complex128")))
_CONTRACT_SET = frozenset(CONTRACT_DTYPES)


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; the message carries the compiler log.

    ``variant`` names what failed (kernel, dtype, parameters), ``device`` where."""

    def __init__(self, message, variant="", device=""):
        super().__init__(message)
        self.variant, self.device = variant, device


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


_build_failures: dict = {}  # device.int_ptr -> None (it builds) or the first line of its build log


def _build_failure(device) -> str | None:
    """None when ``device`` builds a one-line program, else why not (cached per device).

    A driver can list a device and still build nothing: PoCL 3.0's LLVM 14 names a CPU it does
    not know (AMD family 0x1A, Zen 5) ``generic`` and then rejects that name, so every program
    fails with "unknown target CPU 'generic'". Such a device is not offered for computing."""
    import pyopencl as cl

    key = device.int_ptr
    if key not in _build_failures:
        try:
            context = cl.Context([device])
            with warnings.catch_warnings():  # a driver's chatter on success (Intel's) is not news
                warnings.simplefilter("ignore", cl.CompilerWarning)
                cl.Program(context, "__kernel void polymm_probe(__global int *x) { x[0] = 1; }").build(devices=[device])
            _build_failures[key] = None
        except cl.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if "error" in line.lower()]
            _build_failures[key] = lines[-1] if lines else str(exc).strip().splitlines()[0]
    return _build_failures[key]


def _unbuildable(device, platform) -> str:
    why = f"{device.name.strip()} ({platform.name.strip()}) cannot build OpenCL programs: {_build_failure(device)}"
    if "portable computing language" in platform.name.lower() and "target cpu" in why.lower():
        why += " (this PoCL's LLVM does not know the host CPU; a newer PoCL does)"
    return why


def _pick_device():
    import pyopencl as cl

    found = _all_devices()
    if not found:
        raise BackendUnavailable(
            "no OpenCL platform with a device was found (install pocl-binary-distribution for a CPU device)"
        )
    wanted = os.environ.get("POLYMM_OPENCL_DEVICE", "").strip()
    if wanted:
        parts = wanted.split(":")
        if all(p.strip().isdigit() for p in parts) and len(parts) <= 2:
            p_index = int(parts[0])
            d_index = int(parts[1]) if len(parts) == 2 else 0
            chosen = [(pl, dev) for p, d, pl, dev in found if (p, d) == (p_index, d_index)]
        else:
            named = wanted.lower()
            chosen = [(pl, dev) for _, _, pl, dev in found if named in dev.name.lower() or named in pl.name.lower()]
        if not chosen:
            raise BackendUnavailable(
                f"POLYMM_OPENCL_DEVICE={wanted!r} matches no OpenCL device; have: "
                + "; ".join(f"{p}:{d} {dev.name.strip()} ({pl.name.strip()})" for p, d, pl, dev in found)
            )
        platform, device = chosen[0]
        if _build_failure(device) is not None:
            raise BackendUnavailable(f"POLYMM_OPENCL_DEVICE={wanted!r}: " + _unbuildable(device, platform))
        return device
    # the first GPU, else the first device, of those that build programs
    ranked = sorted(found, key=lambda f: not f[3].type & cl.device_type.GPU)
    for _, _, _, device in ranked:
        if _build_failure(device) is None:
            return device
    raise BackendUnavailable(
        "no OpenCL device builds programs: " + "; ".join(_unbuildable(d, p) for _, _, p, d in found)
    )


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


def _has_fp64(device) -> bool:
    return "cl_khr_fp64" in device.extensions or device.double_fp_config != 0


def describe_device(platform, device, p_index=None, d_index=None) -> str:
    """One line with what matters for polymm: type, local memory, work-group size, fp64."""
    import pyopencl as cl

    where = f"{p_index}:{d_index} " if p_index is not None else ""
    kinds = [
        name
        for name, bit in (
            ("GPU", cl.device_type.GPU),
            ("CPU", cl.device_type.CPU),
            ("accelerator", cl.device_type.ACCELERATOR),
        )
        if device.type & bit
    ]
    return (
        f"{where}{device.name.strip()} [{'/'.join(kinds) or 'other'}] on "
        f"{platform.name.strip()}: {device.max_compute_units} compute units, "
        f"local memory {device.local_mem_size // 1024} KiB, "
        f"max work-group {device.max_work_group_size}, "
        f"fp64 {'yes' if _has_fp64(device) else 'no'}, fp16 via vload_half"
        f"{' and cl_khr_fp16' if 'cl_khr_fp16' in device.extensions else ''}"
    )


def list_devices() -> list[str]:
    """Every OpenCL platform/device, described by :func:`describe_device`."""
    return [describe_device(pl, dev, p, d) for p, d, pl, dev in _all_devices()]


def device_info(device) -> DeviceInfo:
    """What the shared planner (:mod:`polymm.kernels.planner`) needs to know about ``device``."""
    import pyopencl as cl

    platform = device.platform.name.strip()
    nvidia = "nvidia" in device.vendor.lower()
    as_gpu = os.environ.get("POLYMM_OPENCL_PLAN_AS", "").strip().lower() == "gpu"
    return DeviceInfo(
        name=device.name.strip(),
        vendor=device.vendor.strip(),
        kind="cpu" if device.type & cl.device_type.CPU and not as_gpu else "gpu",
        dialect="opencl",
        compute_units=device.max_compute_units,
        max_work_group=device.max_work_group_size,
        local_mem=device.local_mem_size,
        key=f"{platform}|{device.name.strip()}|{device.driver_version}",
        platform=platform,
        # NVIDIA's OpenCL runs on the CUDA hardware: the same per-SM limits.
        threads_per_cu=2048 if nvidia else 0,
        blocks_per_cu=32 if nvidia else 0,
        local_mem_per_cu=device.local_mem_size if nvidia else 0,
        registers_per_cu=65536 if nvidia else 0,
    )


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
    low, high = byte_span(x.shape, x.strides)
    span = high - low + size
    if not strides_ok or span > 2 * x.nbytes or not x.flags.aligned:
        return cl_array.to_device(queue, np.ascontiguousarray(x))
    start = x.__array_interface__["data"][0]
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(start + low))
    buffer = cl_array.to_device(queue, raw.copy())
    return cl_array.Array(queue, x.shape, x.dtype, strides=x.strides, data=buffer.data, offset=-low)


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


class _Step:
    """One kernel launch of a plan: a ``cl.Kernel`` of its own whose scalar
    arguments were set when the plan was made; per call only the buffers
    (``slots``: (argument index, 0 = A / 1 = B / 2 = C / 3+ = scratch)) change."""

    __slots__ = ("kernel", "slots", "global_size", "local_size")

    def __init__(self, kernel, slots, global_size, local_size):
        self.kernel, self.slots = kernel, slots
        self.global_size, self.local_size = global_size, local_size


class _Plan:
    __slots__ = ("steps", "scratch", "choice", "last_choice", "plan")

    def __init__(self, steps, plan):
        self.steps, self.scratch, self.choice, self.plan = steps, plan.scratch, plan.choice, plan
        product = plan.product
        self.last_choice = (product.kernel, product.params, product.flags)


#: Appended to a source whose first build failed: a new key for the driver's on-disk cache.
#: (A comment would not do: drivers key compiled code by the program's IR, not its text.)
_REBUILT = "\n__constant int polymm_rebuilt_after_a_failed_build = 1;\n"
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
            raise BackendUnavailable(f"pyopencl is not importable: {exc}") from exc
        if not _all_devices():
            raise BackendUnavailable(
                "no OpenCL platform with a device was found (install pocl-binary-distribution for a CPU device)"
            )
        for _, _, platform, _ in _all_devices():  # before any build: PoCL aborts the process on them
            drivercache.check_once(platform.name)
        _pick_device()  # an unmatched POLYMM_OPENCL_DEVICE makes the backend unavailable
        self._programs: dict = {}
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

    def from_numpy(self, x):
        x = np.asarray(x)
        if not x.dtype.isnative:  # kernels read the device's own byte order
            x = x.astype(x.dtype.newbyteorder("="))
        with self._lock:
            return _upload(default_queue(), x)

    def to_numpy(self, x):
        with self._lock:
            return x.get()

    def synchronize(self) -> None:
        if self.last_event is not None:
            self.last_event.wait()

    # ---- kernels ------------------------------------------------------------------------
    def _program(self, facts, kernel, dtype, params, **flags):
        """The built program; built once per (context, device, variant); ``flags``: the
        vector paths :func:`polymm.kernels.fast_path` allows."""
        key = (facts.program_key, kernel, dtype.str, params, tuple(sorted(flags.items())))
        found = self._programs.get(key)
        if found is not None:
            if isinstance(found, KernelBuildError):  # failed before: not built again
                raise found
            return found
        try:
            program = self._build(facts, kernel, dtype, params, flags)
        except KernelBuildError as exc:
            exc.variant = f"{kernel} {dtype} {params}" + (" (vector loads)" if any(flags.values()) else "")
            exc.device = facts.name
            self._programs[key] = exc.with_traceback(None)  # keeps no frames (nor programs) alive
            raise
        self._programs[key] = program
        return program

    def _build(self, facts, kernel, dtype, params, flags):
        """Build the variant; a failure is tried once more under a new driver-cache key.

        Drivers keep compiled programs on disk (PoCL's kernel cache, NVIDIA's
        ComputeCache), keyed by the source: a corrupted entry hands back a broken
        program every time.  A marker constant makes the program a new key, so the
        second build compiles afresh (and is cached).  If that one fails too, the
        source itself does not build here, and the error stands."""
        source = render("opencl", kernel, dtype, params, **flags)
        try:
            return self._build_source(facts, source, kernel, dtype, params)
        except KernelBuildError as exc:
            first = str(exc).splitlines()[0]
        program = self._build_source(facts, source + _REBUILT, kernel, dtype, params)
        warnings.warn(
            f"polymm opencl: the driver's build of the {kernel} kernel for {dtype} on {facts.name} "
            f"was unusable, probably a corrupted cache entry ({first}); built again afresh",
            RuntimeWarning,
            stacklevel=5,
        )
        return program

    def _build_source(self, facts, source, kernel, dtype, params):
        import pyopencl as cl

        queue = facts.queue
        options = []
        if params is not None and params.maxrreg and facts.nvidia:
            options.append(f"-cl-nv-maxrregcount={params.maxrreg}")
        try:
            program = cl.Program(queue.context, source).build(options=options, devices=[facts.device])
        except cl.RuntimeError as exc:  # build failure: PyOpenCL's message holds the log
            raise KernelBuildError(
                f"polymm: building the OpenCL {kernel} kernel for {dtype} on {facts.name} failed ({params}):\n{exc}"
            ) from exc
        try:
            cl.Kernel(program, kernel_name(kernel))
            return program
        except cl.Error as exc:  # e.g. PoCL silently dropping a kernel it cannot lower
            log = program.get_build_info(facts.device, cl.program_build_info.LOG)
            error = KernelBuildError(
                f"polymm: the OpenCL {kernel} kernel for {dtype} is missing from the program built on "
                f"{facts.name} ({params}): {exc}\ncompiler log:\n{log}"
            )
        # Released now, not at exit: PoCL aborts the process if a program it
        # could not lower is still alive when it shuts down.
        del program
        raise error

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
            self.last_event = _image.matmul(self, facts, a, b, out)
            return
        key = (queue, out.dtype, algorithm, a.shape, b.shape, a.strides, b.strides, a.offset, b.offset, out.offset)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan_or_fallback(facts, a, b, out, algorithm)
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = plan
        self._run(facts, plan, a, b, out)

    def _plan_or_fallback(self, facts, a, b, out, algorithm) -> _Plan:
        """The plan ``algorithm`` asks for; under ``"auto"``, a kernel variant this device
        fails to build gives way to ``tiled`` (else ``naive``), with one warning per variant."""
        try:
            return self._make_plan(facts, a, b, out, algorithm, None)
        except KernelBuildError as exc:
            if algorithm != "auto":
                raise
            failed = exc
        if (failed.device, failed.variant) not in self._warned:
            self._warned.add((failed.device, failed.variant))
            warnings.warn(
                f"polymm opencl: the {failed.variant} kernel does not build on {failed.device}; "
                f"'auto' uses a slower correct kernel instead ({str(failed).splitlines()[0]})",
                RuntimeWarning,
                stacklevel=3,
            )
        for kernel in ("tiled", "naive"):
            params = tiled_params(facts.info, out.dtype) if kernel == "tiled" else None
            try:
                return self._make_plan(facts, a, b, out, None, planner.Choice(kernel, params, "fallback"))
            except KernelBuildError:
                if kernel == "naive":
                    raise
        raise AssertionError("unreachable")

    def explain(self, a, b, out, algorithm: str) -> dict:
        """The plan a call would run, with what the compiler reports per launch (for
        :func:`polymm.tools.explain.explain`; OpenCL reports local and private memory, not registers)."""
        import pyopencl as cl

        a, b, out = as_operand(a), as_operand(b), as_operand(out)
        facts = self._facts_for(out.array.queue)
        plan = self._make_plan(facts, a, b, out, algorithm, None)
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
            plan = self._make_plan(facts, a, b, out, None, planner.Choice(kernel, params, "explicit"))
            return self._run(facts, plan, a, b, out)

    def _run(self, facts, plan, a, b, out):
        from pyopencl import enqueue_nd_range_kernel as enqueue

        queue = facts.queue
        buffers = [a.buffer, b.buffer, out.buffer]
        if plan.scratch:
            buffers += [facts.pool(nbytes) for nbytes in plan.scratch]
        a, b, out = a.array, b.array, out.array
        # On an in-order queue that holds all three arrays, order is implied.
        chain = not facts.in_order
        wait_for = None
        if chain or a.queue is not queue or b.queue is not queue:
            wait_for = (a.events + b.events + out.events) or None
        with self._lock:
            for step in plan.steps:
                kernel = step.kernel
                for index, slot in step.slots:
                    kernel.set_arg(index, buffers[slot])
                event = enqueue(queue, kernel, step.global_size, step.local_size, None, wait_for)
                if chain:
                    wait_for = [event]
        out.add_event(event)
        if chain and plan.scratch:
            event.wait()  # out-of-order queue: scratch goes back to the pool only when done
        self.last_event = event
        self.last_choice = plan.last_choice
        self.last_plan = plan.choice
        return event

    def _kernel_step(self, facts, kernel, dtype, params, flags, arg_types, args, slots, geometry) -> _Step:
        """A :class:`_Step` whose own ``cl.Kernel`` has ``args`` set (buffers left to each call)."""
        import pyopencl as cl

        program = self._program(facts, kernel, dtype, params, **flags)
        built = cl.Kernel(program, kernel_name(kernel))
        built.set_scalar_arg_dtypes(arg_types)
        built.set_args(*args)
        return _Step(built, slots, *geometry)

    def _make_plan(self, facts, a, b, out, algorithm, choice) -> _Plan:
        """The planner's launches as ``cl.Kernel`` objects with their scalar arguments set."""
        import pyopencl as cl

        dtype = out.dtype
        batch, M, K = a.shape
        N = b.shape[2]
        made = planner.plan(
            facts.info,
            dtype,
            (batch, M, N, K),
            (a.offset, a.strides),
            (b.offset, b.strides),
            out.offset,
            algorithm,
            choice,
        )
        steps = []
        for launch in made.launches:
            types, args = abi.scalar_types(launch.kernel), list(launch.args)
            if launch.dynamic_local:
                types, args = types + [None], args + [cl.LocalMemory(launch.dynamic_local)]
            geometry = (launch.global_size, launch.local_size)
            slots = sorted(launch.buffers.items())
            steps.append(
                self._kernel_step(
                    facts, launch.kernel, dtype, launch.params, launch.flags, types, args, slots, geometry
                )
            )
        return _Plan(steps, made)


__all__ += ["KernelParams"]
