"""Numba's compile events as polymm's compile log (:mod:`polymm.compilation`).

A kernel's callees compile inside its own compile event, so only the outermost event of a
listener counts: its start is the moment to tell the user (:meth:`CompileLog.starting`), its
end gives the seconds logged at DEBUG by :func:`polymm.compilation.compiled`. Loading a kernel
from Numba's cache sends no event.
"""

from __future__ import annotations

import time

from numba.core import event

from polymm.compilation import compiled


class CompileLog(event.Listener):
    """Times each compile of the kernel ``kind`` (for ``dtype``) it is installed around."""

    def __init__(self, dtype, kind: str):
        self.dtype = dtype
        self.kind = kind
        self.depth = 0
        self.start = 0.0

    def starting(self, ev) -> None:
        """Called once as the outermost compile begins (before the wait)."""

    def on_start(self, ev):
        if self.depth == 0:
            self.start = time.perf_counter()
            self.starting(ev)
        self.depth += 1

    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            compiled("cpu", self.dtype, self.kind, time.perf_counter() - self.start)
