"""The cliff suite in asv: per backend, the worst cell and the geometric mean of its ratios.

One run of :mod:`polymm.tools.cliffs` per backend (in ``setup_cache``, so asv runs the
whole matrix once per commit, not once per tracked number) feeds two tracked
figures per backend.  Both are ratios to the reference measured in the same run
(higher is better).  ``POLYMM_ASV_CLIFF_CASES`` narrows the matrix with the
same patterns as ``polymm bench --suite cliffs --cases``.
"""

from __future__ import annotations

import os

import polymm
from polymm.tools import cliffs

from .common import BACKENDS


def run_suite(backends=BACKENDS, cases=None, budget=0.8) -> dict:
    """``{backend: summary}`` for every available backend among ``backends``."""
    available = {i.name for i in polymm.backends() if i.available}
    names = [b for b in backends if b in available]
    cells = cliffs.run(names, cases=cases, budget=budget) if names else []
    return cliffs.summarise(cells)


class CliffSuite:
    """Worst cell and geomean of the cliff suite, per backend."""

    version = "1"
    params = [BACKENDS]
    param_names = ["backend"]
    timeout = 1800

    def setup_cache(self):
        return run_suite(cases=os.environ.get("POLYMM_ASV_CLIFF_CASES"))

    def setup(self, summary, backend):
        if backend not in summary:
            raise NotImplementedError(f"backend {backend} is unavailable here")

    def track_worst_cell(self, summary, backend):
        return summary[backend]["worst"]

    track_worst_cell.unit = "x reference"

    def track_geomean(self, summary, backend):
        return summary[backend]["geomean"]

    track_geomean.unit = "x reference"
