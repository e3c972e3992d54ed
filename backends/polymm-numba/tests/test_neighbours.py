"""A parallel product takes only the cores the process's other running threads leave."""

from __future__ import annotations

import hashlib
import sys
import threading
import time

import numba
import numpy as np
import pytest

from polymm_numba import CPUBackend, neighbours

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or numba.get_num_threads() < 2, reason="counts threads in Linux's /proc"
)
LOCK = threading.Lock()


def _busy(stop):
    data = b"x" * (8 << 20)
    while not stop.is_set():
        hashlib.sha256(data).digest()  # C code without the GIL: the thread stays running


def test_a_running_thread_of_the_process_takes_a_core_from_the_team():
    limit = numba.get_num_threads()
    stop = threading.Event()
    worker = threading.Thread(target=_busy, args=(stop,), daemon=True)
    worker.start()
    try:
        seen = {neighbours.team_size(limit, LOCK) for _ in range(50)}
    finally:
        stop.set()
        worker.join()
    assert min(seen) <= min(limit, neighbours._CPUS - 1), seen
    time.sleep(0.2)
    assert neighbours.team_size(limit, LOCK) == min(limit, neighbours._CPUS)


def test_the_pools_own_threads_are_not_counted():
    """Numba's pool spins for a while after a parallel product: the next product still uses it all."""
    backend = CPUBackend()
    limit = numba.get_num_threads()
    a = np.random.default_rng(0).standard_normal((2, 300, 300))
    out = np.empty_like(a)
    for _ in range(5):
        backend.matmul(a, a, out, "auto")
        assert neighbours.team_size(limit, LOCK) == min(limit, neighbours._CPUS)
