"""The cliff suite in asv: one tracked ratio per cell, so the dashboard has a line per cell.

``CliffCell.track_ratio(backend, cell)`` measures one cell of :mod:`polymm.tools.cliffs`
(``cell`` is ``"<case> <dtype>"``, e.g. ``"gemv-4096 float32"``) with the suite's own
:func:`~polymm.tools.cliffs.measure_cell`: the answer is checked, then ``polymm.matmul`` and the
reference library are timed interleaved in the same process. The figure is the reference's
time over ours (higher is better; 1.0 is parity).

Every cell is its own asv job, so a run shows progress and ``--bench`` selects cells:
``--bench "CliffCell.track_ratio\\('cpu', 'square-"``. The cells are the suite's hand-chosen
cases (:data:`~polymm.tools.cliffs.CASES` without the GPU grid, ``grid-*``, whose few hundred
cells are recorded by ``polymm bench --suite cliffs --cases 'grid-*'`` under ``benchmarks/``).
The worst cell and the geometric mean per backend are the cliff suite's summary
(``polymm bench --suite cliffs``), not tracked here: asv runs each cell in its own process.

Skipped (``NotImplementedError``, asv's "n/a"): an unavailable backend, a GPU-only case or a
reduced precision mode on a host device, a dtype the device or the reference cannot compute,
and on a host device the cells bigger than ``host_limit(backend, "auto")`` (an equivalent square
of 2048; ``POLYMM_ASV_HOST_MAX_N`` changes it). A quick run (``POLYMM_ASV_QUICK=1``) times one
round of the cell, measures the float32 and float64 cells only, and skips host cells above 512.
"""

from __future__ import annotations

import os

import numpy as np

import polymm
from polymm.tools import cliffs

from .common import BACKENDS, QUICK, host_limit

#: "<case> <dtype>" for every cell of the hand-chosen cases (the GPU grid is left out).
CELLS = [f"{case.name} {dtype}" for case, dtype in cliffs.select() if not case.name.startswith("grid-")]
_BY_NAME = {f"{case.name} {dtype}": (case, dtype) for case, dtype in cliffs.select()}

#: Seconds of interleaved timing per cell (the cliff suite's default is 0.8).
BUDGET = 0.0 if QUICK else float(os.environ.get("POLYMM_ASV_CLIFF_BUDGET", "0.8"))
#: Equivalent square above which a host device skips a cell in a quick run.
QUICK_HOST_MAX_N = 512


def _known_dtypes() -> set[str]:
    from polymm.backend import CONTRACT_DTYPES, optional_dtypes

    return {d.name for d in CONTRACT_DTYPES + optional_dtypes()}


class CliffCell:
    """Speed of ``polymm.matmul`` over the reference library's, per backend and cliff-suite cell."""

    version = "1"
    params = [BACKENDS, CELLS]
    param_names = ["backend", "cell"]
    timeout = 600

    def setup(self, backend, cell):
        case, dtype = _BY_NAME[cell]
        try:
            info = {i.name: i for i in polymm.backends()}[backend]
        except KeyError:
            raise NotImplementedError(f"backend {backend!r} is not installed here") from None
        if not info.available:
            raise NotImplementedError(f"backend {backend!r} is unavailable here")
        self.backend = target = cliffs._Backend(backend)
        if case.gpu_only and not target.on_gpu:
            raise NotImplementedError(f"{case.name} is a GPU-only case")
        if case.precision != "default" and target.ref_xp is np:
            raise NotImplementedError(f"precision {case.precision!r} is measured on CuPy backends only")
        if dtype not in _known_dtypes() or not target.can_measure(dtype):
            raise NotImplementedError(f"no reference computes {dtype} here")
        try:
            target.impl.check_dtype(np.dtype(dtype), None)
        except TypeError as exc:
            raise NotImplementedError(str(exc)) from None
        except Exception:  # noqa: BLE001 - backends that need a real operand to decide
            pass
        if QUICK and dtype not in cliffs.FLOAT_DTYPES:
            raise NotImplementedError("quick run: float32 and float64 cells only (each dtype is a kernel to load)")
        if not target.on_gpu:
            size = round(case.multiply_adds() ** (1 / 3))
            limit = min(host_limit(backend, "auto"), QUICK_HOST_MAX_N) if QUICK else host_limit(backend, "auto")
            if size > limit:
                raise NotImplementedError(f"{cell} is too slow for a host run (equivalent square {size} > {limit})")
        self.case, self.dtype = case, dtype

    def track_ratio(self, backend, cell):
        result = cliffs.measure_cell(self.backend, self.case, self.dtype, np.random.default_rng(2026), BUDGET)
        if not result.correct:
            raise AssertionError(f"{backend} {cell}: wrong answer: {result.error}")
        return result.ratio

    track_ratio.unit = "x reference"
