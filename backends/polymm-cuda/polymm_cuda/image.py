"""The ``image`` algorithm on CUDA: operands copied into CUDA arrays and read
through texture objects (``cupy.cuda.texture``) by the shared ``image`` kernel
(:mod:`polymm.kernels`, ``image.c``), the twin of the OpenCL image path.

Each operand becomes one texture ``cols`` wide and ``(batches) x rows`` high
(a broadcast batch is one matrix high), with point sampling, unnormalised
coordinates and element-type reads.  CUDA arrays are laid out for 2-D
locality (not row by row), which is what the texture cache is built for.
Textures are made per call and the call waits for its kernel before freeing
them: this is a teaching kernel, kept simple.
"""

from __future__ import annotations

import numpy as np

from polymm.kernels import GRID_ROWS, check_image_size, image_format, launch_geometry

_limits: dict = {}


def _texture(cp, x, dtype, which: str, device: str, limit):
    """``(texture object, its CUDA array, batch stride in rows)`` holding ``x`` (batch, rows, cols)."""
    from cupy.cuda import runtime, texture

    batch, rows, cols = x.shape
    copies = batch if x.strides[0] else 1
    check_image_size(which, cols, copies * rows, limit, dtype, device)
    texel = image_format(dtype, device)
    raw = np.dtype(f"{'u' if texel.cuda_kind != 'Signed' else 'i'}{texel.bits // 8}")
    if texel.cuda_kind == "Float":
        raw = dtype
    stacked = cp.ascontiguousarray(x[:copies]).view(raw).reshape(copies * rows, cols)
    kind = getattr(runtime, f"cudaChannelFormatKind{texel.cuda_kind}")
    channel = texture.ChannelFormatDescriptor(texel.bits, 0, 0, 0, kind)
    array = texture.CUDAarray(channel, cols, copies * rows)
    array.copy_from(stacked)
    resource = texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array)
    sampling = texture.TextureDescriptor(
        (runtime.cudaAddressModeClamp, runtime.cudaAddressModeClamp),
        runtime.cudaFilterModePoint,
        runtime.cudaReadModeElementType,
    )
    return texture.TextureObject(resource, sampling), array, (rows if copies > 1 else 0)


def matmul(backend, dev: int, a, b, out) -> None:
    """``out[i] = a[i] @ b[i]`` by the image kernel on GPU ``dev`` (all three on it)."""
    cp = backend._cp
    dtype = np.dtype(out.dtype)
    device = f"CUDA device cuda:{dev}"
    image_format(dtype, device)  # TypeError for dtypes without texels, before any copy
    limit = _limits.get(dev)
    if limit is None:
        limit = _limits[dev] = tuple(cp.cuda.runtime.getDeviceProperties(dev)["maxTexture2D"])
    batch, m, k = a.shape
    n = b.shape[2]
    fn = backend._shared_kernel(dev, dtype, "image")
    with cp.cuda.Device(dev):
        for z0 in range(0, batch, GRID_ROWS):  # gridDim.z is at most GRID_ROWS: one launch per chunk
            z1 = min(batch, z0 + GRID_ROWS)
            tex_a, keep_a, a_sb = _texture(cp, a[z0:z1], dtype, "x1", device, limit)
            tex_b, keep_b, b_sb = _texture(cp, b[z0:z1], dtype, "x2", device, limit)
            glob, local = launch_geometry("image", None, m, n, z1 - z0)
            grid = (glob[0] // local[0], glob[1] // local[1], z1 - z0)
            i32 = np.int32
            args = (i32(m), i32(n), i32(k), tex_a, i32(a_sb), tex_b, i32(b_sb), out[z0:z1], np.int64(0))
            fn(grid, local, args)
            # texture objects and their CUDA arrays must outlive the kernel: wait before they go
            cp.cuda.get_current_stream().synchronize()
            del tex_a, tex_b, keep_a, keep_b
