"""The CUDA backend: our own kernels through CuPy (NVRTC), on CuPy arrays.

``naive`` and ``tiled`` are the shared sources of :mod:`polymm.kernels`
rendered for CUDA (the same algorithm the OpenCL backend runs); ``auto`` is
the CUDA-only register-blocked kernel of :mod:`polymm_cuda.fastgemm`.

CuPy is imported only when the backend is instantiated, so ``import
polymm_cuda`` (and ``polymm.backends()``) works on machines without it.
"""

from __future__ import annotations

import numpy as np

from polymm.arrays import as_operand
from polymm.backend import CONTRACT_DTYPES, Backend, BackendUnavailable, Operand, is_bfloat16, optional_dtypes

from . import fastgemm, tensorcore
from . import image as _image

__all__ = ["CuPyBackend", "CUDABackend"]

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


class CuPyBackend(Backend):
    """What both CUDA backends share: CuPy, its devices, the dtypes they serve, host transfers.

    Instantiating it imports CuPy and counts the GPUs, or raises :class:`BackendUnavailable`
    with the reason."""

    array_library = "cupy"
    algorithms = ("naive", "image", "tiled", "auto")

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
        self._kernels: dict = {}  # compiled functions, keyed by what selects them
        self._plans: dict = {}  # launch plans, keyed by shape, strides and alignment

    def dtypes(self):
        return CONTRACT_DTYPES + optional_dtypes()

    def algorithm_dtypes(self):
        """``image`` reads texture objects, which have no 64-bit or complex texels."""
        from polymm.kernels import IMAGE_DTYPES

        return {"image": IMAGE_DTYPES}

    def check_dtype(self, dtype, operand) -> None:
        # Every contract dtype runs on every CUDA device (float64 included).
        if dtype not in _SUPPORTED and dtype not in optional_dtypes():
            raise TypeError(f"polymm {self.name} backend does not support dtype {dtype}")

    def from_numpy(self, x: np.ndarray):
        return self._cp.asarray(x)

    def to_numpy(self, x) -> np.ndarray:
        return self._cp.asnumpy(x)


class CUDABackend(CuPyBackend):
    """polymm on NVIDIA GPUs through CuPy; kernels compiled once per device/dtype/variant."""

    name = "cuda"
    default_for = ("cupy",)

    def __init__(self):
        super().__init__()
        self._sms: dict[int, int] = {}
        self._ccs: dict[int, int] = {}

    # ---- description -------------------------------------------------------
    def devices(self) -> list[str]:
        out = []
        for i in range(self._count):
            props = self._runtime.getDeviceProperties(i)
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else name
            cc = 10 * props["major"] + props["minor"]
            out.append(f"cuda:{i} {name} (sm_{cc}, {props['multiProcessorCount']} SMs; {tensorcore.describe(cc)})")
        return out

    # ---- host <-> device -----------------------------------------------------
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

    def _tensor_core_name(self, dev, dtype, shape, sa, sb, pa, pb) -> str | None:
        cc = self._compute_capability(dev)
        return tensorcore.choose(dtype, cc, shape, sa, sb, pa, pb)[0]

    def _tensor_core_kernel(self, dev: int, name: str, options=(), smem: int = 0, source: str = "tensorcore"):
        """A kernel of ``kernels/<source>.cu`` built with ``options`` (compiled once)."""
        key = (dev, name, options)
        fn = self._kernels.get(key)
        if fn is None:
            mod = self._cp.RawModule(code=tensorcore.source(source), options=_NVRTC_OPTIONS + tuple(options))
            fn = mod.get_function(name)
            if smem > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = smem
            self._kernels[key] = fn
        return fn

    def _plan(self, dev, dtype, algorithm, pa, pb, shape, sa, sb):
        """(kernel, grid, block, shared bytes) for one call; memoised by the caller.

        ``pa``, ``pb``: the operands' first-element addresses (the kernels'
        vector loads depend on their alignment)."""
        bt, m, n, k = shape
        tc = self._tensor_core_name(dev, dtype, shape, sa, sb, pa, pb) if algorithm == "auto" else None
        if tc is not None:
            p = tensorcore.DEFAULT
            grid, block = p.geometry(shape, _MAX_GRID_Z)
            fn = self._tensor_core_kernel(dev, tc, p.options(), p.smem_bytes())
            return fn, grid, block, p.smem_bytes(), _scalars(m, n, k, sa, sb)
        dm = None
        if algorithm == "auto" and tensorcore.DMMA_IN_AUTO:
            dm = tensorcore.choose_dmma(dtype, self._compute_capability(dev), shape, sa, sb)[0]
        if dm is not None:
            fn = self._tensor_core_kernel(dev, dm, (), tensorcore.DMMA_SMEM, "dmma")
            grid = (-(-n // tensorcore.DMMA_BN), -(-m // tensorcore.DMMA_BM), min(bt, _MAX_GRID_Z))
            return fn, grid, (256, 1, 1), tensorcore.DMMA_SMEM, _scalars(m, n, k, sa, sb)
        if algorithm == "auto" and is_bfloat16(dtype):  # no SIMT fast kernel for bfloat16: shared tiles
            algorithm = "tiled"
        if algorithm == "auto":
            v = fastgemm.choose_variant(dtype, pa, sa, pb, sb, shape, self._sm_count(dev))
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
    def _view(self, op):
        """A CuPy view of operand ``op`` (for :func:`tensorcore.repack`, which copies CuPy arrays)."""
        isz = op.dtype.itemsize
        as_strided = self._cp.lib.stride_tricks.as_strided
        # two elements `offset` apart, keeping the second: a view that starts there
        start = as_strided(op.buffer, (2,), (op.offset * isz,))[1:] if op.offset else op.buffer
        return as_strided(start, op.shape, tuple(s * isz for s in op.strides))

    def matmul(self, a, b, out, algorithm: str) -> None:
        """``a``, ``b``, ``out``: :class:`polymm.Operand` (CuPy arrays, from tests and benchmarks, are made operands)."""
        if type(out) is not Operand:
            a, b, out = as_operand(a), as_operand(b), as_operand(out)
        dev = a.buffer.data.device_id
        if b.buffer.data.device_id != dev or out.buffer.data.device_id != dev:
            raise ValueError(
                "polymm cuda: operands on different GPUs: x1 on cuda:%d, x2 on cuda:%d, out on cuda:%d"
                % (dev, b.buffer.data.device_id, out.buffer.data.device_id)
            )
        if algorithm == "image":
            _image.matmul(self, dev, self._view(a), self._view(b), self._view(out))
            return
        dtype = a.dtype
        isz = dtype.itemsize
        bt, m, k = a.shape
        n = b.shape[2]
        sa, sb = a.strides, b.strides
        pa = a.buffer.data.ptr + a.offset * isz
        pb = b.buffer.data.ptr + b.offset * isz
        if (
            algorithm == "auto"
            and dtype.name in tensorcore.LAYOUTS
            and m * n * k >= _REPACK_WORK
            and tensorcore.shape_rule(dtype, self._compute_capability(dev), (bt, m, n, k)) is None
            and self._tensor_core_name(dev, dtype, (bt, m, n, k), sa, sb, pa, pb) is None
        ):
            # a layout the tensor cores cannot read: a copy costs far less than the SIMT kernel
            a, b = (as_operand(x) for x in tensorcore.repack(self._cp, self._view(a), self._view(b)))
            sa, sb = a.strides, b.strides
            pa = a.buffer.data.ptr + a.offset * isz
            pb = b.buffer.data.ptr + b.offset * isz
        # The plan depends on shape, strides and the operands' alignment only.
        key = (dev, dtype, algorithm, bt, m, n, k, sa, sb, pa & 15, pb & 15)
        plan = self._plans.get(key)
        if plan is None:
            if self._runtime.getDevice() != dev:
                with self._cp.cuda.Device(dev):
                    plan = self._plan(dev, dtype, algorithm, pa, pb, (bt, m, n, k), sa, sb)
            else:
                plan = self._plan(dev, dtype, algorithm, pa, pb, (bt, m, n, k), sa, sb)
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[key] = plan
        self._launch(dev, plan, a, b, out, bt, m, n, k, sa, sb)

    def _launch(self, dev, plan, a, b, out, bt, m, n, k, sa, sb) -> None:
        """Launch on operands ``a``, ``b``, ``out``: their buffers and element offsets go to the kernel as they are."""
        fn, grid, block, smem = plan[:4]
        i32, i64 = np.int32, np.int64
        if bt <= _MAX_GRID_Z:
            # Scalars were converted once per plan (np.int32 sizes, np.int64 offsets/strides).
            mm, nn, kk, z, a0, a1, a2, b0, b1, b2 = plan[4]
            oa = i64(a.offset) if a.offset else z
            ob = i64(b.offset) if b.offset else z
            oc = i64(out.offset) if out.offset else z
            args = (mm, nn, kk, a.buffer, oa, a0, a1, a2, b.buffer, ob, b0, b1, b2, out.buffer, oc)
            if self._runtime.getDevice() != dev:
                with self._cp.cuda.Device(dev):
                    fn(grid, block, args, shared_mem=smem)
            else:
                fn(grid, block, args, shared_mem=smem)
            return
        with self._cp.cuda.Device(dev):
            for z0 in range(0, bt, _MAX_GRID_Z):
                nz = min(_MAX_GRID_Z, bt - z0)
                args = (
                    i32(m),
                    i32(n),
                    i32(k),
                    a.buffer,
                    i64(a.offset + z0 * sa[0]),
                    i64(sa[0]),
                    i64(sa[1]),
                    i64(sa[2]),
                    b.buffer,
                    i64(b.offset + z0 * sb[0]),
                    i64(sb[0]),
                    i64(sb[1]),
                    i64(sb[2]),
                    out.buffer,
                    i64(out.offset + z0 * m * n),
                )
                fn((grid[0], grid[1], nz), block, args, shared_mem=smem)

    def run_fast_config(self, a, b, out, config: str, cp_async=None) -> fastgemm.Variant:
        """Run the fast kernel with a named tile configuration (tests, benchmarks, tuning)."""
        a, b, out = as_operand(a), as_operand(b), as_operand(out)
        dev = a.buffer.data.device_id
        dtype = a.dtype
        isz = dtype.itemsize
        bt, m, k = a.shape
        n = b.shape[2]
        sa, sb = a.strides, b.strides
        size = fastgemm.DTYPE_TAGS[dtype.name][2]
        with self._cp.cuda.Device(dev):
            v = fastgemm.choose_variant(
                dtype,
                a.buffer.data.ptr + a.offset * isz,
                sa,
                b.buffer.data.ptr + b.offset * isz,
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
