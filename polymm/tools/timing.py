"""Timing a call: the one helper behind ``polymm bench``, the cliff suite, the asv suite and the tuners.

A *clock* times ``inner`` calls of a function and returns seconds per call:
:func:`host_clock` (wall time until the device work is done: the latency a user
sees), :func:`cuda_clock` (CUDA events around each call) and :func:`event_clock`
(OpenCL profiling events of the event each call returns).  :func:`measure`
samples one call; :func:`interleaved` samples two in alternating blocks, so that
drift hits both alike while each side runs as if alone (the other's thread pools
asleep); :func:`alternating` samples two call by call, as a program that calls
both in turn runs them: each call then meets the threads the other left spinning.
:func:`shuffled` times several calls a round each, in a random order, on the
thread's CPU clock (the CPU A/B scripts).

The module imports nothing of polymm: the asv suite loads it by path, to time
older commits with the same helper.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

__all__ = [
    "Timing",
    "host_clock",
    "cuda_clock",
    "event_clock",
    "measure",
    "interleaved",
    "alternating",
    "shuffled",
    "BLOCK_SECONDS",
]

#: Seconds each side of :func:`interleaved` runs before the other takes over. A BLAS or OpenMP
#: pool keeps its threads spinning for a while after a call (OpenBLAS: about 0.1 s by default),
#: and on a small machine they take the cores from whoever runs next. A block outlasts that, and
#: the best sample of a block, taken once the other side's threads have gone to sleep, is what counts.
BLOCK_SECONDS = 0.2


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the best sample (what the code can do; other processes only add time)
    and the median (how steady it was), over ``samples`` samples."""

    best: float
    median: float
    samples: int


def host_clock(synchronize=None):
    """Wall clock around each call and ``synchronize()`` (the wait for its device work)."""

    def clock(fn, inner):
        total = 0.0
        for _ in range(inner):
            start = time.perf_counter()
            fn()
            if synchronize is not None:
                synchronize()
            total += time.perf_counter() - start
        return total / inner

    return clock


def cuda_clock():
    """CUDA events around each whole call (host work included: the GPU waits for it)."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()

    def clock(fn, inner):
        total = 0.0
        for _ in range(inner):
            start.record()
            fn()
            end.record()
            end.synchronize()
            total += cupy.cuda.get_elapsed_time(start, end) / 1e3
        return total / inner

    return clock


def event_clock():
    """OpenCL: ``fn`` returns the event of its (last) kernel; its profiling times count where the
    queue profiles, else the wall clock until the event completes."""

    def clock(fn, inner):
        total = 0.0
        for _ in range(inner):
            start = time.perf_counter()
            event = fn()
            event.wait()
            try:
                total += (event.profile.end - event.profile.start) * 1e-9
            except Exception:  # noqa: BLE001 - a queue without profiling: pyopencl raises on .profile
                total += time.perf_counter() - start
        return total / inner

    return clock


def measure(fn, clock=None, *, samples=7, min_sample=2e-3, budget=1.5, warm=True) -> Timing:
    """Time ``fn`` with ``clock`` (default: the host clock, ``fn`` synchronising itself).

    After a warm-up call, each sample repeats ``fn`` until it lasts ``min_sample`` so that
    microsecond calls are not lost in timer noise; sampling stops after ``samples`` samples or
    ``budget`` seconds, so a call that alone outlasts half the budget is measured once."""
    clock = clock or host_clock()
    if warm:
        clock(fn, 1)
    once = max(clock(fn, 1), 1e-9)
    if once >= budget / 2:
        return Timing(once, once, 1)
    inner = max(1, int(min_sample / once))
    times = [once] if inner == 1 else []
    start = time.perf_counter()
    while len(times) < samples and time.perf_counter() - start < budget:
        times.append(clock(fn, inner))
    return Timing(min(times), statistics.median(times), len(times))


def interleaved(
    first, second, budget, block_seconds=BLOCK_SECONDS, warm=(None, None)
) -> tuple[tuple[Timing, Timing], int]:
    """Time two ``(fn, clock)`` sides in alternating blocks; returns their timings and the rounds.

    Each sample runs enough calls to last ~10 ms; each side runs samples for ``block_seconds`` of
    wall time (at least two), then the other; rounds alternate which side goes first.  ``warm``:
    the seconds of a call a side has already made (its warm-up, and how long a call takes), or
    None to make one here (a 4096 float64 product on PoCL takes seconds).
    """
    sides = (first, second)
    once = [max(w if w is not None else clock(fn, 1), 1e-7) for w, (fn, clock) in zip(warm, sides)]
    inner = [max(1, int(0.01 / t)) for t in once]
    # A block lasts block_seconds by the wall clock, however long a call: the samples after the
    # other side's block share the cores with that side's still-spinning threads (OpenBLAS: ~0.1
    # s), and the best is taken once they sleep. Counted from one first call, which the spin
    # itself slows, the two blocks of square-256 float32 on the 2-core Xeon ran 36 calls (11 ms), all of
    # them inside the spin (2026-12-01): "alone" read 0.51x; and a block of one long call read
    # square-2048 float64 at 0.76x instead of ~0.9x, hence at least two samples a block.
    per_round = sum(max(block_seconds, 2 * i * t) for i, t in zip(inner, once))
    rounds = int(min(25, max(2, budget / per_round)))
    samples = ([], [])
    for r in range(rounds):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            fn, clock = sides[which]
            began, taken = time.perf_counter(), 0
            while taken < 2 or time.perf_counter() - began < block_seconds:
                samples[which].append(clock(fn, inner[which]))
                taken += 1
    timings = tuple(Timing(min(s), statistics.median(s), len(s)) for s in samples)
    return timings, rounds


def alternating(first, second, budget, warm=(None, None), min_rounds=3) -> tuple[tuple[Timing, Timing], int]:
    """Time two ``(fn, clock)`` sides call by call, as a program that calls both in turn: an
    untimed call of ``second``, then ``first`` and ``second`` each round, each call timed alone;
    returns their timings and the rounds.

    Every call follows one of the other side, so it starts while the threads of that call may
    still be spinning (OpenBLAS: about 0.1 s; an OpenMP pool: its wait policy), which
    :func:`interleaved`'s blocks deliberately let sleep. No call follows one of its own side or
    a pause: with the first call after a block of its own and the order swapped each round (two
    calls of a side back to back), the best sample read square-1024 float32 at 0.90x NumPy on a
    2-core Zen 4 where every polymm call right after a NumPy product took 0.49x (2026-12-04).
    Rounds run until ``budget`` seconds are spent, at least ``min_rounds`` and at most 2000;
    ``warm``: as for :func:`interleaved` (a side whose call time is known makes no warm-up call).
    """
    sides = (first, second)
    for w, (fn, clock) in zip(warm, sides):
        if w is None:
            clock(fn, 1)
    second[1](second[0], 1)  # so that first's first call, too, follows one of second's
    samples = ([], [])
    start = time.perf_counter()
    rounds = 0
    while rounds < min_rounds or (rounds < 2000 and time.perf_counter() - start < budget):
        for which, (fn, clock) in enumerate(sides):
            samples[which].append(clock(fn, 1))
        rounds += 1
    timings = tuple(Timing(min(s), statistics.median(s), len(s)) for s in samples)
    return timings, rounds


def shuffled(
    calls: dict, seconds: float, min_rounds: int = 3, clock=time.thread_time, before=None
) -> dict[str, list[float]]:
    """Time several named calls in rounds, each call once a round in a fresh random order,
    until ``seconds`` of wall time have passed and at least ``min_rounds`` rounds ran; returns
    every call's seconds. The default clock is this thread's CPU time: a one-thread kernel
    compared with another, other processes' load left out (the CPU A/B scripts). ``before``,
    when given, runs untimed ahead of every call (``scripts/cpu_team_ab.py``: a NumPy product,
    so that each call meets OpenBLAS's spinning threads as a user's program does)."""
    times = {name: [] for name in calls}
    order = list(calls)
    end = time.perf_counter() + seconds
    rounds = 0
    while rounds < min_rounds or time.perf_counter() < end:
        random.shuffle(order)
        for name in order:
            if before is not None:
                before()
            start = clock()
            calls[name]()
            times[name].append(clock() - start)
        rounds += 1
    return times
