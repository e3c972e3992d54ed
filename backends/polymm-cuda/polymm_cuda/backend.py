"""The CUDA backend: our own kernels through CuPy (NVRTC), on CuPy arrays.

``naive`` and ``tiled`` are the shared sources of :mod:`polymm.kernels`
rendered for CUDA (the same algorithm the OpenCL backend runs); ``auto`` is
the CUDA-only register-blocked kernel of :mod:`polymm_cuda.fastgemm`.

CuPy is imported only when the backend is instantiated, so ``import
polymm_cuda`` (and ``polymm.backends()``) works on machines without it.
"""

from __future__ import annotations

import numpy as np

from polymm.backend import Backend, BackendUnavailable, CONTRACT_DTYPES, is_bfloat16, optional_dtypes

from . import fastgemm, tensorcore
from . import image as _image

__all__ = ["CUDABackend"]

_NVRTC_OPTIONS = ("-std=c++17",)
_MAX_GRID_Z = 65535
#: Multiply-adds per product from which "auto" copies operands into a tensor-core layout.
_REPACK_WORK = 128**3
_SUPPORTED = frozenset(CONTRACT_DTYPES)


def _scalars(m, n, k, sa, sb):
    """Kernel scalars in their C types: int sizes, 64-bit offsets and strides."""
    i64 = np.int64
    return (
        np.int32(m),
        np.int32(n),
        np.int32(k),
        i64(0),
        i64(sa[0]),
        i64(sa[1]),
        i64(sa[2]),
        i64(sb[0]),
        i64(sb[1]),
        i64(sb[2]),
    )


class CUDABackend(Backend):
    """polymm on NVIDIA GPUs through CuPy; kernels compiled once per device/dtype/variant."""

    name = "cuda"
    algorithms = ("naive", "image", "tiled", "auto")
    array_library = "cupy"

    def __init__(self):
        try:
            import cupy
        except Exception as exc:  # ImportError, or a broken CUDA toolkit under CuPy
            raise BackendUnavailable(f"no CuPy: {type(exc).__name__}: {exc}") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailable(f"no CUDA device: {type(exc).__name__}: {exc}") from None
        if count < 1:
            raise BackendUnavailable("no CUDA device: the driver reports 0 devices")
        self._cp = cupy
        self._runtime = cupy.cuda.runtime
        self._count = count
        self._sms: dict[int, int] = {}
        self._ccs: dict[int, int] = {}
        # (device, dtype, algorithm-or-Variant) -> compiled kernel function
        self._kernels: dict = {}
        # (device, dtype, B, M, N, layout key) -> (kernel, grid, block, smem)
        self._plans: dict = {}

    # ---- description -------------------------------------------------------
    def dtypes(self):
        return CONTRACT_DTYPES + optional_dtypes()

    def algorithm_dtypes(self):
        """``image`` reads texture objects, which have no 64-bit or complex texels."""
        from polymm.kernels import IMAGE_DTYPES

        return {"image": IMAGE_DTYPES}

    def check_dtype(self, dtype, operand) -> None:
        # Every contract dtype runs on every CUDA device (float64 included).
        if dtype not in _SUPPORTED and dtype not in optional_dtypes():
            raise TypeError(f"polymm cuda backend does not support dtype {dtype}")

    def devices(self) -> list[str]:
        out = []
        for i in range(self._count):
            props = self._runtime.getDeviceProperties(i)
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else name
            out.append(f"cuda:{i} {name} (sm_{props['major']}{props['minor']}, {props['multiProcessorCount']} SMs)")
        return out

    # ---- host <-> device -----------------------------------------------------
    def from_numpy(self, x: np.ndarray):
        return self._cp.asarray(x)

    def to_numpy(self, x) -> np.ndarray:
        return self._cp.asnumpy(x)

    # ---- kernels -------------------------------------------------------------
    def _sm_count(self, dev: int) -> int:
        n = self._sms.get(dev)
        if n is None:
            n = self._sms[dev] = self._runtime.getDeviceProperties(dev)["multiProcessorCount"]
        return n

    def _shared_kernel(self, dev: int, dtype: np.dtype, kernel: str):
        """``polymm_naive`` / ``polymm_image`` / ``polymm_tiled`` from the shared sources (compiled once)."""
        key = (dev, dtype, kernel)
        fn = self._kernels.get(key)
        if fn is None:
            from polymm.kernels import kernel_name, render

            src = render("cuda", kernel, dtype)
            mod = self._cp.RawModule(code=src, options=_NVRTC_OPTIONS)
            fn = self._kernels[key] = mod.get_function(kernel_name(kernel))
        return fn

    def _fast_kernel(self, dev: int, v: fastgemm.Variant):
        key = (dev, v)
        fn = self._kernels.get(key)
        if fn is None:
            expr = v.name_expression
            mod = self._cp.RawModule(code=fastgemm.source(), options=_NVRTC_OPTIONS, name_expressions=(expr,))
            fn = mod.get_function(expr)
            if v.smem_bytes > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = v.smem_bytes
            self._kernels[key] = fn
        return fn

    def _compute_capability(self, dev: int) -> int:
        cc = self._ccs.get(dev)
        if cc is None:
            cc = self._ccs[dev] = int(self._cp.cuda.Device(dev).compute_capability)
        return cc

    def _tensor_core_name(self, dev, dtype, shape, sa, sb, a, b) -> str | None:
        cc = self._compute_capability(dev)
        return tensorcore.choose(dtype, cc, shape, sa, sb, a.data.ptr, b.data.ptr)[0]

    def _tensor_core_kernel(self, dev: int, name: str, params: tensorcore.Params):
        key = (dev, name, params)
        fn = self._kernels.get(key)
        if fn is None:
            mod = self._cp.RawModule(code=tensorcore.source(), options=_NVRTC_OPTIONS + params.options())
            fn = mod.get_function(name)
            if params.smem_bytes() > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = params.smem_bytes()
            self._kernels[key] = fn
        return fn

    def _plan(self, dev, dtype, algorithm, a, b, shape, sa, sb):
        """(kernel, grid, block, shared bytes) for one call; memoised by the caller."""
        bt, m, n, k = shape
        tc = self._tensor_core_name(dev, dtype, shape, sa, sb, a, b) if algorithm == "auto" else None
        if tc is not None:
            p = tensorcore.DEFAULT
            grid, block = p.geometry(shape, _MAX_GRID_Z)
            return self._tensor_core_kernel(dev, tc, p), grid, block, p.smem_bytes(), _scalars(m, n, k, sa, sb)
        if algorithm == "auto" and is_bfloat16(dtype):  # no SIMT fast kernel for bfloat16: shared tiles
            algorithm = "tiled"
        if algorithm == "auto":
            v = fastgemm.choose_variant(dtype, a.data.ptr, sa, b.data.ptr, sb, shape, self._sm_count(dev))
            fn = self._fast_kernel(dev, v)
            c = v.config
            grid = (-(-m // c.bm) * -(-n // c.bn), 1, min(bt, _MAX_GRID_Z))
            return fn, grid, (c.threads, 1, 1), v.smem_bytes, _scalars(m, n, k, sa, sb)
        from polymm.kernels import launch_geometry

        fn = self._shared_kernel(dev, dtype, algorithm)
        glob, local = launch_geometry(algorithm, None, m, n, 1)
        grid = (glob[0] // local[0], glob[1] // local[1], min(bt, _MAX_GRID_Z))
        return fn, grid, local, 0, _scalars(m, n, k, sa, sb)

    # ---- compute ---------------------------------------------------------------
    def matmul(self, a, b, out, algorithm: str) -> None:
        dev = a.data.device_id
        if b.data.device_id != dev or out.data.device_id != dev:
            raise ValueError(
                "polymm cuda: operands on different GPUs: x1 on cuda:%d, x2 on cuda:%d, out on cuda:%d"
                % (dev, b.data.device_id, out.data.device_id)
            )
        if algorithm == "image":
            _image.matmul(self, dev, a, b, out)
            return
        dtype = a.dtype
        isz = dtype.itemsize
        bt, m, k = a.shape
        n = b.shape[2]
        s0, s1, s2 = a.strides
        sa = (s0 // isz, s1 // isz, s2 // isz)
        s0, s1, s2 = b.strides
        sb = (s0 // isz, s1 // isz, s2 // isz)
        if (
            algorithm == "auto"
            and dtype.name in tensorcore.LAYOUTS
            and m * n * k >= _REPACK_WORK
            and self._tensor_core_name(dev, dtype, (bt, m, n, k), sa, sb, a, b) is None
        ):
            # a layout the tensor cores cannot read: a copy costs far less than the SIMT kernel
            a, b = tensorcore.repack(self._cp, a, b)
            sa = tuple(s // isz for s in a.strides)
            sb = tuple(s // isz for s in b.strides)
        # The plan depends on shape, strides and the operands' alignment only.
        key = (dev, dtype, algorithm, bt, m, n, k, sa, sb, a.data.ptr & 15, b.data.ptr & 15)
        plan = self._plans.get(key)
        if plan is None:
            if self._runtime.getDevice() != dev:
                with self._cp.cuda.Device(dev):
                    plan = self._plan(dev, dtype, algorithm, a, b, (bt, m, n, k), sa, sb)
            else:
                plan = self._plan(dev, dtype, algorithm, a, b, (bt, m, n, k), sa, sb)
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[key] = plan
        self._launch(dev, plan, a, b, out, bt, m, n, k, sa, sb)

    def _launch(self, dev, plan, a, b, out, bt, m, n, k, sa, sb) -> None:
        fn, grid, block, smem = plan[:4]
        if bt <= _MAX_GRID_Z:
            # Scalars were converted once per plan (np.int32 sizes, np.int64 offsets/strides).
            mm, nn, kk, z, a0, a1, a2, b0, b1, b2 = plan[4]
            args = (mm, nn, kk, a, z, a0, a1, a2, b, z, b0, b1, b2, out, z)
            if self._runtime.getDevice() != dev:
                with self._cp.cuda.Device(dev):
                    fn(grid, block, args, shared_mem=smem)
            else:
                fn(grid, block, args, shared_mem=smem)
            return
        i32, i64 = np.int32, np.int64
        with self._cp.cuda.Device(dev):
            for z0 in range(0, bt, _MAX_GRID_Z):
                nz = min(_MAX_GRID_Z, bt - z0)
                args = (
                    i32(m),
                    i32(n),
                    i32(k),
                    a,
                    i64(z0 * sa[0]),
                    i64(sa[0]),
                    i64(sa[1]),
                    i64(sa[2]),
                    b,
                    i64(z0 * sb[0]),
                    i64(sb[0]),
                    i64(sb[1]),
                    i64(sb[2]),
                    out,
                    i64(z0 * m * n),
                )
                fn((grid[0], grid[1], nz), block, args, shared_mem=smem)

    def run_fast_config(self, a, b, out, config: str, cp_async=None) -> fastgemm.Variant:
        """Run the fast kernel with a named tile configuration (tests, benchmarks, tuning)."""
        dev = a.data.device_id
        dtype = a.dtype
        isz = dtype.itemsize
        bt, m, k = a.shape
        n = b.shape[2]
        sa = tuple(s // isz for s in a.strides)
        sb = tuple(s // isz for s in b.strides)
        size = fastgemm.DTYPE_TAGS[dtype.name][2]
        with self._cp.cuda.Device(dev):
            v = fastgemm.choose_variant(
                dtype,
                a.data.ptr,
                sa,
                b.data.ptr,
                sb,
                (bt, m, n, k),
                1,
                config=fastgemm.CONFIG_BY_NAME[(size, config)],
                cp_async=cp_async,
            )
            fn = self._fast_kernel(dev, v)
            c = v.config
            plan = (
                fn,
                (-(-m // c.bm) * -(-n // c.bn), 1, min(bt, _MAX_GRID_Z)),
                (c.threads, 1, 1),
                v.smem_bytes,
                _scalars(m, n, k, sa, sb),
            )
            self._launch(dev, plan, a, b, out, bt, m, n, k, sa, sb)
        return v
