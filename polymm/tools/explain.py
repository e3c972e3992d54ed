"""What a product would run, and why: ``polymm explain`` and :func:`explain`.

A backend that can explain itself has ``explain(a, b, out, algorithm) ->
dict`` (3-D operands on its device, as its ``matmul`` takes them):

* GPU backends (``cuda``, ``opencl``): ``{"device": DeviceInfo, "plan":
  polymm.kernels.planner.Plan, "compiled": [per launch: {"registers",
  "local_mem", "private_mem"}]}`` -- registers as the compiler reports them
  (CuPy's ``num_regs``; OpenCL reports none), local memory per work-group;
* the CPU backend: ``{"path": ..., "reason": ..., "blocking": Blocking | None,
  "threads": n}``.

This module adds what follows from those on any device: occupancy per
compute unit and its limiting factor, arithmetic intensity, the roofline
bound on devices of :data:`PEAKS`, and (``run=True``) the measured time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..precision import current as current_precision

__all__ = ["explain", "Explanation", "occupancy", "PEAKS", "MODEL_DEVICES"]

#: Peak rates by device-name substring (first match wins): bytes/s of DRAM
#: bandwidth and FLOP/s per arithmetic (SIMT unless named ``*-tensor``; int8's
#: are operations/s), from the vendors' data sheets (dense, boost clock).
#: Measured on the H100 here (shared/gpu/README.md): cuBLAS float32 49-51
#: TFLOP/s, float64 (tensor cores) 59.5, float16 623; device-to-device copy
#: about 3.0 TB/s.
_HOPPER_SXM = {
    "float32": 66.9e12,
    "float64": 33.5e12,
    "float16-tensor": 989e12,
    "tf32-tensor": 495e12,
    "float64-tensor": 66.9e12,
    "int8-tensor": 1979e12,
}
PEAKS = {
    "H100 PCIe": {
        "bandwidth": 2.0e12,
        "float32": 51.2e12,
        "float64": 25.6e12,
        "float16-tensor": 756e12,
        "tf32-tensor": 378e12,
        "float64-tensor": 51.2e12,
        "int8-tensor": 1513e12,
    },
    "H100": {"bandwidth": 3.35e12, **_HOPPER_SXM},
    "H200": {"bandwidth": 4.8e12, **_HOPPER_SXM},
}
#: GPUs the planner can be asked about without one (``explain(..., device="H100")``):
#: the limits CUDA reports for them (sm_90: 228 KiB shared memory per SM, 48 KiB
#: static per block, 2048 threads, 32 blocks and 65536 registers per SM).
MODEL_DEVICES = {
    "H100": dict(name="NVIDIA H100 80GB HBM3 (model)", compute_units=132, cc=90),
    "H200": dict(name="NVIDIA H200 (model)", compute_units=132, cc=90),
}
#: Which peak a dtype runs at (complex arithmetic is real arithmetic; float16
#: and integers accumulate in 32-bit SIMT units), and on the tensor cores
#: (float32 there: a TF32 precision mode; complex128: realified, on FP64's).
_PEAK_OF = {"float64": "float64", "complex128": "float64", "int64": "float64", "uint64": "float64"}
_TENSOR_PEAK_OF = {
    "float16": "float16-tensor",
    "bfloat16": "float16-tensor",
    "float32": "tf32-tensor",
    "float64": "float64-tensor",
    "complex128": "float64-tensor",
    "int8": "int8-tensor",
    "uint8": "int8-tensor",
    **{t: "int8-tensor" for t in ("int16", "uint16", "int32", "uint32", "int64", "uint64")},  # byte planes
}


@dataclass
class Explanation:
    """The answer of :func:`explain`: its fields, and ``str()`` as ``polymm explain`` prints it."""

    backend: str
    device: str
    path: str
    reason: str
    launches: list = field(default_factory=list)
    flops: float = 0.0
    bytes: float = 0.0
    bound_seconds: float | None = None
    seconds: float | None = None
    lines: list = field(default_factory=list)
    #: the device-database entries the planner read (:class:`polymm.kernels.devices.Setting`)
    settings: tuple = ()

    @property
    def intensity(self) -> float:
        """FLOP per byte of compulsory traffic (each operand read once, C written once)."""
        return self.flops / self.bytes if self.bytes else math.inf

    def __str__(self) -> str:
        return "\n".join(self.lines)


def occupancy(device, threads: int, local_mem: int, registers: int | None) -> tuple[int, str, dict]:
    """``(work-groups per compute unit, limiting factor, {factor: limit})`` on a GPU ``device``.

    Factors: ``threads`` (work-items per compute unit), ``blocks`` (resident
    groups), ``shared memory`` (local memory per compute unit, 1 KiB more per
    group on NVIDIA), ``registers``
    (per compute unit, allocated per warp of 32 in units of 256).  Unknown
    limits (0 in the :class:`~polymm.kernels.params.DeviceInfo`) are left out.
    """
    limits = {}
    if device.threads_per_cu:
        limits["threads"] = device.threads_per_cu // threads
    if device.blocks_per_cu:
        limits["blocks"] = device.blocks_per_cu
    if device.local_mem_per_cu and local_mem:
        reserved = 1024 if "nvidia" in device.vendor.lower() else 0  # CUDA keeps 1 KiB per block
        limits["shared memory"] = device.local_mem_per_cu // (local_mem + reserved)
    if device.registers_per_cu and registers:
        per_warp = -(-registers * 32 // 256) * 256
        limits["registers"] = device.registers_per_cu // (per_warp * -(-threads // 32))
    if not limits:
        return 0, "unknown", limits
    factor = min(limits, key=limits.get)
    return limits[factor], factor, limits


def _model_device(name: str, dialect: str):
    from ..kernels.params import DeviceInfo

    found = next((v for k, v in MODEL_DEVICES.items() if k.lower() == name.lower()), None)
    if found is None:
        raise ValueError(f"no model of device {name!r}; known: {sorted(MODEL_DEVICES)}")
    return DeviceInfo(
        vendor="NVIDIA",
        kind="gpu",
        dialect=dialect,
        max_work_group=1024,
        local_mem=48 * 1024,
        key=f"model|{name}",
        platform="CUDA" if dialect == "cuda" else "NVIDIA CUDA",
        max_batch=65535 if dialect == "cuda" else 2**31 - 1,
        threads_per_cu=2048,
        blocks_per_cu=32,
        local_mem_per_cu=228 * 1024,
        registers_per_cu=65536,
        **found,
    )


def _nvcc_registers(device, launch, dtype) -> dict:
    """Registers and spills of ``launch`` for ``device`` as ``nvcc -Xptxas -v`` reports them ({} without nvcc)."""
    import re
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    from ..kernels import render

    nvcc = shutil.which("nvcc")
    if nvcc is None or launch.external is not None or device.dialect != "cuda":
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "k.cu")
        src.write_text(render("cuda", launch.kernel, dtype, launch.params, **launch.flags))
        cmd = [
            nvcc,
            "-std=c++17",
            f"-arch=sm_{device.cc}",
            "-cubin",
            "-Xptxas",
            "-v",
            "-o",
            str(Path(tmp, "k")),
            str(src),
        ]
        log = subprocess.run(cmd, capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    return {"registers": int(regs.group(1)) if regs else None, "private_mem": int(stack.group(1)) if stack else 0}


def _shapes(shape1, shape2):
    """(batch, M, N, K) of ``x1 @ x2`` with array-API shape rules (1-D operands included)."""
    from ..shapes import matmul_shape

    for name, shape in (("shape1", shape1), ("shape2", shape2)):
        if hasattr(shape, "shape") or isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            hint = " (an array: pass x.shape and x.dtype)" if hasattr(shape, "shape") else ""
            raise TypeError(f"explain: {name} must be a shape, a tuple of ints; got {type(shape).__name__}{hint}")
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise TypeError(f"explain: {name} must be a shape of non-negative ints; got {tuple(shape)!r}")
    s = matmul_shape(tuple(shape1), tuple(shape2))
    return math.prod(s.batch), s.m, s.n, s.k


def _batch_groups(shape1, shape2):
    """``(shape, groups, sa, sb)``: the product's shape, its batch merged into the fewest axes
    one stride per operand walks (:func:`polymm.shapes.collapse_batch`; more than one: the
    dispatch cannot reach every product with one batch stride), and the C-contiguous operands'
    matrix strides."""
    from ..shapes import c_strides, collapse_batch, matmul_shape, matrix_strides

    s = matmul_shape(tuple(shape1), tuple(shape2))
    sa = matrix_strides(tuple(shape1), c_strides(shape1), len(s.batch), vector_is_row=True)
    sb = matrix_strides(tuple(shape2), c_strides(shape2), len(s.batch), vector_is_row=False)
    groups, _ = collapse_batch(s.batch, sa[:-2], sb[:-2], c_strides(s.batch + (s.m, s.n))[:-2])
    return s, tuple(groups), sa, sb


def _crossed_groups(shape1, shape2) -> tuple[int, int] | None:
    """``(gA, gB)`` where the dispatch runs this broadcast batch (C-contiguous device arrays) as
    one product, gA A's rows stacked and gB B's columns side by side
    (:func:`polymm.dispatch.crossed_along`), else None."""
    from ..dispatch import crossed_along

    s, groups, sa, sb = _batch_groups(shape1, shape2)
    along = crossed_along(s.batch, sa[:2], sb[:2], s.m, s.k, s.n) if groups == s.batch else None
    return None if along is None else (s.batch[along], s.batch[1 - along])


def _peak(device_name: str, dtype: np.dtype, tensor: bool):
    for key, peaks in PEAKS.items():
        if key.lower() in device_name.lower():
            name = _TENSOR_PEAK_OF.get(dtype.name) if tensor else None
            name = name if name in peaks else _PEAK_OF.get(dtype.name, "float32")
            return key, peaks.get(name), peaks["bandwidth"]
    return None, None, None


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _fmt_seconds(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def _params_text(launch) -> str:
    p = launch.params
    if launch.external is not None:
        return f"{launch.external['source']}.cu {' '.join(launch.external['options'])}".strip()
    if p is None:
        return ""
    if launch.kernel in ("tiled", "tiled-dynamic"):
        return f"TS={p.ts}"
    if launch.kernel == "pack" and p.ts == 1:
        return f"TS=1 MR={p.mr} (a column of {p.mr} rows per work-item)"
    if launch.kernel == "pack":
        return f"TS={p.ts} (a {p.ts} x {p.ts} tile per work-item)"
    if launch.kernel == "realify":
        return f"TS={p.ts} (a column of {p.ts} rows of B per work-item)"
    if launch.kernel == "matvec":
        shape = "work-group per rows" if p.use_local else "work-item per rows"
        return f"MR={p.mr} NWG={p.nwg} MDIMC={p.mdimc} ({shape})"
    if launch.kernel == "vecmat":
        return (
            f"MR={p.mr} NWG={p.nwg} NDIMC={p.ndimc} GVW={p.gvw} MDIMC={p.mdimc} KWG={p.kwg} "
            f"({p.ndimc} work-items x {p.gvw} columns along N, {p.mdimc} teams along K, {p.kwg} rows of B in flight each)"
        )
    text = f"MWG={p.mwg} NWG={p.nwg} KWG={p.kwg} MDIMC={p.mdimc} NDIMC={p.ndimc} VW={p.vw}"
    if p.use_local:
        text += f" GVW={p.gvw} PAD={p.pad}"
        text += f" KTEAMS={p.kteams}" if p.kteams > 1 else ""
        text += f" GROUP={p.group}" if p.group > 1 else ""
        text += f" STAGES={p.stages}" if p.stages > 1 else ""
        return text + f" (micro-tile {p.wptm}x{p.wptn})"
    return text + f" MR={p.mr} NR={p.nr or p.wptn} (CPU shape, micro-tile {p.wptm}x{p.wptn})"


def _gpu_lines(report, dtype) -> tuple[list, list, str, str, bool]:
    device, plan = report["device"], report["plan"]
    lines, launches = [], []
    tensor = False
    for i, (launch, compiled) in enumerate(zip(plan.launches, report["compiled"]), 1):
        tensor |= launch.external is not None
        local = launch.local_size
        threads = math.prod(local)
        groups = tuple(g // b for g, b in zip(launch.global_size, local))
        flags = [k.replace("vec_", "") for k, v in sorted(launch.flags.items()) if v and k != "real_b"]
        vector = f", vector loads of {' and '.join(f.upper() for f in flags)}" if flags else ""
        vector += ", complex B read as its real form" if launch.flags.get("real_b") else ""
        lines.append(f"launch {i}  {launch.kernel}  {_params_text(launch)}{vector}")
        lines.append(
            f"          grid {' x '.join(map(str, groups))} work-groups of {' x '.join(map(str, local))} "
            f"= {threads} work-items"
        )
        local_mem = compiled.get("local_mem") or launch.local_mem
        regs = compiled.get("registers")
        regs_text = f"{regs} registers per work-item" if regs else "registers not reported by the compiler"
        private = compiled.get("private_mem")
        private_text = f", {_fmt_bytes(private)} private memory per work-item" if private else ""
        lines.append(f"          local memory {_fmt_bytes(local_mem)} per work-group; {regs_text}{private_text}")
        entry = {"kernel": launch.kernel, "params": launch.params, "grid": groups, "local_size": local}
        entry.update(local_mem=local_mem, registers=regs)
        if device.is_cpu:
            lines.append("          occupancy: a CPU device runs one work-group per core at a time")
        else:
            per_cu, factor, limits = occupancy(device, threads, local_mem, regs)
            if per_cu:
                full = device.threads_per_cu or per_cu * threads
                share = min(1.0, per_cu * threads / full)
                detail = ", ".join(f"{k} {v}" for k, v in limits.items())
                lines.append(
                    f"          occupancy {per_cu} work-groups ({per_cu * threads} work-items) per compute unit "
                    f"= {share:.0%} of {full}, limited by {factor} ({detail})"
                )
                entry.update(occupancy=share, limited_by=factor, groups_per_cu=per_cu)
        launches.append(entry)
    lines += _ranking_lines(plan.ranking)
    lines += _database_lines(plan.settings)
    where = f"{device.name}, {device.compute_units} compute units"
    return lines, launches, where, plan.choice.reason, tensor


def _ranking_lines(ranking) -> list[str]:
    """The kernel families' answers behind an ``auto`` plan: the candidates best first, with the
    cost model's estimate and the terms behind it, then each family that declined and why."""
    if ranking is None:
        return []
    lines = []
    for i, candidate in enumerate(ranking.candidates):
        lines.append(
            f"{'ranked' if i == 0 else '':<10}{i + 1}. {candidate.family}: {candidate.work.describe(ranking.problem.device)}"
        )
    for i, refusal in enumerate(ranking.refusals):
        lines.append(f"{'declined' if i == 0 else '':<10}{refusal.family}: {refusal.reason}")
    return lines


def _database_lines(settings) -> list[str]:
    """The device-database entries behind a plan, one a line (:meth:`Setting.describe`)."""
    return [f"{'database' if i == 0 else '':<10}{s.describe()}" for i, s in enumerate(settings)]


def _cpu_lines(report) -> tuple[list, list, str]:
    lines = []
    blk = report.get("blocking")
    if blk is not None:
        lines.append(
            f"blocking  mc={blk.mc} kc={blk.kc} nc={blk.nc}: A packed in {blk.mc} x {blk.kc} blocks, "
            f"B in {blk.kc} x {blk.nc} panels; micro-tile {blk.mr} x {blk.nr} (mr x nr) in registers"
        )
    lines.append(f"threads   {report['threads']}")
    lines += _database_lines(report.get("settings", ()))
    return lines, [{"kernel": report["path"], "blocking": blk}], "host CPU"


def explain(
    shape1,
    shape2,
    dtype="float32",
    backend: str | None = None,
    algorithm: str = "auto",
    run: bool = False,
    device: str | None = None,
):
    """What ``polymm.matmul`` of C-contiguous operands shaped ``shape1`` and ``shape2``
    would run on ``backend``, and why; ``run=True`` also times it.  Without ``backend``, the one
    ``polymm.matmul`` would choose for NumPy arrays here (scope, ``POLYMM_BACKEND``, defaults).  ``device`` (``"H100"``,
    see :data:`MODEL_DEVICES`; ``backend`` ``"cuda"`` or ``"opencl"``) asks the shared
    planner about a GPU that is not here (registers from ``nvcc`` where it is installed).
    Returns an :class:`Explanation` (``print`` it for the report ``polymm explain`` shows)."""
    from . import bench
    from ..backend import optional_dtypes

    if str(dtype) == "bfloat16":
        optional_dtypes()  # importing ml_dtypes makes "bfloat16" a NumPy name
    dtype = np.dtype(dtype)
    batch, m, n, k = _shapes(shape1, shape2)
    if backend is None:
        from ..registry import selected_backend

        backend = selected_backend(None, "numpy")  # the real selection, not a guess
    if device is not None:
        if backend not in ("cuda", "opencl"):
            raise ValueError(
                f"a model device is planned by the shared GPU layer, for 'cuda' or 'opencl', not {backend!r}"
            )
        if run:
            raise ValueError(f"cannot run on a model of {device}: explain it without run=True")
        from ..kernels import planner
        from ..registry import backend_factory

        backend_factory(backend)  # its module registers its planner entries (CUDA: the tensor cores)
        model = _model_device(device, backend)
        crossed = _crossed_groups(shape1, shape2)  # a GPU backend computes on device arrays
        pb, pm, pn = (1, crossed[0] * m, crossed[1] * n) if crossed else (batch, m, n)
        made = planner.plan(model, dtype, (pb, pm, pn, k), (0, (pm * k, k, 1)), (0, (k * pn, pn, 1)), 0, algorithm)
        compiled = [_nvcc_registers(model, launch, launch.dtype or dtype) for launch in made.launches]
        report = {"device": model, "plan": made, "compiled": compiled}
    else:
        from .. import get_backend
        from ..testing.reference import random_array

        be = get_backend(backend)
        if not hasattr(be, "explain"):
            raise ValueError(f"backend {backend!r} cannot explain its plans (it has no explain method)")
        if algorithm not in be.algorithms and algorithm != "auto":
            raise ValueError(f"backend {backend!r} has no algorithm {algorithm!r}; it has {list(be.algorithms)}")
        from ..arrays import kind_of

        rng = np.random.default_rng(0)
        views = kind_of(be.from_numpy(np.zeros(1, dtype))).views  # host libraries: no crossed product
        crossed = None if views else _crossed_groups(shape1, shape2)
        pb, pm, pn = (1, crossed[0] * m, crossed[1] * n) if crossed else (batch, m, n)
        calls = ()  # a host library's batch that no one stride reaches: one call per outer index
        groups = _batch_groups(shape1, shape2)[1] if views else ()
        if len(groups) > 1:
            calls, pb = (math.prod(groups[:-1]),), groups[-1]
        a = be.from_numpy(random_array(rng, (*calls, pb, pm, k), dtype))
        b = be.from_numpy(random_array(rng, (*calls, pb, k, pn), dtype))
        out = be.from_numpy(np.zeros((*calls, pb, pm, pn), dtype))
        report = be.explain(a, b, out, algorithm) if not calls or hasattr(be, "matmul_groups") else None
        if report is None:  # the core calls matmul once per outer index
            report = be.explain(a[0], b[0], out[0], algorithm)
            report["reason"] = f"{calls[0]} calls of this plan, one per outer batch index; {report['reason']}"
    flops = batch * bench.flops(m, n, k, dtype)
    # each operand read once as it is stored (a broadcast one not once per batch), C written once
    nbytes = float(dtype.itemsize * (math.prod(shape1) + math.prod(shape2) + batch * m * n))
    if "plan" in report:
        body, launches, where, reason, tensor = _gpu_lines(report, dtype)
        path = report["plan"].product.kernel
    else:
        body, launches, where = _cpu_lines(report)
        reason, path, tensor = report["reason"], report["path"], False
    head = f"polymm explain: {tuple(shape1)} @ {tuple(shape2)} {dtype.name} on {backend} ({where})"
    if crossed:
        reason = (
            f"crossed broadcast batch: {crossed[0]} A's rows stacked @ {crossed[1]} B's columns side by "
            f"side (a copy of B), one {crossed[0] * m}x{crossed[1] * n}x{k} product whose blocks are "
            f"copied into place; {reason}"
        )
    lines = [head, f"path      {algorithm} -> {path}: {reason}", *body]
    lines.append(
        f"work      {flops / 1e9:.4g} GFLOP, compulsory traffic {_fmt_bytes(nbytes)}: "
        f"arithmetic intensity {flops / nbytes:.3g} FLOP/byte"
    )
    key, peak, bandwidth = _peak(report["device"].name if "device" in report else "", dtype, tensor)
    if peak and tensor and dtype.name == "float32" and current_precision() == "tf32x3":
        peak /= 3  # float32's accuracy from three TF32 products per multiply-add
    if peak and tensor and dtype.kind in "iu" and dtype.itemsize > 1:
        peak /= dtype.itemsize * (dtype.itemsize + 1) // 2  # a uint8 product per byte pair (byte planes)
    bound = None
    if peak:
        ridge = peak / bandwidth
        bound = max(flops / peak, nbytes / bandwidth)
        kind = "compute-bound" if flops / nbytes >= ridge else "memory-bound"
        op = "OP" if dtype.kind in "biu" else "FLOP"  # integers count operations
        rate = f"T{op}/s"
        lines.append(
            f"roofline  {key}: {peak / 1e12:.3g} {rate}, {bandwidth / 1e12:.3g} TB/s (ridge {ridge:.3g} {op}/byte) "
            f"-> {kind}, at best {_fmt_seconds(bound)} ({flops / bound / 1e12:.3g} {rate})"
        )
    else:
        lines.append("roofline  no peak figures for this device in polymm.tools.explain.PEAKS")
    seconds = None
    if run:
        import polymm

        x1 = be.from_numpy(random_array(rng, tuple(shape1), dtype))
        x2 = be.from_numpy(random_array(rng, tuple(shape2), dtype))
        seconds = bench.median_time(
            lambda: polymm.matmul(x1, x2, backend=backend, algorithm=algorithm), be.synchronize, 5
        )
        share = f", {bound / seconds:.0%} of the roofline bound" if bound else ""
        lines.append(f"measured  {_fmt_seconds(seconds)} per call = {flops / seconds / 1e9:.4g} GFLOP/s{share}")
    device_name = report["device"].name if "device" in report else "host CPU"
    settings = report["plan"].settings if "plan" in report else report.get("settings", ())
    return Explanation(backend, device_name, path, reason, launches, flops, nbytes, bound, seconds, lines, settings)
