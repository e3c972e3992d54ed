"""Devices and their regblock tiles: the device database's (:mod:`polymm.kernels.devices`),
overridden by what the tuner (:mod:`polymm.tools.tune`) measured on this machine.

Both GPU backends and the OpenCL CPU shape read the same tiles through
:func:`regblock_params` (tuned, else :func:`table_params`); devices are described by
:class:`DeviceInfo`, which each backend builds from its own device queries.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import KernelParams, local_mem_bytes
from .devices import Setting, note, settings_for

__all__ = [
    "DeviceInfo",
    "regblock_params",
    "regblock_setting",
    "table_params",
    "tiled_params",
    "tuned_params",
    "tuning_path",
    "fits",
    "save_tuned",
    "save_tuned_value",
    "tuned_value",
]


@dataclass(frozen=True)
class DeviceInfo:
    """What the planner needs to know about a device, asked once by its backend.

    ``kind``: ``"cpu"`` or ``"gpu"``; ``key``: identifies the device (and
    driver) in the tuning file; ``max_batch``: most batch entries one launch
    covers (CUDA's grid z); the ``*_per_cu`` limits and ``registers`` feed the
    occupancy figures of :func:`polymm.tools.explain.explain` (0: unknown); ``cc``: CUDA
    compute capability x 10 (0 elsewhere), for CUDA-only planner entries; ``vector_bytes``: the
    width of a CPU device's native float vectors (64 on AVX-512, which adds the database word
    ``avx512``; 0: unknown, taken as 32).
    """

    name: str
    vendor: str
    kind: str
    dialect: str
    compute_units: int
    max_work_group: int
    local_mem: int
    key: str = ""
    platform: str = ""
    max_batch: int = 2**31 - 1
    threads_per_cu: int = 0
    blocks_per_cu: int = 0
    local_mem_per_cu: int = 0
    registers_per_cu: int = 0
    cc: int = 0
    vector_bytes: int = 0

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    def words(self) -> str:
        wide = " avx512" if self.vector_bytes >= 64 else ""
        return f"{self.kind} {self.vendor} {self.platform} {self.name} {self.dialect}{wide}".lower()


def tuning_path() -> str:
    """Where the tuner stores measured parameters (``POLYMM_TUNING`` overrides)."""
    override = os.environ.get("POLYMM_TUNING")
    if override:
        return override
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("polymm"), "tuning.json")


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
        f"polymm: ignoring the tuning file {path}: {why}; the built-in parameters are used "
        "(run `python -m polymm.tools.tune` to rebuild it)",
        RuntimeWarning,
        stacklevel=3,
    )


def tuned_params(device: DeviceInfo, dtype) -> KernelParams | None:
    """The tuned regblock parameters for ``device`` and ``dtype``, or None.

    An entry that is stale (written for other parameters than this version's) or
    that this device cannot run is ignored with one warning: the built-in table
    then applies, never a crash or a kernel the device rejects."""
    return _checked_entry(device, np.dtype(dtype).name)


@lru_cache(maxsize=None)
def _checked_entry(device: DeviceInfo, name: str) -> KernelParams | None:
    entry = _tuned().get(device.key, {}).get(name)
    if not entry:
        return None
    try:
        params = KernelParams(**entry)
        params.validate("regblock")
    except (TypeError, ValueError) as exc:
        _ignore(tuning_path(), f"its {name} entry for {device.name} is stale or invalid ({exc})")
        return None
    if not fits(device, "regblock", np.dtype(name), params):
        _ignore(tuning_path(), f"its {name} entry does not fit {device.name}'s work-group or local memory")
        return None
    return params


def save_tuned(device: DeviceInfo, dtype, params: KernelParams, path: str | None = None) -> str:
    """Record ``params`` for (``device``, ``dtype``) in the tuning file; returns its path."""
    return save_tuned_value(device.key, np.dtype(dtype).name, dataclasses.asdict(params), path)


def tuned_value(key: str, name: str):
    """The tuning file's raw entry ``name`` under the device key ``key``, or None (a backend
    that tunes something other than regblock tiles reads its own entries through this)."""
    return _tuned().get(key, {}).get(name)


def save_tuned_value(key: str, name: str, value, path: str | None = None) -> str:
    """Record ``value`` as entry ``name`` under the device key ``key`` in the tuning file (the
    other entries kept); returns its path."""
    path = path or tuning_path()
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    data.setdefault(key, {})[name] = value
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = f"{path}.{os.getpid()}.tmp"  # written whole, then renamed: readers never see half a file
    with open(partial, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(partial, path)
    _tuned.cache_clear()
    _checked_entry.cache_clear()
    return path


def fits(device: DeviceInfo, kernel: str, dtype, params: KernelParams) -> bool:
    """Whether ``params`` fit the device's work-group size and local memory."""
    return (
        params.mdimc * params.ndimc * (params.kteams if params.use_local else 1) <= device.max_work_group
        and local_mem_bytes(kernel, dtype, params) <= device.local_mem
    )


def regblock_params(device: DeviceInfo, dtype) -> KernelParams:
    """The regblock parameters for ``device`` and ``dtype``: tuned, else the database's."""
    return KernelParams(**note(regblock_setting(device, dtype)).value)


def regblock_setting(device: DeviceInfo, dtype) -> Setting:
    """The entry behind :func:`regblock_params`: the tuning file's, else the database's."""
    name = np.dtype(dtype).name
    tuned = tuned_params(device, name)
    if tuned is not None:
        why = "measured on this machine by polymm.tools.tune"
        return Setting(f"tuning file {tuning_path()}", "regblock", name, dataclasses.asdict(tuned), why)
    return _table_setting(device, name)


def table_params(device: DeviceInfo, dtype) -> KernelParams:
    """The database's regblock parameters for ``device`` and ``dtype`` (the tuner's baseline)."""
    return KernelParams(**_table_setting(device, np.dtype(dtype).name).value)


def _table_setting(device: DeviceInfo, name: str) -> Setting:
    """The most specific regblock entry for ``name`` (else the family's ``other``) that the
    device can run: a GPU whose work-group or local memory is too small for its own table's
    tiles takes its parent's, down to the last resort of ``any``."""
    for entry in settings_for(device).candidates("regblock", name, "other"):
        if device.is_cpu or fits(device, "regblock", np.dtype(name), KernelParams(**entry.value)):
            return entry
    return entry


def tiled_params(device: DeviceInfo, dtype) -> KernelParams:
    """16 x 16 tiles, smaller where a device's work-group or local memory is small."""
    ts = 16
    while ts > 1 and (
        ts * ts > device.max_work_group or local_mem_bytes("tiled", dtype, KernelParams(ts=ts)) > device.local_mem
    ):
        ts //= 2
    return KernelParams(ts=ts)
