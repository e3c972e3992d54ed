"""A parallel product takes only the cores the process's other running threads leave."""

from __future__ import annotations

import hashlib
import subprocess
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


@pytest.fixture
def quiet_machine(monkeypatch):
    """No other process counted as running (the machine the tests run on may be busy)."""
    monkeypatch.setattr(neighbours, "_running_elsewhere", lambda own, machine=None: 0)


def test_a_running_process_elsewhere_takes_a_core_from_the_team():
    limit = numba.get_num_threads()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        seen = {neighbours.team_size(limit, LOCK) for _ in range(50)}
    finally:
        busy.kill()
        busy.wait()
    assert min(seen) <= min(limit, neighbours._CPUS - 1), seen


def test_the_machine_count_leaves_out_this_process(tmp_path, monkeypatch):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.50 0.40 0.30 3/120 4242\n")
    monkeypatch.setattr(neighbours, "_LOADAVG", str(loadavg))
    assert neighbours._running_elsewhere(2) == 1 and neighbours._running_elsewhere(5) == 0
    monkeypatch.setattr(neighbours, "_LOADAVG", str(tmp_path / "missing"))
    assert neighbours._running_elsewhere(1) == 0


@pytest.mark.usefixtures("quiet_machine")
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


@pytest.mark.usefixtures("quiet_machine")
def test_the_pools_own_threads_are_not_counted(monkeypatch):
    """Numba's pool spins for a while after a parallel product: the next product still uses it all
    (other processes' running threads, such as a parallel test run's, are left out of the count)."""
    monkeypatch.setattr(neighbours, "_running_machine", lambda: 0)
    backend = CPUBackend()
    limit = numba.get_num_threads()
    a = np.random.default_rng(0).standard_normal((2, 300, 300))
    out = np.empty_like(a)
    for _ in range(5):
        backend.matmul(a, a, out, "auto")
        assert neighbours.team_size(limit, LOCK) == min(limit, neighbours._CPUS)
