"""Which OpenCL devices there are, which one polymm computes on, and what it is.

Every platform's devices are listed; a device that builds no program (a driver can list one)
is passed over, and the default is the one ``POLYMM_OPENCL_DEVICE`` names, else the first GPU,
else the first device. :func:`device_info` describes a device to the shared planner,
:func:`describe_device` to a person (``polymm info``).
"""

from __future__ import annotations

import os
import time
import warnings

from polymm.backend import BackendUnavailable
from polymm.compilation import compiled
from polymm.kernels.params import DeviceInfo

__all__ = ["describe_device", "list_devices", "device_info"]


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


#: device.int_ptr -> (None where it builds, else the first line of its build log; the build log)
_probes: dict = {}

#: The probe program: one line, and a warning in its build log where the compiler targets an x86
#: CPU without AVX-512 (:func:`_vector_bytes`).
_PROBE = (
    "#if defined(__x86_64__) && !defined(__AVX512F__)\n"
    "#warning polymm: no 512-bit vectors\n"
    "#endif\n"
    "__kernel void polymm_probe(__global int *x) { x[0] = 1; }"
)


def _build_failure(device) -> str | None:
    """None when ``device`` compiles a one-line program, else why not (cached per device).

    A driver can list a device and still build nothing: PoCL 3.0's LLVM 14 names a CPU it does
    not know (AMD family 0x1A, Zen 5) ``generic`` and then rejects that name, so every program
    fails with "unknown target CPU 'generic'". Such a device is not offered for computing.
    The probe compiles (clang's front end, which checks the target CPU) and links nothing: a
    whole build in a context of its own cost 0.44-0.46 s of the README snippet's cold start
    on PoCL, the compile alone 0.11 s (2-core Xeon, 2026-12-01, ``scripts/cold_start.py``)."""
    return _probe(device)[0]


def _probe(device) -> tuple[str | None, str]:
    """:data:`_PROBE` compiled for ``device`` once: (why it failed or None, its build log)."""
    import pyopencl as cl

    key = device.int_ptr
    if key not in _probes:
        try:
            start = time.perf_counter()
            context = cl.Context([device])
            with warnings.catch_warnings():  # a driver's chatter on success (Intel's) is not news
                warnings.simplefilter("ignore", cl.CompilerWarning)
                # pyopencl's note that compiling bypasses its binary cache: nothing is cached here
                warnings.filterwarnings("ignore", "Pre-build attribute access", UserWarning)
                program = cl.Program(context, _PROBE).compile(devices=[device])
            compiled("opencl", "int32", "polymm_probe", time.perf_counter() - start)
            _probes[key] = (None, program.get_build_info(device, cl.program_build_info.LOG) or "")
        except cl.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if "error" in line.lower()]
            _probes[key] = (lines[-1] if lines else str(exc).strip().splitlines()[0], "")
    return _probes[key]


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
            "no OpenCL platform with a device was found (pip install pocl-binary-distribution for a CPU device)"
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
        vector_bytes=_vector_bytes(device) if device.type & cl.device_type.CPU else 0,
    )


def _vector_bytes(device) -> int:
    """The widest vector a CPU device's compiler makes of registers: what the device reports,
    except where PoCL says 64 bytes and compiles for a CPU model without AVX-512 (the probe's
    warning): PoCL 3.0's LLVM 14 names an AMD Zen 4 "znver3" while reporting its 16-float
    vectors, and the regblock kernel's 16-wide vectors then abort the whole process in LLVM
    ("Do not know how to scalarize this operator's operand!", 2-core Zen 4, 2026-12-04)."""
    reported = 4 * device.native_vector_width_float
    if reported > 32 and "portable computing language" in device.platform.name.lower():
        if "no 512-bit vectors" in _probe(device)[1]:
            return 32
    return reported
