"""The cliff suite: one fixed matrix of shapes that shows where a backend falls off a cliff.

A backend that is fast on big squares can still be 20x slower than the vendor
library on a matrix-vector product, a batch of tiny matrices or a transposed
view.  ``polymm bench --suite cliffs`` times every case of :data:`CASES` end to
end (``polymm.matmul`` as a user calls it, operands already on the device)
against the backend's reference library in the same process, twice: *interleaved*,
call by call as a user's program runs them (each call meets the threads the other
library's last call left spinning; the cell's ``ratio``, which the floors judge, charges us
too what our calls add to the reference's next ones: a user's program pays for both), and
*alone*, each side in blocks of its own calls (``ratio_alone``: what each can do when
the other's threads sleep), and summarises each backend by its **worst cell** and the
**geometric mean** of its ratios.  :data:`FLOORS` holds the floors the issues set, so the summary can say
whether they hold; they are benchmark results, never test assertions.  GPU backends also run the
grid (:data:`GRID_CLASSES`: every shape class crossed with every dtype and precision mode).

References: NumPy on host backends (``cpu``, OpenCL on a CPU device),
``cupy.matmul`` (cuBLAS, TF32 off) on the same GPU for CuPy backends and for
OpenCL devices that are NVIDIA GPUs, timed with CUDA events for CuPy backends.
"""

from __future__ import annotations

import fnmatch
import math
import os
import platform
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import numpy as np

import polymm
from polymm.backend import CONTRACT_DTYPES, optional_dtypes
from polymm.tools import timing
from polymm.tools.bench import flops
from polymm.shapes import matmul_shape
from polymm.testing.reference import assert_matches, poison, random_array

__all__ = ["Case", "Floor", "CASES", "FLOORS", "Cell", "run", "summarise", "plot", "machine_info", "record"]

FLOAT_DTYPES = ("float32", "float64")
#: The dtypes of the tensor-core cases (GPU backends only). bfloat16 cells run where a reference
#: computes it: on CuPy backends (CuPy arrays of ml_dtypes' bfloat16) against torch.matmul.
TC_DTYPES = ("float16", "bfloat16", "int8", "float64", "complex128")
#: The rest of the contract's dtypes, measured on one square and one skinny case.
OTHER_DTYPES = tuple(str(d) for d in CONTRACT_DTYPES if str(d) not in FLOAT_DTYPES)


@dataclass(frozen=True)
class Case:
    """One product as a user writes it: operand shapes (1-D allowed) and how the operands are laid out.

    ``layout`` is ``"c"``, ``"transposed"`` (both operands are ``.T`` of C arrays),
    ``"fortran"``, ``"negative"`` (rows reversed: negative strides), ``"step"``
    (every other column of a twice-as-wide array), ``"bt"`` (``x1 @ y.T``: only the
    second operand transposed) or ``"at"`` (``y.T @ x2``: only the first).
    """

    name: str
    group: str
    x1: tuple[int, ...]
    x2: tuple[int, ...]
    layout: str = "c"
    dtypes: tuple[str, ...] = FLOAT_DTYPES
    gpu_only: bool = False  # sizes a host backend would spend minutes on
    #: the precision mode of the call (:mod:`polymm.precision`); a reduced one is measured on
    #: CuPy backends only, against cuBLAS with TF32 ("tf32") or in float32 ("tf32x3")
    precision: str = "default"

    @property
    def operand_layouts(self) -> tuple[str, str]:
        """The views of x1 and x2: ``"bt"`` and ``"at"`` transpose one operand, the others both."""
        return {"bt": ("c", "transposed"), "at": ("transposed", "c")}.get(self.layout, (self.layout, self.layout))

    def multiply_adds(self) -> int:
        shape = matmul_shape(self.x1, self.x2)
        return math.prod(shape.batch) * shape.m * shape.n * shape.k


def _sq(n, dtypes=FLOAT_DTYPES, layout="c", name=None, group="square"):
    return Case(name or f"square-{n}", group, (n, n), (n, n), layout, dtypes)


#: The matrix. Every case runs in float32 and float64; the other dtypes run on
#: ``square-256`` and ``n4-2048``. Names are stable: results are compared by name.
CASES: tuple[Case, ...] = (
    *(_sq(n) for n in (32, 64, 128, 255, 512, 1000, 1024, 2048, 4096)),
    _sq(256, FLOAT_DTYPES + OTHER_DTYPES),
    Case("batch-4096x8", "batched", (4096, 8, 8), (4096, 8, 8)),
    Case("batch-4096x16", "batched", (4096, 16, 16), (4096, 16, 16)),
    Case("batch-1024x32", "batched", (1024, 32, 32), (1024, 32, 32)),
    Case("batch-256x64", "batched", (256, 64, 64), (256, 64, 64)),
    Case("broadcast-1000x32", "broadcast", (1000, 32, 32), (32, 32)),
    Case("broadcast-64x64x32", "broadcast", (64, 1, 32, 32), (1, 64, 32, 32)),
    Case("gemv-4096", "matvec", (4096, 4096), (4096,)),
    Case("gevm-4096", "matvec", (4096,), (4096, 4096)),
    Case("n4-4096", "matvec", (4096, 4096), (4096, 4)),
    Case("m4-4096", "matvec", (4, 4096), (4096, 4096)),
    Case("n4-2048", "matvec", (2048, 2048), (2048, 4), dtypes=FLOAT_DTYPES + OTHER_DTYPES),
    Case("deep-k-128", "deep-k", (128, 65536), (65536, 128)),
    Case("deep-k-16", "deep-k", (16, 65536), (65536, 16)),
    Case("outer-k32", "outer", (4096, 32), (32, 4096)),
    Case("outer-k1", "outer", (2048, 1), (1, 2048)),
    _sq(1024, layout="transposed", name="transposed-1024", group="views"),
    _sq(1024, layout="fortran", name="fortran-1024", group="views"),
    _sq(1024, layout="negative", name="negative-1024", group="views"),
    _sq(1024, layout="step", name="step-1024", group="views"),
    # GPU only: the dtypes tensor cores serve (float16 with float32 accumulation, int8 with int32,
    # float64 and complex128 on FP64 tensor cores), up to 8192, one skinny and one batched case
    *(
        Case(f"tc-square-{n}", "tensor-core", (n, n), (n, n), dtypes=TC_DTYPES, gpu_only=True)
        for n in (1024, 2048, 4096, 8192)
    ),
    Case("tc-skinny", "tensor-core", (8192, 4096), (4096, 256), dtypes=TC_DTYPES, gpu_only=True),
    Case("tc-batched", "tensor-core", (64, 512, 512), (64, 512, 512), dtypes=TC_DTYPES, gpu_only=True),
    # GPU only: float32 in the precision modes, squares, B as stored and as a transposed view
    *(
        Case(f"{mode}-square-{n}", "precision", (n, n), (n, n), dtypes=("float32",), gpu_only=True, precision=mode)
        for mode in ("tf32", "tf32x3")
        for n in (1024, 2048, 4096, 8192)
    ),
    *(
        Case(f"{mode}-bt-4096", "precision", (4096, 4096), (4096, 4096), "bt", ("float32",), True, mode)
        for mode in ("tf32", "tf32x3")
    ),
)


#: The GPU grid (issue 30): every shape class crossed with every dtype of the contract and every
#: precision mode, none chosen by hand. A class has two sizes, so that every call takes some 50 us
#: or more of the reference on an H100: one for the dtypes cuBLAS computes on its SIMT cores or
#: its FP64 tensor cores (or CuPy without BLAS: the integer dtypes), one, larger, for those its
#: tensor cores run at ten times that rate (float16, bfloat16, int8, uint8, float32 in "tf32" and
#: "tf32x3"). ``(class, group, layout, (x1, x2) of the first size, (x1, x2) of the second)``.
GRID_CLASSES = (
    ("square", "square", "c", ((2048, 2048), (2048, 2048)), ((4096, 4096), (4096, 4096))),
    ("square-odd", "square", "c", ((2043, 2043), (2043, 2043)), ((4093, 4093), (4093, 4093))),
    ("square-4mod8", "square", "c", ((2044, 2044), (2044, 2044)), ((4092, 4092), (4092, 4092))),
    ("tall", "tall-wide", "c", ((32768, 1024), (1024, 256)), ((65536, 2048), (2048, 512))),
    ("wide", "tall-wide", "c", ((256, 1024), (1024, 32768)), ((512, 2048), (2048, 65536))),
    ("deep-k", "deep-k", "c", ((256, 65536), (65536, 256)), ((256, 524288), (524288, 256))),
    ("batch-tiny", "batched", "c", ((65536, 8, 8), (65536, 8, 8)), ((65536, 8, 8), (65536, 8, 8))),
    ("batch-small", "batched", "c", ((4096, 32, 32), (4096, 32, 32)), ((8192, 64, 64), (8192, 64, 64))),
    ("batch-mid", "batched", "c", ((64, 512, 512), (64, 512, 512)), ((64, 1024, 1024), (64, 1024, 1024))),
    ("broadcast", "broadcast", "c", ((64, 512, 512), (512, 512)), ((64, 1024, 1024), (1024, 1024))),
    ("matvec", "matvec", "c", ((8192, 8192), (8192,)), ((16384, 16384), (16384,))),
    ("vecmat", "matvec", "c", ((8192,), (8192, 8192)), ((16384,), (16384, 16384))),
    ("outer", "outer", "c", ((8192, 32), (32, 8192)), ((16384, 64), (64, 16384))),
    *(
        (f"view-{layout}", "views", layout, ((2048, 2048), (2048, 2048)), ((4096, 4096), (4096, 4096)))
        for layout in ("at", "bt", "transposed", "fortran", "negative", "step")
    ),
)
#: The dtypes (and precision modes) the grid runs at the second, larger size of each class.
GRID_FAST = ("float16", "bfloat16", "int8", "uint8")
GRID_MODES = ("tf32", "tf32x3")


def _grid() -> tuple[Case, ...]:
    """``grid-<class>`` (every contract dtype not in :data:`GRID_FAST`), ``grid-fast-<class>``
    (those) and ``grid-<mode>-<class>`` (float32 in each precision mode), GPU backends only."""
    slow = tuple(str(d) for d in CONTRACT_DTYPES if str(d) not in GRID_FAST)
    cases = []
    for name, group, layout, (s1, s2), (f1, f2) in GRID_CLASSES:
        cases.append(Case(f"grid-{name}", group, s1, s2, layout, slow, True))
        cases.append(Case(f"grid-fast-{name}", group, f1, f2, layout, GRID_FAST, True))
        for mode in GRID_MODES:
            cases.append(Case(f"grid-{mode}-{name}", group, f1, f2, layout, ("float32",), True, mode))
    return tuple(cases)


CASES += _grid()


@dataclass(frozen=True)
class Floor:
    """What an issue asks of a backend: over cells of ``dtypes`` whose reference takes at least
    ``min_ref_seconds``, the worst ratio and the geometric mean of the ratios."""

    dtypes: tuple[str, ...]
    min_ref_seconds: float
    worst: float
    geomean: float
    source: str


#: Floors by backend (and device kind for OpenCL); read by :func:`summarise`.
FLOORS: dict[str, Floor] = {
    "cpu": Floor(FLOAT_DTYPES, 50e-6, 0.8, 1.0, "issue 8: CPU backend without cliffs"),
    "opencl:cpu": Floor(("float32",), 0.5e-3, 0.5, 0.8, "issue 8: OpenCL on PoCL"),
    "opencl:gpu": Floor(("float32",), 0.0, 0.85, 0.85, "issue 9: OpenCL on an NVIDIA GPU vs cuBLAS"),
    "cuda": Floor(
        ("float32", "float64", "complex64", "complex128"),
        0.0,
        0.9,
        0.9,
        "issue 9: CUDA vs cuBLAS (float64/complex128 SIMT cells reported only)",
    ),
}


@dataclass
class Cell:
    """One measured (backend, case, dtype); times are the best per-call seconds.

    ``seconds``, ``ref_seconds``, ``ratio``, the spreads and ``samples``: calls interleaved one by
    one with the reference (:func:`polymm.tools.timing.alternating`, ``timing`` =
    ``"interleaved"``); the ``*_alone`` figures: each side in blocks of its own calls
    (:func:`polymm.tools.timing.interleaved`). ``ref_added``: how much longer the reference's
    median call right after one of ours took than its median call alone (our threads spinning
    on its cores); ``ratio`` is the program's: ``ref_seconds / (seconds + ref_added)``, with
    ``ref_seconds`` the reference's best call interleaved or alone, whichever is faster (a record
    without ``ref_added``, from before ce6fa4a of 2026-12-04, took the interleaved figures as they were).
    Records written before the two timings were told apart have only the block figure, as
    ``ratio``, and no ``timing``."""

    backend: str
    case: str
    group: str
    dtype: str
    shape: str
    layout: str
    ratio: float
    gflops: float
    ref_gflops: float
    seconds: float
    ref_seconds: float
    reference: str
    noisy: bool
    spread: float
    ref_spread: float
    samples: int
    correct: bool
    error: str | None = None
    clblast_ratio: float | None = None
    precision: str = "default"
    timing: str = "interleaved"
    ratio_alone: float | None = None
    seconds_alone: float | None = None
    ref_seconds_alone: float | None = None
    ref_added: float | None = None


# -- operands ------------------------------------------------------------------------------------


def _base_shape(shape, layout):
    if len(shape) < 2 or layout in ("c", "fortran", "negative"):
        return shape
    if layout == "transposed":
        return shape[:-2] + (shape[-1], shape[-2])
    if layout == "step":
        return shape[:-1] + (2 * shape[-1],)
    raise ValueError(f"unknown layout {layout!r}")


def _cupy():
    """CuPy if it is imported (a CuPy backend is measured), else None."""
    return sys.modules.get("cupy")


def _view(xp, base, layout):
    """``base`` seen with ``layout`` (NumPy and CuPy arrays alike; torch tensors, the bfloat16 and
    TF32 references, have no ``asfortranarray`` and no negative strides: their Fortran order is
    made by two transposes, their reversed rows by ``torch.flip``, a reversed copy)."""
    if base.ndim < 2 or layout == "c":
        return base
    if layout == "transposed":
        return xp.swapaxes(base, -1, -2)
    if layout == "fortran":
        if not hasattr(xp, "asfortranarray"):  # torch
            return base.transpose(-1, -2).contiguous().transpose(-1, -2)
        return xp.asfortranarray(base)
    if layout == "negative":
        if hasattr(xp, "flip") and not hasattr(xp, "asfortranarray"):  # torch
            return xp.flip(base, (-2,))
        return base[..., ::-1, :]
    if layout == "step":
        return base[..., ::2]
    raise ValueError(f"unknown layout {layout!r}")


def _sampled_rows(x1, x2, result, rng, rows=8):
    """A few rows of the product, so the check stays cheap on 4096-sized and deep-K cells."""
    if x1.ndim < 2:
        return x1, x2, result
    m = x1.shape[-2]
    pick = np.unique(rng.integers(0, m, size=min(m, rows)))
    out_axis = -2 if x2.ndim >= 2 else -1
    return x1[..., pick, :], x2, np.take(result, pick, axis=out_axis)


# -- references and clocks -----------------------------------------------------------------------


def _opencl_gpu_vendor(impl) -> str | None:
    """The vendor of the OpenCL device that backend ``impl`` puts NumPy operands on, when it is a
    GPU; else None (asked through the backend's own ``from_numpy``, not its internals)."""
    try:
        import pyopencl as cl

        device = impl.from_numpy(np.ones(1, np.float32)).queue.device
        return device.vendor.lower() if device.type & cl.device_type.GPU else None
    except Exception:  # noqa: BLE001 - no OpenCL here: not a GPU
        return None


def floor_key(name: str, impl) -> str:
    """Which :data:`FLOORS` entry applies to backend ``name``."""
    if impl.array_library == "pyopencl":
        return "opencl:gpu" if _opencl_gpu_vendor(impl) else "opencl:cpu"
    return name


class _Backend:
    """A backend under test with its reference: operand placement, calls and clocks."""

    def __init__(self, name):
        self.name = name
        self.impl = impl = polymm.get_backend(name)
        gpu_vendor = _opencl_gpu_vendor(impl) if impl.array_library == "pyopencl" else None
        self.on_gpu = impl.array_library == "cupy" or bool(gpu_vendor)
        if impl.array_library == "cupy":
            import cupy

            if os.environ.get("CUPY_TF32", "0") != "0":
                raise RuntimeError("the cliff suite compares with cuBLAS in float32: unset CUPY_TF32")
            self.ref_name, self.ref_xp, clock = "cupy.matmul", cupy, timing.cuda_clock()
            self.ours_clock = self.ref_clock = clock
        elif "nvidia" in (gpu_vendor or ""):
            import cupy

            sync = cupy.cuda.get_current_stream().synchronize
            self.ref_name, self.ref_xp = "cupy.matmul", cupy
            self.ours_clock, self.ref_clock = timing.host_clock(self._finish_queue), timing.host_clock(sync)
        else:
            self.ref_name, self.ref_xp = "numpy.matmul", np
            ours = self._finish_queue if impl.array_library == "pyopencl" else impl.synchronize
            self.ours_clock, self.ref_clock = timing.host_clock(ours), timing.host_clock(lambda: None)

    def _finish_queue(self):
        """OpenCL: wait for everything on the operands' queue, whatever the backend tracks itself."""
        self.queue.finish()

    def _torch_for(self, dtype) -> bool:
        """bfloat16 on a CuPy backend: CuPy has no bfloat16 matmul, so the reference is PyTorch's."""
        return self.impl.array_library == "cupy" and np.dtype(dtype).name == "bfloat16"

    def can_measure(self, dtype) -> bool:
        """Whether the reference computes ``dtype`` here (bfloat16: PyTorch with CUDA, on CuPy
        backends; CuPy, the reference of the OpenCL backend on NVIDIA, has no bfloat16)."""
        if np.dtype(dtype).name != "bfloat16" or self.ref_xp is np:
            return True
        if not self._torch_for(dtype):
            return False
        try:
            import torch
        except ImportError:
            return False
        return torch.cuda.is_available()

    def reference_name(self, dtype, precision="default") -> str:
        if precision == "tf32":
            return "cupy.matmul (TF32)"
        if self._torch_for(dtype):
            return "torch.matmul"
        if self.ref_xp is not np and np.dtype(dtype).kind in "biu":
            return f"{self.ref_name} (no BLAS: CuPy's own integer kernel)"  # marked: a slow reference
        return self.ref_name

    def reference_call(self, dtype, precision, a, b):
        """The reference product of ``a`` and ``b``: for precision ``"tf32"`` cuBLAS with TF32
        compute (CuPy's compute type for float32, set around the call), else the plain one
        (``"tf32x3"`` promises float32's accuracy: its reference is cuBLAS in float32)."""
        xp = self.reference_xp(dtype)
        if precision != "tf32":
            return lambda: xp.matmul(a, b)
        from cupy._core import _routines_linalg as cublas_types

        def tf32():
            old = cublas_types.get_compute_type(xp.float32)
            cublas_types.set_compute_type(xp.float32, cublas_types.COMPUTE_TYPE_TF32)
            try:
                return xp.matmul(a, b)
            finally:
                cublas_types.set_compute_type(xp.float32, old)

        return tf32

    def reference_xp(self, dtype):
        if self._torch_for(dtype):
            import torch

            return torch
        return self.ref_xp

    def device(self, base):
        """``base`` (host) on the device, as our operands' array type. bfloat16 travels as its
        16-bit words (CuPy has no bfloat16 of its own) and is viewed as ml_dtypes' again."""
        if self._torch_for(base.dtype):
            return self.impl.from_numpy(np.ascontiguousarray(base).view(np.int16)).view(base.dtype)
        return self.impl.from_numpy(base)

    def host(self, x) -> np.ndarray:
        if self._torch_for(x.dtype):
            return self.impl.to_numpy(x.view(np.int16)).view(x.dtype)
        return self.impl.to_numpy(x)

    def ours(self, base, layout):
        """Our operand: CuPy views are made on the device; others are uploaded as host views."""
        if self.impl.array_library == "cupy":
            return _view(self.ref_xp, self.device(base), layout)
        operand = self.impl.from_numpy(_view(np, base, layout))
        self.queue = getattr(operand, "queue", None)  # OpenCL: the queue every call of this cell runs on
        return operand

    def reference(self, base, layout):
        if self._torch_for(base.dtype):  # the same 16-bit words, as a PyTorch bfloat16 tensor
            import torch

            words = torch.from_numpy(np.ascontiguousarray(base).view(np.int16)).to("cuda")
            return _view(torch, words.view(torch.bfloat16), layout)
        return _view(self.ref_xp, self.ref_xp.asarray(base), layout)


# -- measuring -----------------------------------------------------------------------------------


def _clblast_ratio(backend, a, b, seconds, budget):
    """CLBlast's best time over ours (``seconds``, the cell's best) on the same OpenCL arrays.

    Plain 2-D float products, where pyclblast exists. Both sides are OpenCL work on one queue, so
    no BLAS thread pool is left spinning between them, and CLBlast is timed on its own (a warm-up
    call, then calls until ``budget`` is spent, at least one): its slow float64 kernels on PoCL
    (seconds per call at 2048) would otherwise take most of the suite's time.
    """
    if backend.impl.array_library != "pyopencl" or a.ndim != 2 or b.ndim != 2:
        return None
    if a.dtype.kind != "f" or a.dtype.itemsize < 4 or not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    try:
        import pyclblast
        import pyopencl.array as cl_array
    except ImportError:
        return None
    m, k = a.shape
    n = b.shape[1]
    c = cl_array.empty(a.queue, (m, n), a.dtype)
    clock = timing.host_clock(a.queue.finish)

    def call():
        pyclblast.gemm(a.queue, m, n, k, a, b, c, a_ld=k, b_ld=n, c_ld=n)

    first = clock(call, 1)
    inner = max(1, int(0.01 / first))
    samples = [clock(call, inner)]
    while len(samples) * inner * first < budget:
        samples.append(clock(call, inner))
    return min(samples) / seconds


def measure_cell(backend: _Backend, case: Case, dtype: str, rng, budget=0.8, operands=None) -> Cell:
    """Check one cell's answer (into a poisoned ``out``, sampled rows), then time it alone (blocks of
    each side's calls) and interleaved (call by call), half the budget each.  ``operands``: a dict
    that keeps the random host operands for the next cells of the same shape and dtype."""
    dt = np.dtype(dtype)
    layouts = case.operand_layouts
    host = [
        _random_operand(rng, _base_shape(s, lay), dt, which, operands)
        for which, (s, lay) in enumerate(zip((case.x1, case.x2), layouts))
    ]
    a, b = (backend.ours(h, lay) for h, lay in zip(host, layouts))
    ra, rb = (backend.reference(h, lay) for h, lay in zip(host, layouts))
    correct, error, warm = True, None, None
    mode = case.precision
    try:
        out = backend.device(poison(matmul_shape(case.x1, case.x2).result, dt))
        # timed: for long cells also polymm's warm-up (see below)
        warm = backend.ours_clock(lambda: polymm.matmul(a, b, backend=backend.name, out=out, precision=mode), 1)
        result = backend.host(out)
        _check(host, layouts, result, dt, rng, mode)
    except Exception as exc:  # noqa: BLE001 - a wrong or failing cell is reported, not raised
        correct, error = False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    ours = (lambda: polymm.matmul(a, b, backend=backend.name, precision=mode), backend.ours_clock)
    ref = (backend.reference_call(dt, mode, ra, rb), backend.ref_clock)
    # The reference's warm-up; polymm's is its checked call above where the cell is long for the
    # reference too (else that call may have been mostly a kernel compile, a poor estimate).
    ref_warm = backend.ref_clock(ref[0], 1)
    if warm is None or warm < 1.0 or ref_warm < 0.1:
        warm = None
    (alone, ref_alone), _ = timing.interleaved(ours, ref, budget / 2, warm=(warm, ref_warm))
    (timed, ref_timed), rounds = timing.alternating(ours, ref, budget / 2, warm=(alone.best, ref_alone.best))
    best, median, ref_best, ref_median = timed.best, timed.median, ref_timed.best, ref_timed.median
    # The program's time, not our call's alone: what our calls add to the reference's next call (its
    # typical call right after ours against alone: threads of ours left spinning on its cores) is ours
    # too, and a reference slowed by us does not make us look fast.
    added = max(0.0, ref_median - ref_alone.median)
    spread, ref_spread = median / best, ref_median / ref_best
    ref_best = min(ref_best, ref_alone.best)
    ops = flops(case.multiply_adds(), 1, 1, dt)
    return Cell(
        backend=backend.name,
        case=case.name,
        group=case.group,
        dtype=dtype,
        shape=f"{case.x1} @ {case.x2}".replace(",)", ")"),
        layout=case.layout,
        ratio=ref_best / (best + added),
        gflops=ops / best / 1e9,
        ref_gflops=ops / ref_best / 1e9,
        seconds=best,
        ref_seconds=ref_best,
        reference=backend.reference_name(dt, mode),
        noisy=spread > 1.25 or ref_spread > 1.25,
        spread=spread,
        ref_spread=ref_spread,
        samples=rounds,
        correct=correct,
        error=error,
        clblast_ratio=_clblast_ratio(backend, a, b, alone.best, budget / 2),
        precision=mode,
        ratio_alone=ref_alone.best / alone.best,
        seconds_alone=alone.best,
        ref_seconds_alone=ref_alone.best,
        ref_added=added,
    )


def _random_operand(rng, shape, dt, which, operands):
    """A random host operand, drawn once per (shape, dtype, side) when ``operands`` keeps them: the
    grid's classes share their sizes, and drawing a 4096-square of floats takes longer than timing
    a cell."""
    if operands is None:
        return random_array(rng, shape, dt)
    key = (shape, dt.str, which)
    if key not in operands:
        operands[key] = random_array(rng, shape, dt)
    return operands[key]


def _check(host, layouts, result, dt, rng, precision="default"):
    x1, x2 = (_view(np, h, lay) for h, lay in zip(host, layouts))
    s1, s2, sr = _sampled_rows(x1, x2, result, rng)
    assert_matches(sr, s1, s2, dt, precision)


def select(cases=None, dtypes=None) -> list[tuple[Case, str]]:
    """(case, dtype) pairs, filtered by shell-style name patterns and dtype names."""
    patterns = [p.strip() for p in cases.split(",")] if cases else ["*"]
    chosen = []
    for case in CASES:
        if any(fnmatch.fnmatchcase(case.name, p) for p in patterns):
            for dtype in case.dtypes:
                if dtypes is None or dtype in dtypes:
                    chosen.append((case, dtype))
    if not chosen:
        raise ValueError(
            f"no cliff-suite case matches {cases!r} / dtypes {dtypes}; cases are: {', '.join(c.name for c in CASES)}"
        )
    return chosen


def run(names, cases=None, dtypes=None, budget=0.8, progress=None, seed=2026, on_cell=None) -> list[Cell]:
    """Measure the selected cells on every backend in ``names``; ``on_cell(cell)`` hears of each as it ends."""
    pairs = select(cases, dtypes)
    known = {d.name for d in CONTRACT_DTYPES + optional_dtypes()}
    cells = []
    task = progress.add_task("cliff suite", total=len(pairs) * len(names)) if progress else None
    for name in names:
        backend = _Backend(name)
        rng = np.random.default_rng(seed)
        operands: dict = {}  # one backend's cells share their host operands (never written)
        for case, dtype in pairs:
            if (case.gpu_only and not backend.on_gpu) or (
                case.precision != "default" and backend.ref_xp is not _cupy()
            ):
                if progress:
                    progress.advance(task)
                continue
            if progress:
                progress.update(task, description=f"{name} {case.name} {dtype}")
            if dtype not in known or not backend.can_measure(dtype):
                continue  # bfloat16 without ml_dtypes, or without a reference that computes it
            try:
                backend.impl.check_dtype(np.dtype(dtype), None)
            except TypeError:
                continue  # a device that cannot compute this dtype (no fp64): not a cell
            except Exception:  # noqa: BLE001 - backends that need a real operand to decide
                pass
            cells.append(measure_cell(backend, case, dtype, rng, budget, operands))
            if on_cell:
                on_cell(cells[-1])
            if progress:
                progress.advance(task)
    return cells


def format_ratio(ratio: float, unit: str = "x") -> str:
    """Two decimals, three where that would print 0.00 (a 0.004x cliff is not a 0.00x one)."""
    if ratio >= 10:
        return f"{ratio:.0f}{unit}"
    return f"{ratio:.3f}{unit}" if ratio < 0.1 else f"{ratio:.2f}{unit}"


def _geomean(values):
    return float(math.exp(sum(math.log(v) for v in values) / len(values))) if values else float("nan")


def _worst(cells):
    worst = min(cells, key=lambda c: c.ratio)
    found = {
        "worst": worst.ratio,
        "worst_case": f"{worst.case} {worst.dtype}",
        "geomean": _geomean([c.ratio for c in cells]),
        "cells": len(cells),
    }
    alone = [c for c in cells if c.ratio_alone]
    if alone:  # the same over the figures of each side timed alone (reported; the floors judge ``ratio``)
        least = min(alone, key=lambda c: c.ratio_alone)
        found["alone"] = {
            "worst": least.ratio_alone,
            "worst_case": f"{least.case} {least.dtype}",
            "geomean": _geomean([c.ratio_alone for c in alone]),
        }
    return found


def summarise(cells: list[Cell], keys: dict | None = None) -> dict:
    """Per backend: worst cell and geometric mean over all cells, and against its :data:`FLOORS` entry
    (``keys``: backend -> floor key, for records summarised where the backend is not installed)."""
    summary = {}
    for name in dict.fromkeys(c.backend for c in cells):
        mine = [c for c in cells if c.backend == name]
        entry = _worst(mine)
        entry["wrong"] = [f"{c.case} {c.dtype}: {c.error}" for c in mine if not c.correct]
        entry["noisy"] = [f"{c.case} {c.dtype}" for c in mine if c.noisy]
        key = (keys or {}).get(name) or floor_key(name, polymm.get_backend(name))
        floor = FLOORS.get(key)
        if floor is not None:
            gated = [
                c
                for c in mine
                if c.dtype in floor.dtypes and c.ref_seconds >= floor.min_ref_seconds and c.precision == "default"
            ]
            if gated:
                f = _worst(gated)
                f.update(
                    floor=asdict(floor), key=key, holds=f["worst"] >= floor.worst and f["geomean"] >= floor.geomean
                )
                entry["floor"] = f
        summary[name] = entry
    return summary


def machine_info(names) -> dict:
    """Where the figures come from: host, load, library versions, threads and devices."""
    info = {
        "host": platform.node(),
        "platform": platform.platform(),
        "processor": _cpu_model(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "polymm": polymm.__version__,
        "threads": {
            k: os.environ.get(k)
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS")
        },
        "environment": {
            k: v
            for k, v in sorted(os.environ.items())
            # the thread pools' wait policies decide how the interleaved timings fare (issue 36)
            if k.startswith(
                ("POLYMM_", "CUPY_TF32", "MALLOC_", "OPENBLAS_THREAD_TIMEOUT", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
            )
        },
        "devices": {n: polymm.get_backend(n).devices() for n in names},
    }
    try:
        import threadpoolctl

        info["blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for p in threadpoolctl.threadpool_info()
            if p.get("user_api") == "blas"
        ]
    except ImportError:
        pass
    return info


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def record(suite: str, names, command: str, **body) -> dict:
    """A benchmark record as ``--json FILE`` writes it: the suite, when, the command and the
    machine (:func:`machine_info`), then ``body``."""
    return {
        "suite": suite,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "machine": machine_info(names),
        **body,
    }


def report(cells, names, command: str) -> dict:
    """The JSON document ``--json FILE`` writes."""
    return record("cliffs", names, command, cells=[asdict(c) for c in cells], summary=summarise(cells))


def plot(document: dict, path: str) -> None:
    """A heatmap per backend: cases down, dtypes across, colour = log2 ratio to the reference."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import TwoSlopeNorm
    except ImportError as exc:
        raise SystemExit(f"--plot needs matplotlib ({exc}); pip install matplotlib") from None
    cells = document["cells"]
    names = list(dict.fromkeys(c["backend"] for c in cells))
    cases = list(dict.fromkeys(c["case"] for c in cells))
    order = FLOAT_DTYPES + OTHER_DTYPES + ("bfloat16",)
    dtypes = [d for d in order if any(c["dtype"] == d for c in cells)]
    fig, axes = plt.subplots(
        1,
        len(names),
        figsize=(1.0 + 0.62 * len(dtypes) * len(names) + 2.2 * len(names), 1.2 + 0.3 * len(cases)),
        squeeze=False,
    )
    norm = TwoSlopeNorm(vmin=-4.0, vcenter=0.0, vmax=2.0)
    image = None
    for ax, name in zip(axes[0], names):
        grid = np.full((len(cases), len(dtypes)), np.nan)
        for c in cells:
            if c["backend"] == name:
                grid[cases.index(c["case"]), dtypes.index(c["dtype"])] = c["ratio"]
        image = ax.imshow(np.log2(grid), cmap="RdYlGn", norm=norm, aspect="auto")
        for (i, j), value in np.ndenumerate(grid):
            if np.isfinite(value):
                ax.text(j, i, format_ratio(value, "").strip(), ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(dtypes)), dtypes, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(cases)), cases, fontsize=8)
        s = document["summary"].get(name, {})
        reference = next(c["reference"] for c in cells if c["backend"] == name)
        ax.set_title(
            f"{name} vs {reference}, {document['date'][:10]}\n"
            f"worst {format_ratio(s['worst'])}, geomean {format_ratio(s['geomean'])}",
            fontsize=9,
        )
    bar = fig.colorbar(image, ax=axes[0].tolist(), shrink=0.6, ticks=[-4, -3, -2, -1, 0, 1, 2])
    bar.ax.set_yticklabels(["1/16", "1/8", "1/4", "1/2", "1", "2", "4"])
    bar.set_label("speed / reference speed")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
