"""Tile parameters per device: a small table keyed by device type/vendor,
overridden by what :mod:`polymm_opencl.tune` measured on this device.

A CPU (PoCL) wants no local memory and one work-item computing a large
register block with wide vectors (the caches do the staging); an NVIDIA GPU
wants 128 x 128 blocks in local memory, 256 work-items each computing 8 x 8.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass
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
    # 48 x 128 per work-item in 16-column slices: 0.47x -> 0.62x NumPy at 4096,
    # 0.53x -> 0.73x at 2048 against the former 192 x 16 (4 work-items of 48 x 16).
    "float32": KernelParams(
        mwg=48, nwg=128, kwg=256, mdimc=1, ndimc=1, vw=8, mr=6, nr=16, pack_b=True, use_local=False
    ),
    "float64": KernelParams(mwg=192, nwg=8, kwg=256, mdimc=4, ndimc=1, vw=4, mr=6, pack_b=True, use_local=False),
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
    """The tuning file's table; an unreadable or malformed file counts as empty, with one warning."""
    path = tuning_path()
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _ignore(path, f"it cannot be read as JSON ({exc})")
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        _ignore(path, "it is not a table of devices")
        return {}
    return data


def _ignore(path, why) -> None:
    warnings.warn(
        f"polymm-opencl: ignoring the tuning file {path}: {why}; the built-in parameters are used "
        "(run `python -m polymm_opencl.tune` to rebuild it)",
        RuntimeWarning,
        stacklevel=3,
    )


def tuned_params(device, dtype) -> KernelParams | None:
    """The tuned regblock parameters for ``device`` and ``dtype``, or None.

    An entry that is stale (written for other parameters than this version's) or
    that this device cannot run is ignored with one warning: the built-in table
    then applies, never a crash or a kernel the device rejects."""
    return _checked_entry(device, np.dtype(dtype).name)


@lru_cache(maxsize=None)
def _checked_entry(device, name: str) -> KernelParams | None:
    dtype = np.dtype(name)
    entry = _tuned().get(device_key(device), {}).get(name)
    if not entry:
        return None
    try:
        params = KernelParams(**entry)
        params.validate("regblock")
    except (TypeError, ValueError) as exc:
        _ignore(tuning_path(), f"its {name} entry for {device.name.strip()} is stale or invalid ({exc})")
        return None
    if not _fits(device, "regblock", dtype, params):
        _ignore(tuning_path(), f"its {name} entry does not fit {device.name.strip()}'s work-group or local memory")
        return None
    return params


def _fits(device, kernel, dtype, params) -> bool:
    return (
        params.mdimc * params.ndimc <= device.max_work_group_size
        and local_mem_bytes(kernel, dtype, params) <= device.local_mem_size
    )


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
    while ts > 1 and (
        ts * ts > device.max_work_group_size
        or local_mem_bytes("tiled", dtype, KernelParams(ts=ts)) > device.local_mem_size
    ):
        ts //= 2
    return KernelParams(ts=ts)


@dataclass(frozen=True)
class Choice:
    """What ``auto`` runs for one product, and why (``reason``).

    ``kernel``/``params``: the product kernel; ``swap``: compute ``C^T = B^T A^T``
    (same memory layout because M or N is 1) so the long operand is read along
    its contiguous axis; ``pack_a``/``pack_b``: copy that operand to contiguous
    scratch on the device first (``pack_b="transposed"`` stores B as N x K,
    what ``matvec`` reads); ``splits``: split-K, slices of K computed as a
    batch into scratch, then added in slice order (deterministic).
    Iterates as ``(kernel, params)``.
    """

    kernel: str
    params: KernelParams | None
    reason: str = ""
    swap: bool = False
    pack_a: bool = False
    pack_b: str = ""
    splits: int = 1

    def __iter__(self):
        return iter((self.kernel, self.params))

    def replace(self, **changes) -> "Choice":
        return dataclasses.replace(self, **changes)


#: Thresholds of the CPU planner, in elements.
FEW = 4  # N up to this: matvec (dot products along K); M up to 2 * FEW: a row strip
SMALL_BATCHED = 64 * 64  # M * N per matrix at most, for several matrices per work-group
DEEP_K = 16  # K at least this many times max(M, N), batch 1: split-K


def _cpu_choice(dtype, M, N, K, batch, a_strides, b_strides, params) -> Choice:
    """The CPU (PoCL) planner for float32/float64; strides in elements."""
    width = 32 // np.dtype(dtype).itemsize  # 256-bit vectors
    _, a_sm, a_sk = a_strides
    _, b_sk, b_sn = b_strides
    pack_b = "" if b_sn == 1 else "rows"
    pack_a = a_sk != 1 and a_sm != 1
    # Batches of small matrices: one matrix per work-item, several per work-group.
    if batch > 1 and M * N <= SMALL_BATCHED and K <= 256:
        nwg = -(-N // width) * width
        nr = 2 * width if nwg % (2 * width) == 0 else width
        mr = 4 if nr == 2 * width else 6
        mr = min(mr, M)
        small = KernelParams(
            mwg=-(-M // mr) * mr,
            nwg=nwg,
            kwg=1 << 20,
            mdimc=1,
            ndimc=1,
            vw=width,
            mr=mr,
            nr=nr,
            use_local=False,
            bpg=16,
        )
        return Choice(
            "regblock",
            small,
            f"batch of {batch} small {M}x{N}: whole matrices per work-item",
            pack_a=pack_a,
            pack_b=pack_b,
        )
    # Matrix-vector: few columns; read A along its rows.
    if N <= FEW and K >= 2 * width:
        mv = KernelParams(mr={1: 4, 2: 4}.get(N, 2), nwg=N, vw=width, mdimc=4, use_local=False)
        if a_sk == 1:
            return Choice(
                "matvec", mv, f"N={N} <= {FEW}: dot products along K", pack_b="" if b_sk == 1 else "transposed"
            )
        if N == 1 and a_sm == 1:
            inner = _cpu_choice(dtype, 1, M, K, batch, (0, 0, 1), (0, a_sk, a_sm), params)
            return inner.replace(swap=True, reason="A column-major, N=1: as (B^T A^T); " + inner.reason)
        return Choice(
            "matvec",
            mv,
            f"N={N} <= {FEW}, A packed to rows first",
            pack_a=True,
            pack_b="" if b_sk == 1 else "transposed",
        )
    # A strip of few rows: vectors along N, one pass over B.
    if M <= 2 * FEW and K >= 2 * width:
        if b_sn != 1 and M == 1 and b_sk == 1:
            inner = _cpu_choice(dtype, N, 1, K, batch, (0, b_sn, b_sk), (0, 1, 1), params)
            return inner.replace(swap=True, reason="B column-major, M=1: as (B^T A^T); " + inner.reason)
        # Long contiguous runs of each row of B (a K chunk of 16 rows across NWG
        # columns, NR at a time) keep the hardware prefetcher streaming.
        mr = M if M <= 4 else 4
        nr = max(2, 8 // mr) * width
        nwg = next(w * width for w in (128, 64, 32, 16, 8) if N % (w * width) == 0 or w == 8)
        nwg = max(nwg, nr)
        strip = KernelParams(
            mwg=-(-M // mr) * mr, nwg=nwg, kwg=16, mdimc=1, ndimc=1, vw=width, mr=mr, nr=nr, use_local=False
        )
        splits = 2 if batch == 1 and K >= 1024 else 1
        return Choice(
            "regblock",
            strip,
            f"M={M} <= {2 * FEW}: row strip, rows of B streamed {nwg} wide",
            pack_b="" if b_sn == 1 else "rows",
            splits=splits,
        )
    # Deep K: not enough blocks of C to share out; split K and add the slices in order.
    if batch == 1 and K >= DEEP_K * max(M, N) and K >= 4096:
        mr = 4 if M % 6 else 6
        deep = KernelParams(
            mwg=min(8 * mr, -(-M // mr) * mr),
            nwg=min(-(-N // (2 * width)) * 2 * width, 16 * width),
            kwg=256,
            mdimc=1,
            ndimc=1,
            vw=width,
            mr=mr,
            nr=2 * width,
            pack_b=True,
            use_local=False,
        )
        blocks = -(-M // deep.mwg) * -(-N // deep.nwg)
        splits = max(2, min(32, -(-16 // blocks), K // 2048))
        return Choice(
            "regblock",
            deep,
            f"deep K={K}: {splits} slices of K, added in order",
            pack_a=pack_a,
            pack_b=pack_b,
            splits=splits,
        )
    # Small K (outer products): C is the traffic; write long runs of each row.
    if K <= 64 and N >= 256 and M >= 48:
        outer = KernelParams(mwg=48, nwg=256, kwg=64, mdimc=1, ndimc=1, vw=width, mr=6, nr=2 * width, use_local=False)
        return Choice("regblock", outer, f"K={K} <= 64: C written 256 columns at a time", pack_a=pack_a, pack_b=pack_b)
    # A is read a scalar at a time along K: with K-steps far apart (A transposed)
    # they all land in one cache set, so it is worth a copy too.
    pack_a = a_sk != 1
    reason = "table regblock (CPU shape)"
    if pack_a or pack_b:
        reason += ", strided operands packed first"
    return Choice("regblock", params, reason, pack_a=pack_a, pack_b=pack_b)


def auto_choice(device, dtype, M, N, K, batch=1, a_strides=None, b_strides=None) -> Choice:
    """The :class:`Choice` behind ``"auto"``, with its ``reason``.

    GPUs: regblock with the table (or tuned) parameters, ``tiled`` for tiny
    problems.  CPUs: regblock, with special shapes for float32/float64 (the
    dtypes with a vector path): ``matvec`` when N <= FEW, a row strip when
    M <= 2 FEW, several small matrices per work-group for batches, split-K
    for deep K, and operands that are not contiguous along the axis the
    kernel reads packed on the device first.  Strides are in elements,
    ``(batch, row, column)`` of A and ``(batch, K, N)`` of B (None: contiguous).
    """
    dtype = np.dtype(dtype)
    params = tuned_params(device, dtype) or table_params(device, dtype)
    if not _is_cpu(device):
        if M * N < params.mwg * params.nwg * 4:
            return Choice("tiled", tiled_params(device, dtype), "GPU, small product: local-memory tiles")
        return Choice("regblock", params, "GPU: register-blocked local-memory tiles")
    if dtype.name not in _VECTOR:
        return Choice("regblock", params, f"CPU, {dtype.name}: scalar register blocks")
    a_strides = a_strides or (M * K, K, 1)
    b_strides = b_strides or (K * N, N, 1)
    return _cpu_choice(dtype, M, N, K, batch, a_strides, b_strides, params)
