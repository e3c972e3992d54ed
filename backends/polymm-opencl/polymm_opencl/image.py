"""The ``image`` algorithm on OpenCL: operands staged into 2-D images, then the
shared ``image`` kernel (:mod:`polymm.kernels`, ``image.c``) reads them through
the texture path.

Each operand becomes one image ``cols`` wide and ``(batches) x rows`` high
(a broadcast batch is one matrix high): rows already contiguous are copied
straight from the buffer, any other layout is packed first by the shared
``pack`` kernel.  Images are made per call: this is a teaching kernel, kept
simple.
"""

from __future__ import annotations

import numpy as np

from polymm.kernels import IMAGE_DTYPES, abi, check_image_size, image_format, launch_geometry, pack_params

from .plans import kernel_step

_I32, _I64 = np.int32, np.int64
_IMAGE_ARG_TYPES = [_I32, _I32, _I32, None, _I32, None, _I32, None, _I64]
_formats: dict = {}


def served_dtypes(context, device) -> tuple[np.dtype, ...]:
    """The dtypes whose one-channel texel format ``device`` supports (none without image support)."""
    key = (context.int_ptr, device.int_ptr)
    found = _formats.get(key)
    if found is None:
        import pyopencl as cl

        found = ()
        if device.image_support:
            formats = cl.get_supported_image_formats(context, cl.mem_flags.READ_ONLY, cl.mem_object_type.IMAGE2D)
            have = {(f.channel_order, f.channel_data_type) for f in formats}
            found = tuple(
                d
                for d in IMAGE_DTYPES
                if (cl.channel_order.R, getattr(cl.channel_type, image_format(d).channel_type)) in have
            )
        _formats[key] = found
    return found


def check(facts, dtype) -> None:
    """``TypeError`` naming the device if it cannot hold ``dtype`` in an image."""
    image_format(dtype, f"OpenCL device {facts.name!r}")
    if dtype not in served_dtypes(facts.queue.context, facts.device):
        why = "has no image support" if not facts.device.image_support else f"has no CL_R image format for {dtype}"
        raise TypeError(f"algorithm 'image' cannot compute {dtype}: OpenCL device {facts.name!r} {why}")


def _staged(programs, facts, x, dtype, which, waits):
    """``(image, batch stride in rows, event)`` holding :class:`polymm.Operand` ``x`` (batch, rows, cols)."""
    import pyopencl as cl

    size = dtype.itemsize
    batch, rows, cols = x.shape
    sb, sr, sc = x.strides
    copies = batch if sb else 1
    device = facts.device
    check_image_size(
        which,
        cols,
        copies * rows,
        (device.image2d_max_width, device.image2d_max_height),
        dtype,
        f"OpenCL device {facts.name!r}",
    )
    queue = facts.queue
    buffer, offset = x.buffer, x.offset * size
    if not (sc == 1 and sr == cols and (copies == 1 or sb == rows * cols)):
        buffer, offset = facts.pool(copies * rows * cols * size), 0
        args = abi.arguments(
            "pack", R=rows, NC=cols, RP=rows, LD=cols, s_off=x.offset, s_sb=sb, s_sr=sr, s_sc=sc, d_off=0
        )
        where = abi.buffer_positions("pack")
        args[where["src"]], args[where["dst"]] = x.buffer, buffer
        tile = pack_params(facts.info.is_cpu, rows)
        geometry = launch_geometry("pack", tile, rows, cols, copies)
        pack = kernel_step(programs, facts, "pack", dtype, tile, {}, abi.scalar_types("pack"), args, [], geometry)
        waits = [cl.enqueue_nd_range_kernel(queue, pack.kernel, pack.global_size, pack.local_size, None, waits)]
    texel = image_format(dtype)
    fmt = cl.ImageFormat(cl.channel_order.R, getattr(cl.channel_type, texel.channel_type))
    image = cl.create_image(queue.context, cl.mem_flags.READ_ONLY, fmt, shape=(cols, copies * rows))
    event = cl.enqueue_copy(
        queue, image, buffer, offset=offset, origin=(0, 0), region=(cols, copies * rows), wait_for=waits
    )
    return image, (rows if copies > 1 else 0), event


def matmul(programs, facts, a, b, out):
    """``out[i] = a[i] @ b[i]`` by the image kernel (:class:`polymm.Operand` s), its programs from
    ``programs`` (a :class:`~polymm_opencl.programs.ProgramCache`); returns the kernel's event."""
    import pyopencl as cl

    dtype = np.dtype(out.dtype)
    check(facts, dtype)
    batch, M, K = a.shape
    N = b.shape[2]
    waits = (a.array.events + b.array.events + out.array.events) or None
    image_a, a_sb, event_a = _staged(programs, facts, a, dtype, "x1", waits)
    image_b, b_sb, event_b = _staged(programs, facts, b, dtype, "x2", waits)
    step = kernel_step(
        programs,
        facts,
        "image",
        dtype,
        None,
        {},
        _IMAGE_ARG_TYPES,
        [M, N, K, image_a, a_sb, image_b, b_sb, out.buffer, out.offset],
        [],
        launch_geometry("image", None, M, N, batch),
    )
    event = cl.enqueue_nd_range_kernel(
        facts.queue, step.kernel, step.global_size, step.local_size, None, [event_a, event_b]
    )
    out.array.add_event(event)
    return event
