"""A parallel product takes only the cores the process's other running threads leave."""

from __future__ import annotations

import hashlib
import platform
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
    """No other process counted as running (the machine the tests run on may be busy), and each
    thread's state read (the count a pool that may spin needs; a passive pool's is one read of the
    machine's count, which other processes would enter)."""
    monkeypatch.setattr(neighbours, "_running_elsewhere", lambda own, machine=None: 0)
    monkeypatch.setattr(neighbours, "PASSIVE", False)


def test_the_pool_waits_passively_on_many_cores_and_the_environment_is_left_as_it_was():
    """From cpu-threads.passive_from_cores cores the backend loads Numba's OpenMP layer with
    OMP_WAIT_POLICY=PASSIVE (its threads sleep as a launch ends, holding no core beside NumPy's) and
    removes the variable again; below it, and where the user set the variable, the runtime's own
    policy stays (a fresh process each; the core count as the database's threshold says)."""
    import os

    code = (
        "import os, sys, numpy as np; from polymm_numba import neighbours, params; "
        "neighbours._CPUS = int(sys.argv[1]); import polymm; "
        "polymm.matmul(np.ones((300, 300)), np.ones((300, 300))); import numba; "
        "print(neighbours.PASSIVE, numba.threading_layer(), os.environ.get('OMP_WAIT_POLICY'), params.PASSIVE_FROM_CORES)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}

    def run(cores, **extra):
        out = subprocess.run(
            [sys.executable, "-c", code, str(cores)], env={**env, **extra}, capture_output=True, text=True, check=True
        )
        return out.stdout.split()

    passive, layer, left, threshold = run(64)
    assert left == "None" and passive == str(layer == "omp"), (passive, layer, left)
    assert run(int(threshold) - 1) == ["False", layer, "None", threshold]
    assert run(64, OMP_WAIT_POLICY="ACTIVE") == ["False", layer, "ACTIVE", threshold]


def test_a_passive_pool_is_told_to_spin_its_window_first_and_the_environment_is_left_as_it_was():
    """With cpu-threads.pool_spin_seconds set, GNU OpenMP loads with GOMP_SPINCOUNT worth that many
    seconds of x86 pauses (timed here), then the variable goes; a user's own count stays, and the
    spin is then not known (no window). A fresh process each, planned as for 64 cores."""
    import os

    code = (
        "import os, sys, numba, numpy as np; from polymm_numba import neighbours, params; "
        "neighbours._CPUS = 64; params.POOL_SPIN_SECONDS = float(sys.argv[1]); seen = []; "
        "load = numba.get_num_threads; "
        "numba.get_num_threads = lambda: seen.append(os.environ.get('GOMP_SPINCOUNT')) or load(); "
        "import polymm; polymm.matmul(np.ones((300, 300)), np.ones((300, 300))); numba.get_num_threads = load; "
        "print(seen[0], os.environ.get('GOMP_SPINCOUNT'), neighbours.SPIN_WINDOW, numba.threading_layer())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}

    def run(seconds, **extra):
        out = subprocess.run(
            [sys.executable, "-c", code, str(seconds)], env={**env, **extra}, capture_output=True, text=True, check=True
        )
        return out.stdout.split()

    spins, left, window, layer = run(5e-5)
    if layer != "omp" or platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"GNU OpenMP's spin count on x86 only (threading layer {layer})")
    assert left == "None" and float(window) == 5e-5, (spins, left, window)
    pause = neighbours.pause_seconds()
    assert 1e-10 < pause < 2e-6, pause
    assert 0.2 < int(spins) * pause / 5e-5 < 5, (spins, pause)  # the same pauses, timed twice
    assert run(0) == ["None", "None", "0.0", layer]
    assert run(5e-5, GOMP_SPINCOUNT="77") == ["77", "77", "0.0", layer]


def test_the_passive_pool_still_spinning_from_our_last_launch_is_not_counted(tmp_path, monkeypatch):
    """For pool_spin_seconds after a launch the team's threads may still be running, spinning:
    the machine's count is taken less them (they are ours, and join the next launch); after the
    window they are asleep and every running thread but the caller is someone else's."""
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.50 0.40 0.30 16/120 4242\n")
    monkeypatch.setattr(neighbours, "_LOADAVG", str(loadavg))
    monkeypatch.setattr(neighbours, "PASSIVE", True)
    monkeypatch.setattr(neighbours, "_CPUS", 16)
    monkeypatch.setattr(neighbours, "SPIN_WINDOW", 60.0)
    monkeypatch.setattr(neighbours, "_spinning_until", 0.0)
    monkeypatch.setattr(neighbours, "_last_team", 1)
    assert neighbours.team_size(16, LOCK) == 1  # 15 others running: someone else's
    neighbours.launched(16)
    assert neighbours.team_size(16, LOCK) == 16  # our own 15, spinning
    loadavg.write_text("0.50 0.40 0.30 20/120 4242\n")
    assert neighbours.team_size(16, LOCK) == 12  # ours and 4 others
    monkeypatch.setattr(neighbours, "_spinning_until", time.perf_counter() - 1)
    assert neighbours.team_size(16, LOCK) == 1
    monkeypatch.setattr(neighbours, "SPIN_WINDOW", 0.0)
    neighbours.launched(16)  # no window: nothing noted
    assert neighbours.team_size(16, LOCK) == 1


def test_a_passive_pool_is_sized_from_the_machine_count_alone(tmp_path, monkeypatch):
    """With the pool asleep between launches, every runnable thread but the caller holds a core:
    one read of /proc/loadavg sizes the team; a product that outlasts OpenBLAS's spin still reads
    each thread (the spinners are then not counted)."""
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(neighbours, "_LOADAVG", str(loadavg))
    monkeypatch.setattr(neighbours, "PASSIVE", True)
    monkeypatch.setattr(neighbours, "_CPUS", 16)
    read = []
    monkeypatch.setattr(neighbours, "_running", lambda *a: read.append(a) or 0)
    for running, team in ((1, 16), (3, 14), (20, 1)):
        loadavg.write_text(f"0.50 0.40 0.30 {running}/120 4242\n")
        assert neighbours.team_size(16, LOCK) == team
    assert not read
    assert neighbours.team_size(8, LOCK) == 1  # 20 running: at least one thread
    neighbours.team_size(16, LOCK, outlasts_spin=True)
    assert read, "a long product reads the threads' states"


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
def test_a_product_that_outlasts_the_spin_takes_the_cores_of_the_process_running_threads():
    """OpenBLAS's threads spin about 0.1 s after NumPy's product: a product that will outlast that
    is not sized down for them (they will sleep), a shorter one is."""
    limit = numba.get_num_threads()
    a = np.random.default_rng(0).standard_normal((2, 300, 300))
    CPUBackend().matmul(a, a, np.empty_like(a), "auto")  # a parallel launch: the pool is known
    stop = threading.Event()
    worker = threading.Thread(target=_busy, args=(stop,), daemon=True)
    worker.start()
    try:
        time.sleep(0.05)
        short = {neighbours.team_size(limit, LOCK) for _ in range(50)}
        long = {neighbours.team_size(limit, LOCK, outlasts_spin=True) for _ in range(50)}
    finally:
        stop.set()
        worker.join()
    assert min(short) <= min(limit, neighbours._CPUS - 1), short
    assert long == {min(limit, neighbours._CPUS)}, long


def test_the_one_thread_estimate_weighs_the_spin_by_dtype_and_size():
    """The backend asks for the whole team where the one-thread estimate exceeds the spin (2
    threads: twice it): 4096 cubed of float32 does, 1024 cubed does not; float64 and complex
    take longer per multiply-add than float32."""
    from polymm_numba import params

    seconds = params.one_thread_seconds
    assert seconds(4096**3, "float32") > 2 * params.SPIN_SECONDS > seconds(1024**3, "float32")
    assert seconds(2048**3, "float64") == pytest.approx(2 * seconds(2048**3, "float32"))
    assert seconds(2048**3, "complex64") == pytest.approx(4 * seconds(2048**3, "float32"))


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


@pytest.mark.skipif(
    not neighbours.MAY_YIELD, reason="this process may not undo SCHED_IDLE (not root, RLIMIT_NICE < 20)"
)
def test_a_spinning_thread_beside_a_launch_is_idled_while_it_runs_and_given_its_policy_back(monkeypatch):
    """The threads beside a long product (OpenBLAS's spinning after a NumPy call; here a thread
    hashing without the GIL) are found running outside the pool, put on SCHED_IDLE for the
    launch, and back on SCHED_OTHER after, once the last of two overlapping launches ends."""
    import os

    monkeypatch.setattr(neighbours, "_pool", neighbours._pool_ids())  # the pool, asked
    stop = threading.Event()
    worker = threading.Thread(target=_busy, args=(stop,), daemon=True)
    worker.start()
    try:
        time.sleep(0.05)
        tid = worker.native_id
        assert any(tid in neighbours.spinning_threads() for _ in range(50))
        assert threading.get_native_id() not in neighbours.spinning_threads()
        with neighbours.yielding([tid]):
            assert os.sched_getscheduler(tid) == os.SCHED_IDLE
            with neighbours.yielding([tid]):
                assert os.sched_getscheduler(tid) == os.SCHED_IDLE
            assert os.sched_getscheduler(tid) == os.SCHED_IDLE  # the outer launch still runs
        assert os.sched_getscheduler(tid) == os.SCHED_OTHER
        with neighbours.yielding([tid, 2**22 + 12345]):  # a thread that has ended: skipped
            assert os.sched_getscheduler(tid) == os.SCHED_IDLE
        assert os.sched_getscheduler(tid) == os.SCHED_OTHER and not neighbours._yielded
    finally:
        stop.set()
        worker.join()


def test_nothing_is_idled_where_it_could_not_be_undone(monkeypatch):
    """An unprivileged process may idle its threads but not give them their policy back: then
    yielding changes nothing."""
    import os

    monkeypatch.setattr(neighbours, "MAY_YIELD", False)
    me = threading.get_native_id()
    before = os.sched_getscheduler(me)
    with neighbours.yielding([me]):
        assert os.sched_getscheduler(me) == before
    assert not neighbours._yielded
