"""The CUDA backend: the shared GPU kernel layer (:mod:`polymm.kernels`) through CuPy (NVRTC),
on CuPy arrays.

Every SIMT kernel -- ``naive``, ``tiled`` and everything ``auto`` runs (the
register-blocked ``regblock``, ``matvec``, split-K's ``sum-slices``,
``pack``) -- is the source the OpenCL backend runs, rendered for CUDA, and
the launches come from the shared planner (:mod:`polymm.kernels.planner`).
The tensor-core kernels (:mod:`polymm_cuda.tensorcore`, CUDA-only) are
kernel families of that planner (:mod:`polymm_cuda.families`).  This module only compiles, caches and launches.

CuPy is imported only when the backend is instantiated, so ``import
polymm_cuda`` (and ``polymm.backends()``) works on machines without it.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from polymm import precision as _precision
from polymm.arrays import as_operand
from polymm.backend import CONTRACT_DTYPES, Backend, BackendUnavailable, Operand, optional_dtypes, plan_cache_size
from polymm.kernels import GRID_ROWS, abi, kernel_name, planner, render
from polymm.kernels.params import DeviceInfo

from . import image as _image
from .arrays import ForeignView
from . import launch as _launch
from . import families as _families  # noqa: F401 (registers the tensor-core families with the planner)
from . import sources, tensorcore
from . import wgmma as _wgmma

__all__ = ["CUDABackend"]

_NVRTC_OPTIONS = ("-std=c++17",)
_SUPPORTED = frozenset(CONTRACT_DTYPES)
#: What the plan cache holds for operands that "auto" copies first (:meth:`CUDABackend._repacked`).
_REPACK = "repack"
#: Launches take arguments laid out once (:mod:`polymm_cuda.launch`); ``POLYMM_CUDA_DRIVER_LAUNCH=0``
#: sends them through CuPy's ``RawKernel`` call instead, which converts them on every call.
_DRIVER_LAUNCH = os.environ.get("POLYMM_CUDA_DRIVER_LAUNCH", "1") != "0"
#: Plans kept per backend; when full the cache starts again (shapes in a program are few).
_PLAN_CACHE_SIZE = plan_cache_size(4096)  # POLYMM_PLAN_CACHE overrides
#: Scratch bytes (split-K partial sums, packed operands) kept between calls, per device, stream
#: and thread: a fresh block from CuPy's pool cost 5-27 us of host time per call on the H100
#: (2026-11-24), a fifth of a whole gevm call.  Larger scratch is allocated per call.
_SCRATCH_KEPT = 16 << 20
_SCRATCH_BLOCKS = 64  # kept blocks at most (they are dropped all at once past it)


class _Step:
    """One launch: the compiled function, grid and block, dynamic shared
    memory, scalar arguments converted once, and the buffer positions
    (position -> 0 = A, 1 = B, 2 = C, 3+ = scratch) filled per call;
    ``tma``: the tensor maps a ``wgmma`` launch takes first, as (buffer slot,
    geometry) pairs (encoded for each new set of buffer addresses; ``maps``: the
    last ``(addresses, maps)``), else None; ``prepared``: the launch with its
    arguments laid out for the driver (:mod:`polymm_cuda.launch`), or None
    (CuPy launches it)."""

    __slots__ = ("fn", "grid", "block", "smem", "args", "buffers", "tma", "maps", "prepared")

    def __init__(self, fn, grid, block, smem, args, buffers, tma=None):
        self.fn, self.grid, self.block, self.smem, self.args, self.buffers = fn, grid, block, smem, args, buffers
        self.tma, self.maps = tma, None
        self.prepared = None
        function = getattr(getattr(fn, "kernel", fn), "ptr", None)  # RawKernel -> its CUfunction
        if _DRIVER_LAUNCH and function is not None:
            from cupy.cuda import driver

            maps = len(tma) if tma is not None else 0
            self.prepared = _launch.Prepared(driver.launchKernel, function, grid, block, smem, args, buffers, maps)


class CUDABackend(Backend):
    """polymm on NVIDIA GPUs through CuPy; kernels compiled once per device/kernel/dtype/parameters.

    Instantiating it imports CuPy and counts the GPUs, or raises :class:`BackendUnavailable`
    with the reason."""

    name = "cuda"
    default_for = ("cupy",)
    array_library = "cupy"
    algorithms = ("naive", "image", "tiled", "auto")

    def __init__(self):
        try:
            import cupy
        except Exception as exc:  # ImportError, or a broken CUDA toolkit under CuPy
            raise BackendUnavailable(
                f"no CuPy: {type(exc).__name__}: {exc} (install the build for your CUDA major version: "
                "pip install cupy-cuda12x or cupy-cuda13x)"
            ) from None
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
        self._info: dict[int, DeviceInfo] = {}
        self._scratch_blocks: dict = {}  # (device, stream, thread) -> CuPy uint8 array
        self.last_plan = None

    # ---- description -------------------------------------------------------
    def dtypes(self):
        return CONTRACT_DTYPES + optional_dtypes()

    def algorithm_dtypes(self):
        """``image`` reads texture objects, which have no 64-bit or complex texels."""
        from polymm.kernels import IMAGE_DTYPES

        return {"image": IMAGE_DTYPES}

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precision modes some GPU here accelerates (TF32 ``wgmma``: compute capability 9.0)."""
        return (
            tuple(_wgmma.TF32_PRODUCTS)
            if any(self._compute_capability(i) == _wgmma.CC for i in range(self._count))
            else ()
        )

    def check_dtype(self, dtype, operand) -> None:
        # Every contract dtype runs on every CUDA device (float64 included).
        if dtype not in _SUPPORTED and dtype not in optional_dtypes():
            raise TypeError(f"polymm {self.name} backend does not support dtype {dtype}")

    def devices(self) -> list[str]:
        out = []
        for i in range(self._count):
            info = self.device_info(i)
            out.append(f"cuda:{i} {info.name} (sm_{info.cc}, {info.compute_units} SMs; {tensorcore.describe(info)})")
        return out

    def device_info(self, dev: int) -> DeviceInfo:
        """What the shared planner needs to know about GPU ``dev`` (asked once)."""
        info = self._info.get(dev)
        if info is None:
            props = self._runtime.getDeviceProperties(dev)
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else name
            info = self._info[dev] = DeviceInfo(
                name=name,
                vendor="NVIDIA",
                kind="gpu",
                dialect="cuda",
                compute_units=props["multiProcessorCount"],
                max_work_group=props["maxThreadsPerBlock"],
                local_mem=props["sharedMemPerBlock"],
                key=f"CUDA|{name}|sm_{props['major']}{props['minor']}",
                platform="CUDA",
                max_batch=GRID_ROWS,
                threads_per_cu=props["maxThreadsPerMultiProcessor"],
                blocks_per_cu=props.get("maxBlocksPerMultiProcessor", 32),
                local_mem_per_cu=props["sharedMemPerMultiprocessor"],
                registers_per_cu=props["regsPerMultiprocessor"],
                cc=props["major"] * 10 + props["minor"],
            )
        return info

    def _compute_capability(self, dev: int) -> int:
        return self.device_info(dev).cc

    def planner_device(self, operand) -> DeviceInfo:
        """The planner's description of the GPU ``operand`` (an Operand or a CuPy array) lives on."""
        array = operand.buffer if isinstance(operand, Operand) else operand
        return self.device_info(array.data.device_id)

    # ---- host <-> device -----------------------------------------------------
    def from_numpy(self, x: np.ndarray):
        x = np.asarray(x)
        if not x.dtype.isnative:  # CuPy holds the device's own byte order only
            x = x.astype(x.dtype.newbyteorder("="))
        return self._cp.asarray(x)

    def to_numpy(self, x) -> np.ndarray:
        return self._cp.asnumpy(x)

    def synchronize(self) -> None:
        self._cp.cuda.get_current_stream().synchronize()

    # ---- kernels -------------------------------------------------------------
    def compiled(self, dev: int, kernel: str, dtype, params, flags, external=None):
        """The CuPy function for one rendered kernel, or a kernel family's ``external``
        kernel (tensor cores), compiled once per device."""
        if external is not None:
            key = (dev, kernel, external["source"], external["options"])
            fn = self._kernels.get(key)
            if fn is None:
                options = _NVRTC_OPTIONS + tuple(external["options"])
                fn = self._cp.RawModule(code=_external_source(external["source"]), options=options)
                fn = self._kernels[key] = fn.get_function(kernel)
            return fn
        key = (dev, kernel, dtype, params, tuple(sorted(flags.items())))
        fn = self._kernels.get(key)
        if fn is None:
            options = _NVRTC_OPTIONS
            if params is not None and params.maxrreg:
                options += (f"--maxrregcount={params.maxrreg}",)
            src = render("cuda", kernel, dtype, params, **flags)
            fn = self._cp.RawModule(code=src, options=options).get_function(kernel_name(kernel))
            self._kernels[key] = fn
        return fn

    def _shared_kernel(self, dev: int, dtype, kernel: str):
        """A shared kernel without tile parameters (what :mod:`polymm_cuda.image` asks for)."""
        return self.compiled(dev, kernel, dtype, None, {})

    def _steps(self, dev, made) -> list:
        steps = []
        for launch in made.launches:
            dtype = launch.dtype if launch.dtype is not None else made.dtype  # a complex pack before a real product
            fn = self.compiled(dev, launch.kernel, dtype, launch.params, launch.flags, launch.external)
            if launch.dynamic_local > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = launch.dynamic_local
            grid = tuple(g // b for g, b in zip(launch.global_size, launch.local_size))
            args = [t(v) if t is not None else None for t, v in zip(abi.scalar_types(launch.signature), launch.args)]
            tma = launch.external.get("tma") if launch.external else None
            buffers = sorted(launch.buffers.items())
            steps.append(_Step(fn, grid, launch.local_size, launch.dynamic_local, args, buffers, tma))
        return steps

    def plan(self, a: Operand, b: Operand, algorithm="auto", choice=None):
        """The shared planner's :class:`~polymm.kernels.planner.Plan` for operands ``a``, ``b``,
        with their element offsets counted from the 16-byte aligned address below each
        (what the vector paths check); returns ``(plan, a_off, b_off)``."""
        isz = a.dtype.itemsize
        bt, m, k = a.shape
        n = b.shape[2]
        a_off, b_off = (_address(a) % 16) // isz, (_address(b) % 16) // isz
        info = self.device_info(a.buffer.data.device_id)
        made = planner.plan(info, a.dtype, (bt, m, n, k), (a_off, a.strides), (b_off, b.strides), 0, algorithm, choice)
        return made, a_off, b_off

    # ---- compute ---------------------------------------------------------------
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
        if algorithm == "image":  # texture objects: its own launch (polymm_cuda.image)
            _image.matmul(self, dev, self._view(a), self._view(b), self._view(out))
            return
        if _misaligned(a, b, out):
            self._matmul_aligned(dev, a, b, out, algorithm)
            return
        self._run(dev, self._planned(dev, a, b, algorithm, repack=True), a, b, out)

    def _matmul_aligned(self, dev, a, b, out, algorithm) -> None:
        """The product of operands at addresses their item size does not divide (a complex128 view
        8 bytes into a float64 buffer, say): every kernel reads whole items (complex ones 16 bytes
        at a time; CuPy's own kernels fault on them too), so their bytes are copied to an aligned
        block first (C's back after)."""
        with self._cp.cuda.Device(dev):
            a, b = (self._realigned(x)[0] if _misaligned(x) else x for x in (a, b))
            if not _misaligned(out):
                self._run(dev, self._planned(dev, a, b, algorithm, repack=True), a, b, out)
                return
            aligned, copy_back = self._realigned(out)
            self._run(dev, self._planned(dev, a, b, algorithm, repack=True), a, b, aligned)
            copy_back()

    def _realigned(self, op: Operand):
        """``(operand, copy_back)``: ``op`` read from a copy of the bytes its elements span, on an
        aligned block (strides kept); ``copy_back()`` copies them back over ``op``'s."""
        cp, isz = self._cp, op.dtype.itemsize
        low = sum(min(0, (n - 1) * s) for n, s in zip(op.shape, op.strides) if n > 1) * isz
        span = sum(abs((n - 1) * s) for n, s in zip(op.shape, op.strides) if n > 1) * isz + isz
        block = cp.empty(span, dtype=np.uint8)
        start = _address(op) + low
        stream = cp.cuda.get_current_stream().ptr
        kind = cp.cuda.runtime.memcpyDeviceToDevice
        cp.cuda.runtime.memcpyAsync(block.data.ptr, start, span, kind, stream)
        view = cp.ndarray(op.shape, op.dtype, memptr=block.data + (-low), strides=tuple(s * isz for s in op.strides))

        def copy_back() -> None:
            cp.cuda.runtime.memcpyAsync(start, block.data.ptr, span, kind, cp.cuda.get_current_stream().ptr)

        return as_operand(view), copy_back

    def _planned(self, dev, a, b, algorithm, repack=False):
        """What :meth:`_run` takes for these operands, from the plan cache: the plan depends on
        shape, strides, the operands' alignment and the precision mode only (so does the decision
        to repack)."""
        key = (dev, a.dtype, algorithm, a.shape, b.shape, a.strides, b.strides, _address(a) & 15, _address(b) & 15)
        # ``repack`` in the key: the plan for operands already copied must never be "copy them"
        # (a product whose operands had that layout from the start stores _REPACK under the
        # same shapes and strides; the copies then found it and failed, 9 in 105,000 products)
        key += (_precision.current(), repack)
        found = self._plans.get(key)
        if found is None:
            found = self._prepare(dev, a, b, algorithm, repack=repack)
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = found
        return found

    def _view(self, op: Operand):
        """A CuPy view of operand ``op`` (for :func:`tensorcore.repack`, which copies CuPy arrays)."""
        isz = op.dtype.itemsize
        as_strided = self._cp.lib.stride_tricks.as_strided
        buffer = op.buffer.cupy() if type(op.buffer) is ForeignView else op.buffer
        # two elements `offset` apart, keeping the second: a view that starts there
        start = as_strided(buffer, (2,), (op.offset * isz,))[1:] if op.offset else buffer
        return as_strided(start, op.shape, tuple(s * isz for s in op.strides))

    def _repacked(self, a: Operand, b: Operand):
        return tuple(as_operand(x) for x in tensorcore.repack(self._cp, self._view(a), self._view(b)))

    def explain(self, a, b, out, algorithm: str) -> dict:
        """The plan a call would run, with the compiler's registers, static shared and local
        (spilled) memory per launch (for :func:`polymm.tools.explain.explain`)."""
        a, b = as_operand(a), as_operand(b)
        dev = a.buffer.data.device_id
        found = self._prepare(dev, a, b, algorithm, repack=True)
        if found is _REPACK:  # explained for the copies, as run
            with self._cp.cuda.Device(dev):
                a, b = self._repacked(a, b)
            found = self._prepare(dev, a, b, algorithm)
        steps, _, _, _, made = found
        compiled = [
            {
                "registers": step.fn.num_regs,
                "local_mem": step.fn.shared_size_bytes + step.smem,
                "private_mem": step.fn.local_size_bytes,
            }
            for step in steps
        ]
        return {"device": self.device_info(dev), "plan": made, "compiled": compiled}

    def launch(self, a, b, out, kernel: str, params):
        """Run ``kernel`` with ``params`` as the product (tests, tuning); returns the plan."""
        a, b, out = as_operand(a), as_operand(b), as_operand(out)
        dev = a.buffer.data.device_id
        found = self._prepare(dev, a, b, choice=planner.Choice(kernel, params, "explicit"))
        self._run(dev, found, a, b, out)
        return found[-1]

    def _prepare(self, dev, a, b, algorithm="auto", choice=None, repack=False):
        """What :meth:`_run` takes: ``(steps, scratch bytes, a_off, b_off, plan)``, compiled on GPU
        ``dev``; with ``repack``, :data:`_REPACK` (nothing compiled) where the plan says the tensor
        cores would read these operands once copied (:attr:`~polymm.kernels.planner.Plan.relayout`:
        the planner's tensor-core entry decided it, in the same pass that planned them)."""
        with self._cp.cuda.Device(dev):
            made, a_off, b_off = self.plan(a, b, algorithm, choice)
            if repack and made.relayout:
                return _REPACK
            return self._steps(dev, made), made.scratch, a_off, b_off, made

    def _run(self, dev, found, a, b, out) -> None:
        if found is _REPACK:  # the copies have a plan of their own
            with self._cp.cuda.Device(dev):
                a, b = self._repacked(a, b)
            found = self._planned(dev, a, b, "auto")
        isz = a.dtype.itemsize
        # Buffers as raw device pointers (Python ints: np.uint64 costs 0.4 us each, and only CuPy's
        # own launches need it), A and B at the 16-byte-aligned address their plan's element
        # offsets count from, C at its first element, then scratch.
        self._launch_plan(dev, found, [_address(a) - found[2] * isz, _address(b) - found[3] * isz, _address(out)])

    def replayable(self, a, b, out, algorithm: str):
        """``launch(address of A, of B, of C)``: this product's plan for other operands laid out
        as ``a``, ``b`` and ``out`` (addresses congruent modulo 16), or None where a call must plan
        again (operands copied first, textures).  The core's short path replays a product of
        CuPy arrays or PyTorch tensors seen before this way (``polymm.dispatch._replay_key``)."""
        if algorithm == "image" or a.offset or b.offset or out.offset or _misaligned(a, b, out):
            return None
        dev = a.buffer.data.device_id
        found = self._planned(dev, a, b, algorithm, repack=True)
        if found is _REPACK:
            return None
        isz = a.dtype.itemsize
        a_shift, b_shift = found[2] * isz, found[3] * isz

        def launch(pa: int, pb: int, pc: int) -> None:
            self._launch_plan(dev, found, [pa - a_shift, pb - b_shift, pc])

        return launch

    def _launch_plan(self, dev, found, buffers) -> None:
        """Enqueue plan ``found`` on ``buffers`` (A, B, C addresses; scratch is appended)."""
        steps, scratch, _, _, made = found
        if self._runtime.getDevice() == dev:  # the usual case: no device switch to pay for
            held = self._scratch(dev, scratch, buffers)
            self._enqueue(steps, buffers)
        else:
            with self._cp.cuda.Device(dev):
                held = self._scratch(dev, scratch, buffers)
                self._enqueue(steps, buffers)
        del held  # only now may the scratch go back (stream-ordered) to CuPy's pool
        self.last_plan = made.choice

    def _scratch(self, dev, sizes, buffers):
        """Append the addresses of scratch buffers of ``sizes`` bytes to ``buffers``; returns the
        array holding them.  Up to :data:`_SCRATCH_KEPT` bytes, one block per device, stream and
        thread is reused from call to call: the stream orders the calls that use it, and no two
        threads share one."""
        if not sizes:
            return None
        offsets, end = [], 0
        for nbytes in sizes:
            offsets.append(end)
            end += -(-nbytes // 256) * 256
        cp = self._cp
        if end > _SCRATCH_KEPT:
            block = cp.empty(end, dtype=np.uint8)
        else:
            key = (dev, cp.cuda.get_current_stream().ptr, threading.get_ident())
            block = self._scratch_blocks.get(key)
            if block is None or block.nbytes < end:
                if len(self._scratch_blocks) >= _SCRATCH_BLOCKS:
                    self._scratch_blocks.clear()
                block = self._scratch_blocks[key] = cp.empty(max(end, 1 << 20), dtype=np.uint8)
        base = block.data.ptr
        buffers += [base + offset for offset in offsets]
        return block

    def _enqueue(self, steps, buffers) -> None:
        stream = None
        for step in steps:
            maps = ()
            if step.tma is not None:  # the maps of the last call are kept: encoding costs microseconds
                addresses = tuple(buffers[slot] for slot, _ in step.tma)
                cached = step.maps
                if cached is None or cached[0] != addresses:
                    cached = step.maps = (addresses, _wgmma.tensor_maps(addresses, step.tma))
                maps = cached[1]
            if step.prepared is not None:
                if stream is None:
                    stream = self._cp.cuda.get_current_stream().ptr
                step.prepared(buffers, stream, maps)
                continue
            args = list(step.args)
            for pos, slot in step.buffers:
                args[pos] = np.uint64(buffers[slot])
            step.fn(step.grid, step.block, (*maps, *args), shared_mem=step.smem)


def _external_source(name: str) -> str:
    """The text of a CUDA-only family's kernel: ``wgmma-<tile width>`` (with its rendered
    wrappers), or a file of ``kernels/`` (``tensorcore``, ``dmma``, ``tf32_split``)."""
    if name.startswith("wgmma-"):
        return _wgmma.source(int(name.split("-")[1]))
    return sources.source(name)


def _address(op: Operand) -> int:
    """Device address of element ``[0, 0, 0]`` of operand ``op``."""
    return op.buffer.data.ptr + op.offset * op.dtype.itemsize


def _misaligned(*ops: Operand) -> bool:
    """Whether an operand starts at an address its item size does not divide."""
    return any(_address(op) % op.dtype.itemsize for op in ops)
