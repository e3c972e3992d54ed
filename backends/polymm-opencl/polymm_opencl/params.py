"""Tile parameters per device: a small table keyed by device type/vendor,
overridden by what :mod:`polymm_opencl.tune` measured on this device.

A CPU (PoCL) wants no local memory and one work-item computing a large
register block with wide vectors (the caches do the staging); an NVIDIA GPU
wants 128 x 128 blocks in local memory, 256 work-items each computing 8 x 8.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

import numpy as np

from polymm.kernels import KernelParams, local_mem_bytes

_VECTOR = ("float32", "float64")

#: CPU shape (PM_RB_LOCAL = 0): a work-item computes (mwg/mdimc) x (nwg/ndimc)
#: of C, mr rows at a time with vw-wide vectors along N (PoCL's wheel targets
#: AVX2: 8 floats per register, 16 registers -> 6 x 16 accumulators), K in
#: chunks of kwg (each chunk of B copied to contiguous private memory first:
#: pack_b); the mdimc work-items of a group run on one thread back to
#: back and share the B panel in cache.
CPU_TABLE = {
    "float32": KernelParams(mwg=192, nwg=16, kwg=256, mdimc=4, ndimc=1, vw=8, mr=6, pack_b=True,
                            use_local=False),
    "float64": KernelParams(mwg=192, nwg=8, kwg=256, mdimc=4, ndimc=1, vw=4, mr=6, pack_b=True,
                            use_local=False),
    "other": KernelParams(mwg=4, nwg=8, kwg=1, mdimc=1, ndimc=1, vw=1, mr=1, use_local=False),
}

#: GPU shape (PM_RB_LOCAL = 1), by vendor substring ("" = any GPU).
GPU_TABLE = {
    "nvidia": {  # float32: tuned on an H100 (RESULTS.md), 46.5 TFLOP/s at 4096
        "float32": KernelParams(mwg=128, nwg=128, kwg=8, mdimc=16, ndimc=16, vw=4, gvw=4, pad=0),
        "float64": KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16, vw=2, gvw=2, pad=0),
        "other": KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16, vw=1, gvw=1, pad=1),
    },
    "": {
        "float32": KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16, vw=2, gvw=4, pad=0),
        "float64": KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16, vw=2, gvw=2, pad=0),
        "other": KernelParams(mwg=32, nwg=32, kwg=16, mdimc=16, ndimc=16, vw=1, gvw=1, pad=1),
    },
}


def _is_cpu(device) -> bool:
    import pyopencl as cl

    return bool(device.type & cl.device_type.CPU)


def device_key(device) -> str:
    """Identifies a device in the tuning cache."""
    return f"{device.platform.name.strip()}|{device.name.strip()}|{device.driver_version}"


def tuning_path() -> str:
    """Where :mod:`polymm_opencl.tune` stores measured parameters."""
    override = os.environ.get("POLYMM_OPENCL_TUNING")
    if override:
        return override
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("polymm"), "opencl-tuning.json")


@lru_cache(maxsize=1)
def _tuned() -> dict:
    try:
        with open(tuning_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def tuned_params(device, dtype) -> KernelParams | None:
    entry = _tuned().get(device_key(device), {}).get(np.dtype(dtype).name)
    if not entry:
        return None
    return KernelParams(**entry)


def _fits(device, kernel, dtype, params) -> bool:
    return (params.mdimc * params.ndimc <= device.max_work_group_size
            and local_mem_bytes(kernel, dtype, params) <= device.local_mem_size)


def table_params(device, dtype) -> KernelParams:
    """The built-in regblock parameters for ``device`` and ``dtype``."""
    name = np.dtype(dtype).name
    slot = name if name in _VECTOR else "other"
    if _is_cpu(device):
        return CPU_TABLE[slot]
    vendor = device.vendor.lower() + " " + device.platform.name.lower()
    for key, table in GPU_TABLE.items():
        if key in vendor:
            params = table[slot]
            if _fits(device, "regblock", dtype, params):
                return params
    return GPU_TABLE[""]["other"].replace(mdimc=8, ndimc=8, mwg=16, nwg=16)


def tiled_params(device, dtype) -> KernelParams:
    """16 x 16 tiles, smaller where a device's work-group or local memory is small."""
    ts = 16
    while ts > 1 and (ts * ts > device.max_work_group_size
                      or local_mem_bytes("tiled", dtype, KernelParams(ts=ts)) > device.local_mem_size):
        ts //= 2
    return KernelParams(ts=ts)


def auto_choice(device, dtype, M, N, K):
    """``(kernel, params)`` behind ``"auto"``: regblock, except tiny problems on a GPU."""
    params = tuned_params(device, dtype) or table_params(device, dtype)
    if not _is_cpu(device) and M * N < params.mwg * params.nwg * 4:
        return "tiled", tiled_params(device, dtype)
    return "regblock", params
