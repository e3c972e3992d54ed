"""The one cost model that ranks the planner's candidates: time from waves, bytes and launches.

Every kernel family describes what a candidate would do as :class:`Work` (multiply-adds on
which engine, work-groups and how many share a compute unit, bytes moved, launches, bytes copied
first); :meth:`Work.seconds` turns that into an estimate with the device database's ``cost``
section (attained rates per engine and dtype, memory bandwidth, the cost of a launch):

    launches x launch + packed bytes x 2 / pack bandwidth + serial bytes / bandwidth
      + max(multiply-adds / (rate x fill of the waves x tile efficiency), bytes / bandwidth)

where the fill of the waves is the share of the compute units the work-groups keep busy
(``groups / (waves x compute units)``: few work-groups on a large device run at a fraction of
the rate), and a tile's efficiency is its arithmetic intensity (multiply-adds per value loaded,
``mt x nt / (mt + nt)`` for an ``mt x nt`` tile) over the intensity at which its engine reaches
its rate (``cost.intensity``), at most 1: small tiles load more per multiply-add.
The estimate ranks candidates; it is not a prediction to quote (explain shows it as such).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .devices import settings_for

__all__ = ["Work", "real_macs", "wave_fill"]


def wave_fill(groups: int, slots: int) -> float:
    """The share of ``slots`` (work-groups the device runs at once) kept busy over the waves that
    ``groups`` work-groups take."""
    groups, slots = max(1, groups), max(1, slots)
    return groups / (-(-groups // slots) * slots)


def real_macs(dtype, count: float) -> float:
    """``count`` multiply-adds of ``dtype`` as real ones (a complex one is four)."""
    return count * (4 if np.dtype(dtype).kind == "c" else 1)


@dataclass(frozen=True)
class Work:
    """What one candidate does, in the terms the cost model weighs.

    ``rate``: ``"engine:kind"`` naming its attained rate in the database's ``cost.rates`` (e.g.
    ``"simt:float32"``, ``"tensor:float16"``, ``"tensor:tf32"``); ``macs``: real multiply-adds it
    computes, tile padding included; ``groups``: work-groups of its product launch; ``tile``: the
    ``(rows, columns)`` of C each computes (None: memory-bound kernels, efficiency 1); ``bytes``:
    global-memory bytes its launches read and write (a backend kernel's own copies included); ``launches``; ``copied``: bytes the shared
    ``pack`` kernel copies into scratch before the product, each read and written once (at
    ``cost.pack_bandwidth``, the database's figure for that kernel on the device); ``serial``:
    bytes its launches before and after the product move while no product runs (operands split
    into parts, partial sums read back and added), which nothing overlaps.
    """

    rate: str
    macs: float
    groups: int
    tile: tuple | None = None
    bytes: float = 0.0
    launches: int = 1
    copied: float = 0.0
    serial: float = 0.0

    def fill(self, device) -> float:
        return wave_fill(self.groups, max(1, device.compute_units))

    def efficiency(self, device) -> float:
        """The share of its engine's rate this candidate's tile reaches (see the module)."""
        if self.tile is None:
            return 1.0
        mt, nt = self.tile
        full = settings_for(device)("cost", "intensity")[self.rate.split(":")[0]]
        return min(1.0, mt * nt / (mt + nt) / full)

    def seconds(self, device) -> float:
        """The estimate that ranks this candidate on ``device`` (see the module's formula)."""
        cost = settings_for(device)
        engine, kind = self.rate.split(":")
        rates = cost("cost", "rates").get(engine, {})
        found = rates.get(kind, rates.get("other"))
        if found is None:
            raise KeyError(f"the device database has no cost.rates entry for {self.rate!r} on {device.name}")
        rate = found * 1e12 / 2  # TFLOP/s -> multiply-adds per second
        bandwidth = cost("cost", "bandwidth") * 1e9
        compute = self.macs / (rate * self.fill(device) * self.efficiency(device))
        memory = self.bytes / bandwidth
        packing = 2 * self.copied / (cost("cost", "pack_bandwidth") * 1e9) if self.copied else 0.0
        serial = self.serial / bandwidth
        return self.launches * cost("cost", "launch") * 1e-6 + packing + serial + max(compute, memory)

    def describe(self, device) -> str:
        """One line for explain: the estimate and the terms behind it."""
        parts = [f"{self.seconds(device) * 1e6:.1f} us est.", f"{self.rate}"]
        parts.append(f"{self.groups} groups ({self.fill(device):.0%} of the waves)")
        if self.tile is not None:
            parts.append(f"{self.tile[0]}x{self.tile[1]} tiles ({self.efficiency(device):.0%} efficient)")
        parts.append(f"{self.bytes / 1e6:.1f} MB")
        if self.launches > 1:
            parts.append(f"{self.launches} launches")
        if self.copied:
            parts.append(f"{self.copied / 1e6:.1f} MB packed first")
        if self.serial:
            parts.append(f"{self.serial / 1e6:.1f} MB moved around the product")
        return ", ".join(parts)
