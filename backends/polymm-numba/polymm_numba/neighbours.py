"""A good neighbour: a parallel product takes only the cores that nothing else is running on.

A user's program calls NumPy too. After each call OpenBLAS's threads keep spinning for a
while, each on a core of its own; a parallel kernel that then starts a thread per core waits
at its end for the thread that shares a core with a spinner: on 2 cores a 200 x 200 float64
product took 5.7 ms (median) right after a NumPy product against 0.12 ms alone. Other programs
on the machine do the same to it (a CI runner, a second job): on the 2-core Xeon with other
processes running (load average 3.2-3.8, 2026-11-27; ``python scripts/cpu_neighbours_ab.py``,
an A/B in one process, calls in random order), medians counting only this process's threads
against counting the machine's too: 200^3 float64 2.27 -> 0.48 ms, 256^3 float32 1.82 -> 0.43,
512^3 float32 10.1 -> 3.2, 1024^3 float32 47 -> 21, 2048^3 float64 370 -> 325 (the best calls,
taken in the moments the other core was free: 0.23 -> 0.27, 1.26 -> 2.20, 172 -> 301 ms).
So before a parallel launch the backend counts the threads of this process that are
running now (Linux's ``/proc/self/task/*/stat``, state ``R``), leaving out the calling thread
and Numba's own pool (whose threads may be spinning from our last call, and join the next),
and those of other processes (the machine's runnable count of ``/proc/loadavg`` less this
process's), and runs on the cores that remain. Elsewhere (no ``/proc``) nothing is counted and
every thread is used. A product long enough to use the spinners' cores takes them instead
(``cpu-threads.share_spin_seconds``), and where the process may undo it the spinners wait on
``SCHED_IDLE`` while it runs (:func:`yielding`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils, event
from numba.extending import intrinsic

from .compile_log import CompileLog

__all__ = ["team_size", "start_pool", "launched", "spinning_threads", "yielding"]

_TASKS = "/proc/self/task"
#: ``gettid``'s system call number (Linux), or 0 where it is not known here (nothing is counted).
SYS_GETTID = {"x86_64": 186, "aarch64": 178}.get(os.uname().machine, 0) if hasattr(os, "uname") else 0
_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_pool: set[int] = set()  # native ids of Numba's pool threads (the caller's included)
_pool_size = 0  # the number of the process's threads when _pool was taken


@intrinsic
def _native_thread_id(typingctx):
    """The calling thread's native id (Linux ``gettid``; the symbol ``syscall`` of the C library)."""

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64], var_arg=True), "syscall")
        return builder.call(fn, [ir.Constant(i64, SYS_GETTID)])

    return types.int64(), codegen


@numba.njit(parallel=True, cache=True)
def pool_thread_ids(n):
    """The native id of the thread that ran each of ``n`` short iterations: with many more
    iterations than threads, every thread of the pool takes some."""
    out = np.zeros(n, np.int64)
    for i in prange(n):
        s = 0.0
        for j in range(2000):
            s += j * 1e-9
        out[i] = _native_thread_id() + (s < 0)
    return out


def _pool_ids() -> set[int]:
    """The native thread ids that run a parallel loop: every thread of Numba's pool takes some of
    many short iterations (the loop is cached on disk; it compiles once)."""
    with event.install_listener("numba:compile", CompileLog("int64", "pool_thread_ids")):
        return set(pool_thread_ids(64 * numba.get_num_threads()).tolist())


def _running_others(tasks: list[str], pool: set[int]) -> tuple[int, int]:
    """Of the threads ``tasks`` (ids) in state R: how many are outside ``pool`` and the caller,
    and how many in all (the caller counted as running)."""
    others = _running(tasks, pool, False)
    return others, 1 + others + _running(tasks, pool, True)


def _running(tasks: list[str], pool: set[int], in_pool: bool) -> int:
    """How many of the threads ``tasks`` (ids), the caller left out, in ``pool`` (``in_pool``)
    or outside it, are in state R."""
    me = threading.get_native_id()
    running = 0
    for tid in tasks:
        if int(tid) == me or (int(tid) in pool) != in_pool:
            continue
        stat = _stat(tid)
        if stat:
            running += stat[stat.rindex(b")") + 2] == ord("R")
    return running


def spinning_threads() -> list[int]:
    """The ids of this process's threads running now outside Numba's pool and the caller
    (OpenBLAS's, spinning after a NumPy product; a thread of the program's own computing); none
    until the pool is learnt (:func:`team_size`), or past :data:`MAX_THREADS_READ` threads."""
    if not _pool or not SYS_GETTID:
        return []
    try:
        tasks = os.listdir(_TASKS)
    except OSError:
        return []
    if len(tasks) > MAX_THREADS_READ:
        return []
    me = threading.get_native_id()
    found = []
    for tid in tasks:
        if int(tid) == me or int(tid) in _pool:
            continue
        stat = _stat(tid)
        if stat and stat[stat.rindex(b")") + 2] == ord("R"):
            found.append(int(tid))
    return found


def _may_restore_policy() -> bool:
    """Whether this process may give its threads back their normal scheduling once idled (root,
    or a ``RLIMIT_NICE`` of 20 or more): an unprivileged process may put a thread of its own on
    ``SCHED_IDLE`` but not take it off again, so :func:`yielding` idles none where it could not
    undo it."""
    try:
        if os.geteuid() == 0:
            return True
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
        return soft == resource.RLIM_INFINITY or soft >= 20
    except (AttributeError, ImportError, OSError, ValueError):
        return False


MAY_YIELD = hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE") and _may_restore_policy()
_yielded: dict[int, int] = {}  # thread id -> the launches yielding it now
_yielded_lock = threading.Lock()


@contextlib.contextmanager
def yielding(tids):
    """While the block runs (a launch of ours), the threads ``tids`` of this process on
    ``SCHED_IDLE``, which runs a thread only where no other wants the core, and back on
    ``SCHED_OTHER`` after: another pool's threads spinning beside the launch (OpenBLAS's, for
    about 0.1 s after every NumPy product) then give its threads their cores at once. Nothing is
    changed where it could not be undone (:data:`MAY_YIELD`), nor a thread on another policy;
    launches from several threads at once share the change (the last to end restores). A
    thread of the program's own that computes beside the launch waits for it the same way."""
    held = []
    if tids and MAY_YIELD:
        with _yielded_lock:
            for tid in tids:
                if tid in _yielded:
                    _yielded[tid] += 1
                    held.append(tid)
                    continue
                try:
                    if os.sched_getscheduler(tid) != os.SCHED_OTHER:
                        continue
                    os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                except OSError:  # the thread has ended
                    continue
                _yielded[tid] = 1
                held.append(tid)
    try:
        yield
    finally:
        if held:
            with _yielded_lock:
                for tid in held:
                    _yielded[tid] -= 1
                    if _yielded[tid] == 0:
                        del _yielded[tid]
                        try:
                            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                        except OSError:  # the thread has ended
                            pass


#: ``/proc`` files kept open by path (a thread's ``stat``, ``/proc/loadavg``): read again with one
#: ``pread`` each (the kernel writes the text anew at offset 0). Opening, reading and closing one
#: per call cost 5-12 us on the 2-core VM; a product on 16 cores reads up to 30 of them.
_OPEN: dict[str, int] = {}


def _read_proc(path: str, size: int) -> bytes:
    """The text of ``path`` read through a file kept open, or empty where it cannot be read (a
    thread that has ended: its file reads ESRCH, or is gone)."""
    fd = _OPEN.get(path)
    try:
        if fd is None:
            if len(_OPEN) > 2 * MAX_THREADS_READ:  # threads come and go: keep the open files few
                _forget_open_files()
            fd = _OPEN[path] = os.open(path, os.O_RDONLY)
        return os.pread(fd, size, 0)
    except OSError:
        fd = _OPEN.pop(path, None)
        if fd is not None:
            os.close(fd)
        return b""


def _forget_open_files() -> None:
    for fd in _OPEN.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _OPEN.clear()


def _stat(tid: str) -> bytes:
    """Thread ``tid``'s ``stat`` line, or empty where the thread has ended."""
    return _read_proc(f"{_TASKS}/{tid}/stat", 512)


_LOADAVG = "/proc/loadavg"


def _running_machine() -> int:
    """The machine's runnable threads now, the caller's included (the fourth field of
    ``/proc/loadavg``, ``running/total``, read through a file kept open); 0 where unknown."""
    try:
        return int(_read_proc(_LOADAVG, 128).split()[3].split(b"/")[0])
    except (ValueError, IndexError):
        return 0


def _running_elsewhere(own: int, machine: int | None = None) -> int:
    """Threads of other processes running now: the machine's runnable threads (``machine``, else
    read now) less ``own``, this process's; 0 where unknown."""
    return max(0, (_running_machine() if machine is None else machine) - own)


#: Past this many threads in the process, reading each one's state costs more than it saves.
MAX_THREADS_READ = 128


_before: set[int] | None = None  # the process's threads before polymm's first parallel launch
_expected = 0  # the threads that launch should have started (its team less the caller)
_snapshot = True  # until the pool is learnt: take the threads now as the ones before the launch


def _learn_pool(tasks: list[str], launch_lock: threading.Lock) -> None:
    """Learn which of the process's threads ``tasks`` (ids) are Numba's pool.

    OpenMP and TBB start a pool's threads at its first parallel launch. So until polymm's first
    launch the threads are kept as they are, and after it the pool is the threads that appeared,
    when they are as many as that launch's team less the caller. Otherwise (a pool that started
    before, Numba's workqueue layer, which starts its threads beforehand, a thread another
    library started in between) :func:`pool_thread_ids` asks the pool itself. A cold start is
    spared that probe's compile (0.35 s on the 2-core Xeon)."""
    global _pool, _pool_size, _before, _snapshot
    if _snapshot and _before is not None and _expected > 0:
        _snapshot = False
        new = {int(t) for t in tasks} - _before
        if len(new) == _expected:
            _pool, _pool_size = new, len(tasks)
            return
    if _snapshot:  # no launch of ours yet: every other thread is someone else's; learn again next call
        _before, _pool, _pool_size = {int(t) for t in tasks}, set(), -1
        return
    with launch_lock:
        _pool = _pool_ids()
        _pool_size = len(os.listdir(_TASKS))  # counted after: the launch may have started the pool


#: Whether Numba's pool waits passively between launches (:func:`start_pool`): its threads then
#: sleep as soon as a launch ends (or :data:`SPIN_WINDOW` after it), hold no core, and need not be
#: told from other running threads.
PASSIVE = False
#: How long (seconds) the passive pool's threads spin after a launch of ours before they sleep
#: (``cpu-threads.pool_spin_seconds``; 0: at once).
SPIN_WINDOW = 0.0
_started = False
_spinning_until = 0.0  # perf_counter() until which our last launch's team may still be spinning
_last_team = 1


def _openmp_loaded(names=("libgomp", "libiomp", "libomp.")) -> bool:
    """Whether an OpenMP runtime (one of ``names``) is loaded in this process."""
    try:
        with open("/proc/self/maps") as f:
            return any(name in line for line in f for name in names)
    except OSError:
        return True  # unknown: assume so, and leave its settings alone


@intrinsic
def _pause(typingctx):
    """x86's ``pause``: the instruction GNU OpenMP's threads run once per spin while they wait."""

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


@numba.njit(cache=True)
def _pauses(n):
    for _ in range(n):
        _pause()


def pause_seconds() -> float:
    """How long one ``pause`` takes here (the best of a few timings of 20,000): 10-65 cycles on
    AMD's cores, about 140 on Intel's since Skylake, so a spin count means a different time on each."""
    with event.install_listener("numba:compile", CompileLog("int64", "_pauses")):
        _pauses(100)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        _pauses(20000)
        best = min(best, time.perf_counter() - start)
    return best / 20000


def start_pool(passive_from_cores: int, spin_seconds: float = 0.0) -> None:
    """Load Numba's threading layer; on ``passive_from_cores`` cores or more, its OpenMP threads
    set to wait passively when nothing says otherwise, spinning ``spin_seconds`` first.

    OpenMP's threads spin after each parallel region before they sleep (GNU's: about 300,000
    spins). On many cores that spin holds the cores OpenBLAS's threads need beside it: on the
    16-core GPU host a 256^3 float32 NumPy product right after polymm's took 3.8 ms (median)
    against 80 us with the pool passive, and the cliff suite's geomean went from 0.75x to 1.00x
    (2026-11-28, ``cpu-threads.passive_from_cores``). On 2 cores too: there the spin held the
    core NumPy's worker needs for its next call (NumPy's 1024^3 float32 products 8 ms slower right
    after ours; the suite's program ratio 1.07x spinning, 1.32x passive, 2026-12-04); waking the
    sleeping thread costs a short product far less. ``OMP_WAIT_POLICY=PASSIVE`` is set while the layer loads (the
    runtime reads it then) and removed after, for other libraries that load a runtime of their
    own; a user's own ``OMP_WAIT_POLICY``, or a runtime already loaded, is left as it is.

    Waking a sleeping pool cost each launch 20-90 us on one 16-core host (6.6 us on another),
    and a packed product launches twice per K block; so GNU's runtime may be told to spin a
    short while first (``GOMP_SPINCOUNT``: ``spin_seconds`` over :func:`pause_seconds`), long
    enough for a product's next launch, short against NumPy's next call. A user's own
    ``GOMP_SPINCOUNT`` is left as it is (and the spin, not known then, taken as none).
    """
    global PASSIVE, SPIN_WINDOW, _started
    if _started:
        return
    _started = True
    user = os.environ.get("OMP_WAIT_POLICY")
    if user is not None or _CPUS < passive_from_cores or _openmp_loaded():
        numba.get_num_threads()  # loads the layer
        PASSIVE = (user or "").strip().upper() == "PASSIVE" and numba.threading_layer() == "omp"
        return
    spins = 0
    if spin_seconds > 0 and "GOMP_SPINCOUNT" not in os.environ and platform.machine().lower() in ("x86_64", "amd64"):
        spins = max(1, round(spin_seconds / pause_seconds()))
    env = {"OMP_WAIT_POLICY": "PASSIVE", **({"GOMP_SPINCOUNT": str(spins)} if spins else {})}
    os.environ.update(env)
    try:
        numba.get_num_threads()  # loads the layer: an OpenMP runtime reads the variables now
    finally:
        for name in env:
            os.environ.pop(name, None)
    PASSIVE = numba.threading_layer() == "omp"
    if PASSIVE and spins and _openmp_loaded(("libgomp",)):
        SPIN_WINDOW = spin_seconds


def launched(team: int) -> None:
    """Note a parallel launch of ``team`` threads that has just ended: for :data:`SPIN_WINDOW`
    its threads but the caller may still be running, spinning, and are not other work."""
    global _spinning_until, _last_team
    if SPIN_WINDOW and team > 1:
        _spinning_until = time.perf_counter() + SPIN_WINDOW
        _last_team = team


def team_size(limit: int, launch_lock: threading.Lock, outlasts_spin: bool = False) -> int:
    """How many of ``limit`` threads a parallel launch should use now: the CPUs this process may
    run on, less the other threads running now (of this process, and of others), at least 1. ``launch_lock``
    is held while the pool's ids are learnt (a parallel launch of its own: Numba's workqueue
    layer must not see two at once). ``outlasts_spin``: the product will run longer than another
    pool of this process keeps spinning after its work (OpenBLAS's, about 0.1 s), so that pool's
    running threads are not counted: they will sleep, and the team then has their cores (a
    thread of the program's own that keeps computing shares its core with one of ours)."""
    if limit <= 1 or not SYS_GETTID:
        return max(1, limit)
    if PASSIVE and not outlasts_spin:
        # the pool sleeps between launches: every runnable thread but the caller holds a core
        # (another program's, or OpenBLAS's spinning after a NumPy product), and one read of the
        # machine's count finds them all. Reading each thread's state cost 88 us a call on the
        # 16-core GPU host (46 threads), more than a 256^3 product there.
        machine = _running_machine()
        if machine and time.perf_counter() < _spinning_until:
            machine = max(1, machine - (_last_team - 1))  # our last team, still spinning
        if machine:
            return _team(max(1, min(limit, _CPUS - (machine - 1))))
    try:
        tasks = os.listdir(_TASKS)
    except OSError:  # no /proc: nothing to count
        return limit
    if len(tasks) > MAX_THREADS_READ:
        return limit
    if len(tasks) != _pool_size:  # new threads (a pool started, the team grew): learn the pool again
        _learn_pool(tasks, launch_lock)
    # The process's threads outside the pool first (after a NumPy product, OpenBLAS's spinning
    # ones): where they leave one core, that is the answer, without reading the pool's threads and
    # the machine's count (each /proc read costs 5-12 us on a 2-core VM; all of it was 50 us a call)
    others = _running(tasks, _pool, False)
    held = 0 if outlasts_spin else others
    if _CPUS - held <= 1:
        return _team(1)
    machine = _running_machine()
    if machine == 1:  # the caller alone runs: every core is free (one small file read, a few us)
        return _team(min(limit, _CPUS))
    own = 1 + others + _running(tasks, _pool, True)
    return _team(max(1, min(limit, _CPUS - held - _running_elsewhere(own, machine))))


def _team(size: int) -> int:
    """``size``, noted while the pool is not yet learnt: the threads its launch should start."""
    global _expected
    if _snapshot:
        _expected = size - 1
    return size
