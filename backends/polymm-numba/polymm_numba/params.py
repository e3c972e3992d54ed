"""The CPU backend's numbers: blockings and thresholds, read once from the device database.

Every value here is an entry of ``polymm/kernels/devices.json`` (device ``host CPU``, or its
``host CPU, AVX-512`` child on a machine with 512-bit vectors; families ``cpu-*``), with why it
is what it is and what was measured for it; this module binds each to the name the kernels and
the backend's planning use, so that a call compares plain numbers. The float32 and float64
blockings measured on this very machine by ``polymm tune --backend cpu`` (:mod:`.tuning`), where
the tuning file has them, take the database's place.

The register micro-tile (``mr`` x ``nr``) is baked into the compiled
micro-kernel (LLVM must see constant loop bounds to keep the accumulator in
vector registers), so each distinct (mr, nr) pair gets its own compiled
specialisation.  The cache blocks (``mc``, ``nc``, ``kc``) and the tile sizes
of the ``"tiled"`` kernel are ordinary runtime arguments (change them in
:data:`AUTO_BLOCKING` / :data:`TILED` at runtime without recompiling).
"""

from __future__ import annotations

import os
import platform
import warnings
from dataclasses import dataclass

import numpy as np

from polymm.kernels.devices import Setting, settings_for
from polymm.kernels.params import DeviceInfo, tuned_value, tuning_path

__all__ = ["Blocking", "Tiling", "AUTO_BLOCKING", "TILED", "TINY_WORK", "SERIAL_WORK", "blocking_for"]


@dataclass(frozen=True)
class Blocking:
    """Goto/BLIS-style blocking of the packed ``"auto"`` kernel.

    ``mr`` x ``nr``: register tile (an MR-tall panel of A times an NR-wide
    panel of B).  ``kc``: depth of a packed panel (B micro-panel of
    ``kc * nr`` elements stays in L1).  ``mc``: rows of A packed per block
    (``mc * kc`` elements in L2).  ``nc``: columns of B packed per block
    (shared by all threads, in L3).
    """

    mr: int
    nr: int
    mc: int
    nc: int
    kc: int


@dataclass(frozen=True)
class Tiling:
    """Tile sizes of the ``"tiled"`` kernel: the CPU mirror of the GPU kernel.

    Each task computes a ``tm`` x ``tn`` block of the output, walking K in
    steps of ``tk`` and copying the A and B tiles into small contiguous
    buffers first (the role shared memory plays on a GPU).
    """

    tm: int = 64
    tn: int = 64
    tk: int = 128


def _has_wide_vectors() -> bool:
    """True when the host has AVX-512 (32 vector registers of 512 bits)."""
    try:
        import llvmlite.binding as llvm

        return bool(llvm.get_host_cpu_features().get("avx512f"))
    except Exception:  # unknown host: the narrow tiles are safe everywhere
        return False


WIDE_VECTORS = _has_wide_vectors()

#: This machine as the device database sees it: ``host CPU``, or its ``host CPU, AVX-512``
#: child where the vector registers are 512 bits wide.
HOST = DeviceInfo(
    name=platform.processor() or platform.machine(),
    vendor="",
    kind="cpu",
    dialect="numba",
    compute_units=os.cpu_count() or 1,
    max_work_group=1,
    local_mem=0,
    key="numba-host",
    platform="host avx512" if WIDE_VECTORS else "host avx2",
)

#: Every entry below as the database gives it, by the name this module binds it to (what
#: :meth:`CPUBackend.explain <polymm_numba.backend.CPUBackend.explain>` cites).
SETTINGS: dict[str, Setting] = {}


def _read(name: str, family: str, key: str, default_key: str | None = None):
    SETTINGS[name] = found = settings_for(HOST).setting(family, key, default_key)
    return found.value


# The register tile must fit the vector register file, or the accumulators spill and the
# micro-kernel runs at a third of its speed: the blockings are the database's per element size
# (``cpu-blocking``), read once here so that a call compares plain numbers.
_BLOCKINGS = {size: Blocking(**_read(f"blocking {size}", "cpu-blocking", str(size))) for size in (1, 2, 4, 8, 16)}

#: Per-dtype blocking of the ``"auto"`` kernel (float16 is computed as float32).
_AUTO_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "float32", "int32", "uint32", "float64", "int64", "uint64")
AUTO_BLOCKING: dict[np.dtype, Blocking] = {
    np.dtype(t): _BLOCKINGS[np.dtype(t).itemsize] for t in (*_AUTO_DTYPES, "complex64", "complex128")
}
#: float32 and float64 may have blockings of their own (an entry named by the dtype, else the
#: element size's): the integer and complex kernels of the same width run other instructions.
for _name in ("float32", "float64"):
    AUTO_BLOCKING[np.dtype(_name)] = Blocking(
        **_read(f"blocking {_name}", "cpu-blocking", _name, str(np.dtype(_name).itemsize))
    )


def _model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return ""


#: This machine's key in the tuning file: a home directory shared by several machines keeps one
#: tuning for each kind of processor.
TUNING_KEY = f"numba {_model() or platform.machine()} {HOST.platform}"
#: The dtypes whose blocking ``polymm tune --backend cpu`` measures.
TUNED_DTYPES = ("float32", "float64")


def _tuned_setting(family: str, dtype, what: str, otherwise: str, parse) -> Setting | None:
    """The tuning file's ``family`` entry for ``dtype`` on this machine as a setting (with the
    tuner's evidence) whose value is ``parse(recorded value)``, or None; an entry that ``parse``
    refuses (``ValueError``, ``TypeError``) is ignored with a warning naming ``what`` it held and
    what is used ``otherwise``."""
    name = np.dtype(dtype).name
    entry = tuned_value(TUNING_KEY, f"{family} {name}")
    if entry is None:
        return None
    try:
        value = parse(entry["value"])
    except (TypeError, KeyError, ValueError) as exc:
        warnings.warn(
            f"polymm cpu: ignoring the {name} {what} of the tuning file {tuning_path()} ({exc}); "
            f"{otherwise} (run `polymm tune --backend cpu` again)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return Setting(
        f"tuning file {tuning_path()}", family, name, value,
        entry.get("why", "measured on this machine by polymm tune --backend cpu"), entry.get("evidence", {}),
    )  # fmt: skip


def tuned_blocking(dtype) -> Setting | None:
    """The blocking the tuning file records for ``dtype`` on this machine, as a setting, or None;
    an entry that is not a valid blocking is ignored with a warning."""

    def parse(value):
        blk = Blocking(**value)
        lanes = max(1, VECTOR_BYTES // np.dtype(dtype).itemsize)
        if min(blk.mr, blk.nr, blk.mc, blk.nc, blk.kc) < 1 or blk.nr % lanes or blk.mc % blk.mr:
            raise ValueError(f"{blk} is not a blocking of whole vectors and panels here")
        return value

    return _tuned_setting("cpu-blocking", dtype, "blocking", "the device database's is used", parse)


def blocking_setting(dtype) -> Setting:
    """The entry behind ``AUTO_BLOCKING[dtype]``: the tuning file's, else the database's."""
    return SETTINGS.get(f"blocking {np.dtype(dtype).name}") or SETTINGS[f"blocking {np.dtype(dtype).itemsize}"]


#: Tile sizes of the ``"tiled"`` kernel (all dtypes).
TILED = Tiling(**_read("TILED", "cpu-tiled", "tiles"))

TINY_WORK = _read("TINY_WORK", "cpu-threads", "tiny_work")
SERIAL_WORK = _read("SERIAL_WORK", "cpu-threads", "serial_work")
NEIGHBOUR_MIN_WORK = _read("NEIGHBOUR_MIN_WORK", "cpu-threads", "neighbour_min_work")
PARALLEL_MIN_SAVING = _read("PARALLEL_MIN_SAVING", "cpu-threads", "parallel_min_saving")
SPIN_SECONDS = _read("SPIN_SECONDS", "cpu-threads", "spin_seconds")
SHARE_SPIN_SECONDS = _read("SHARE_SPIN_SECONDS", "cpu-threads", "share_spin_seconds")
SHARE_FROM_CORES = _read("SHARE_FROM_CORES", "cpu-threads", "share_from_cores")
YIELD_SPINNERS = _read("YIELD_SPINNERS", "cpu-threads", "yield_spinners")
YIELD_SPIN_SECONDS = _read("YIELD_SPIN_SECONDS", "cpu-threads", "yield_spin_seconds")
PASSIVE_FROM_CORES = _read("PASSIVE_FROM_CORES", "cpu-threads", "passive_from_cores")
POOL_SPIN_SECONDS = _read("POOL_SPIN_SECONDS", "cpu-threads", "pool_spin_seconds")
LANE_MACS_PER_SECOND = _read("LANE_MACS_PER_SECOND", "cpu-threads", "lane_macs_per_second")

NARROW = _read("NARROW", "cpu-narrow", "most")
NARROW_MIN_WORK = _read("NARROW_MIN_WORK", "cpu-narrow", "min_work")
NARROW_ROWS = _read("NARROW_ROWS", "cpu-narrow", "rows")
NARROW_SLAB = _read("NARROW_SLAB", "cpu-narrow", "slab")
NARROW_SPLITK_MIN_K = _read("NARROW_SPLITK_MIN_K", "cpu-narrow", "splitk_min_k")
NARROW_SPLITK_CHUNK = _read("NARROW_SPLITK_CHUNK", "cpu-narrow", "splitk_chunk")
NARROW_SPLITK_PARTS = _read("NARROW_SPLITK_PARTS", "cpu-narrow", "splitk_parts")
NARROW_SPLITK_ACC = _read("NARROW_SPLITK_ACC", "cpu-narrow", "splitk_acc")

SMALL_PRODUCT = _read("SMALL_PRODUCT", "cpu-small", "product")
SMALL_TASK = _read("SMALL_TASK", "cpu-small", "task")
SMALL_MN = _read("SMALL_MN", "cpu-small", "most_mn")
SMALL_K = _read("SMALL_K", "cpu-small", "most_k")
SMALL_SERIAL_WORK = _read("SMALL_SERIAL_WORK", "cpu-small", "serial_work")

SLABS_WORK_PER_THREAD = _read("SLABS_WORK_PER_THREAD", "cpu-slabs", "work_per_thread")
SLABS_PASSIVE_WORK_PER_THREAD = _read("SLABS_PASSIVE_WORK_PER_THREAD", "cpu-slabs", "passive_work_per_thread")
SLABS_MIN_COLUMNS = _read("SLABS_MIN_COLUMNS", "cpu-slabs", "min_columns")
SLABS_MIN_ROW_PANELS = _read("SLABS_MIN_ROW_PANELS", "cpu-slabs", "min_row_panels")
SLABS_ROWS_FIRST_K = _read("SLABS_ROWS_FIRST_K", "cpu-slabs", "rows_first_k")

SPLITK_MIN_K = _read("SPLITK_MIN_K", "cpu-split-k", "min_k")
SPLITK_MAX_MN = _read("SPLITK_MAX_MN", "cpu-split-k", "max_mn")
SPLITK_CHUNK = _read("SPLITK_CHUNK", "cpu-split-k", "chunk")

SMALL_REGS = _read("SMALL_REGS", "cpu-vectors", "registers")
VECTOR_BYTES = _read("VECTOR_BYTES", "cpu-vectors", "bytes")


def one_thread_seconds(work: int, dtype) -> float:
    """About how long ``work`` multiply-adds of ``dtype`` take on one core (``LANE_MACS_PER_SECOND``
    per vector lane; a complex multiply-add is four real ones): what another pool's spin after its
    work (``SPIN_SECONDS``) is weighed against."""
    dt = np.dtype(dtype)
    real = dt.itemsize // 2 if dt.kind == "c" else dt.itemsize
    lanes = max(1, VECTOR_BYTES // real)
    return work * (4 if dt.kind == "c" else 1) / (lanes * LANE_MACS_PER_SECOND)


for _name in TUNED_DTYPES:
    _found = tuned_blocking(_name)
    if _found is not None:
        SETTINGS[f"blocking {_name}"] = _found
        AUTO_BLOCKING[np.dtype(_name)] = Blocking(**_found.value)


def tuned_teams(dtype) -> Setting | None:
    """The team sizes the tuning file records for ``dtype`` on this machine (``cpu-teams``: a list
    of ``[multiply-adds, threads]``, the fastest team the tuner found for products of that much
    work), as a setting, or None; an entry that is not such a list is ignored with a warning."""

    def parse(value):
        classes = tuple(sorted((int(work), int(team)) for work, team in value))
        if not classes or min(min(c) for c in classes) < 1:
            raise ValueError("no [work, threads] pairs of positive numbers")
        return classes

    return _tuned_setting("cpu-teams", dtype, "team sizes", "every core is offered", parse)


#: Per dtype, the tuned ``(work, threads)`` classes (:func:`team_cap`); none: every core is offered.
TEAMS: dict[np.dtype, tuple[tuple[int, int], ...]] = {}
for _name in TUNED_DTYPES:
    _found = tuned_teams(_name)
    if _found is not None:
        SETTINGS[f"teams {_name}"] = _found
        TEAMS[np.dtype(_name)] = _found.value


def team_cap(work: int, dtype) -> int:
    """The most threads a parallel product of ``work`` multiply-adds should take (before the
    neighbours are counted): the tuned team of the nearest work class (nearest by ratio); beyond
    the largest class, or untuned, every thread (0 means no cap). More threads than the work can
    use cost more than they bring, and where that begins is the machine's: on the 16-core GPU
    host a 256^3 float32 product ran in 0.20 ms on 2 threads and 0.26 ms on 16, while from 512^3
    16 threads were fastest (``polymm tune``, 2026-12-02)."""
    classes = TEAMS.get(dtype)
    if not classes or work > 2 * classes[-1][0]:
        return 0
    below = classes[0]
    for above in classes:
        if work <= above[0]:
            # nearest by ratio: work / below[0] against above[0] / work
            return (below if work * work < below[0] * above[0] else above)[1]
        below = above
    return below[1]


def blocking_for(dtype) -> Blocking:
    """The blocking of the ``"auto"`` kernel for ``dtype``."""
    return AUTO_BLOCKING[np.dtype(dtype)]


class Reads:
    """This module's numbers, noting the database entry behind each one read (``read``): what
    the backend's planning is handed when explain asks which entries decided."""

    def __init__(self):
        self.read: list[Setting] = []

    def __getattr__(self, name):
        value = globals()[name]
        found = SETTINGS.get(name)
        if found is not None and found not in self.read:
            self.read.append(found)
        return value


def small_tiles(itemsize: int) -> tuple[int, int]:
    """``(mr, nr)`` of the small-product kernel's tiles for this element size: ``nr`` two
    vectors of columns (the rest of N in one masked tile of two vectors or one), ``mr`` as
    many rows as the vector registers hold beside a row of B and the broadcast A value (8
    with AVX-512, 6 with AVX2); fewer rows only where M itself is smaller."""
    vlen = max(1, VECTOR_BYTES // itemsize)
    per_row = 2
    return max(4, min(8, (SMALL_REGS - per_row - 2) // per_row)), 2 * vlen
