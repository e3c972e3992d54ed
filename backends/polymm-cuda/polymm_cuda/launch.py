"""Kernel launches with their arguments laid out once: the host path of every call.

CuPy's ``RawKernel.__call__`` converts every argument on every call (about 10 us for a product
kernel's 17 arguments and two tensor maps on the H100's host, a third of a whole 2048 float16
call). A product's arguments hardly change between calls: only the buffer addresses (A, B, C,
scratch) and the tensor maps built from them. So each launch keeps its arguments in one block
of host memory, with the array of pointers to them that the driver's ``cuLaunchKernel`` takes
(``kernelParams``; called through CuPy's own ``cupy.cuda.driver.launchKernel``); a call writes
the new addresses into their slots and launches. The driver copies the arguments during the
call, so the block may be rewritten by the next one; a lock per launch keeps threads (Dask's)
from writing it at the same time.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["Prepared"]

_ALIGN = 64  # bytes per argument slot boundary (a CUtensorMap wants 64)


class Prepared:
    """One kernel launch with its arguments laid out once: ``args`` as the backend converted
    them (NumPy scalars; None where a buffer address goes, at positions ``slots`` maps to buffer
    slots), after ``maps`` leading tensor maps (128 bytes each) when the kernel takes them.
    ``launch_kernel`` is ``cupy.cuda.driver.launchKernel``."""

    __slots__ = (
        "_launch",
        "_geometry",
        "_block",
        "_words",
        "_params",
        "_params_at",
        "_buffer_at",
        "_map_at",
        "_maps",
        "_lock",
    )

    def __init__(self, launch_kernel, function: int, grid, block, smem: int, args, slots, maps: int = 0):
        self._launch = launch_kernel
        self._geometry = (function, *grid, *block, smem)
        sizes = [128] * maps + [8 if a is None else np.asarray(a).nbytes for a in args]
        offsets, end = [], 0
        for size in sizes:
            offsets.append(end)
            end += -(-size // _ALIGN) * _ALIGN
        raw = np.zeros(end + _ALIGN, np.uint8)
        first = (-raw.ctypes.data) % _ALIGN  # the first slot 64-byte aligned
        self._block = raw[first : first + end]
        self._words = self._block.view(np.uint64)  # the buffer addresses' slots, as 64-bit words
        address = self._block.ctypes.data
        self._params = np.array([address + o for o in offsets], np.uint64)
        self._params_at = self._params.ctypes.data  # (a ctypes lookup per call costs a microsecond)
        for arg, offset in zip(args, offsets[maps:]):
            if arg is not None:
                value = np.frombuffer(np.asarray(arg).tobytes(), np.uint8)
                self._block[offset : offset + value.size] = value
        self._buffer_at = [(offsets[maps + pos] // 8, slot) for pos, slot in slots]  # uint64 words
        self._map_at = offsets[:maps]
        self._maps = None  # the maps now in the block
        self._lock = threading.Lock()

    def __call__(self, buffers, stream: int, maps=()) -> None:
        """Launch on ``stream`` with these buffer addresses (by slot) and encoded tensor maps."""
        words = self._words
        with self._lock:
            for at, slot in self._buffer_at:
                words[at] = buffers[slot]
            if maps and maps is not self._maps:
                for offset, tmap in zip(self._map_at, maps):
                    self._block[offset : offset + 128] = np.frombuffer(tmap.tobytes(), np.uint8)
                self._maps = maps
            self._launch(*self._geometry, stream, self._params_at, 0)
