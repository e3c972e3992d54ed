"""Plans: the shared planner's launches made into ``cl.Kernel`` objects, and their launch.

A plan is made once per call shape (the backend keeps it): each launch gets a ``cl.Kernel`` of its
own with its scalar arguments set, so running a plan again sets three buffers and enqueues. Under
``"auto"`` a kernel variant the device does not build gives way to a slower correct one.
"""

from __future__ import annotations

import warnings

from polymm.kernels import abi, kernel_name, planner
from polymm.kernels.params import tiled_params

from .arrays import DRIVER_LOCK
from .programs import KernelBuildError

__all__ = ["kernel_step", "make_plan", "plan_or_fallback", "run"]


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


def kernel_step(programs, facts, kernel, dtype, params, flags, arg_types, args, slots, geometry) -> _Step:
    """A :class:`_Step` whose own ``cl.Kernel`` has ``args`` set (buffers left to each call); its
    program from ``programs`` (a :class:`~polymm_opencl.programs.ProgramCache`)."""
    import pyopencl as cl

    program = programs.program(facts, kernel, dtype, params, **flags)
    built = cl.Kernel(program, kernel_name(kernel))
    built.set_scalar_arg_dtypes(arg_types)
    built.set_args(*args)
    return _Step(built, slots, *geometry)


def make_plan(programs, facts, a, b, out, algorithm, choice) -> _Plan:
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
            kernel_step(
                programs,
                facts,
                launch.kernel,
                launch.dtype if launch.dtype is not None else dtype,  # realify: a complex pack, real products
                launch.params,
                launch.flags,
                types,
                args,
                slots,
                geometry,
            )
        )
    return _Plan(steps, made)


def plan_or_fallback(programs, warned, facts, a, b, out, algorithm) -> _Plan:
    """The plan ``algorithm`` asks for; under ``"auto"``, a kernel variant this device
    fails to build gives way to ``tiled`` (else ``naive``), with one warning per variant
    (``warned``: the set of (device, variant) warned about)."""
    try:
        return make_plan(programs, facts, a, b, out, algorithm, None)
    except KernelBuildError as exc:
        if algorithm != "auto":
            raise
        failed = exc
    if (failed.device, failed.variant) not in warned:
        warned.add((failed.device, failed.variant))
        warnings.warn(
            f"polymm opencl: the {failed.variant} kernel does not build on {failed.device}; "
            f"'auto' uses a slower correct kernel instead ({str(failed).splitlines()[0]})",
            RuntimeWarning,
            stacklevel=3,
        )
    for kernel in ("tiled", "naive"):
        params = tiled_params(facts.info, out.dtype) if kernel == "tiled" else None
        try:
            return make_plan(programs, facts, a, b, out, None, planner.Choice(kernel, params, "fallback"))
        except KernelBuildError:
            if kernel == "naive":
                raise
    raise AssertionError("unreachable")


def run(facts, plan, a, b, out):
    """Enqueue ``plan``'s launches on ``facts.queue`` with the buffers of :class:`polymm.Operand` s
    ``a``, ``b``, ``out``; returns the last launch's event."""
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
    with DRIVER_LOCK:
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
    return event
