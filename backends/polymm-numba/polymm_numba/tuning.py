"""``polymm tune --backend cpu``: the packed kernel's blocking measured on this machine, in seconds.

The device database gives every machine of an ISA one blocking (``cpu-blocking``); machines of
one ISA still differ in FMA units, cache sizes and load ports, and the best register tile with
them. The tuner times, for float32 and float64, a few register tiles that fit this machine's
vector registers (``cpu-vectors``), then cache blocks (``kc``, ``mc``) around what its L1 and L2
hold, and records the fastest in the tuning file (:func:`polymm.kernels.params.tuning_path`),
where :mod:`.params` reads it in every later process. Each candidate is the parallel packed
kernel on every thread, as a program runs it (a tile must also share out well), timed by the
wall clock round-robin with the others (other processes on the machine then slow no candidate
more than another; on one thread, by the thread's CPU clock); the database's blocking stays
unless another is faster by more than :data:`MARGIN`.
"""

from __future__ import annotations

import datetime
import os
import time

import numpy as np

from . import params

__all__ = ["tile_candidates", "block_candidates", "caches", "team_candidates", "tune", "tune_teams"]

#: A candidate replaces the incumbent only when its best time is this much lower: the tuner
#: runs on machines shared with other work, where a few percent is noise.
MARGIN = 0.05


def caches() -> dict[str, int]:
    """This CPU's data cache sizes in bytes per core (``L1``, ``L2``) from Linux's sysfs; empty
    where it is not readable."""
    found = {}
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(os.listdir(root)):
            path = os.path.join(root, index)
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() not in ("Data", "Unified"):
                    continue
            with open(os.path.join(path, "level")) as f:
                level = int(f.read())
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1024, "M": 1024**2}.get(text[-1], 1)
            found[f"L{level}"] = int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return found


def tile_candidates(dtype) -> list[tuple[int, int]]:
    """``(mr, nr)`` register tiles worth timing for ``dtype``: the database's first, then for two,
    three and four vectors of B per row as many rows as the vector registers hold beside those
    vectors and the broadcast A value (at least 4 rows, at most 16)."""
    size = np.dtype(dtype).itemsize
    lanes = max(1, params.VECTOR_BYTES // size)
    blk = params.AUTO_BLOCKING[np.dtype(dtype)]
    found = [(blk.mr, blk.nr)]
    for vectors in (2, 3, 4):
        rows = min(16, (params.SMALL_REGS - vectors - 1) // vectors)
        if rows >= 4 and (rows, vectors * lanes) not in found:
            found.append((rows, vectors * lanes))
    return found


def block_candidates(dtype, mr: int, nr: int) -> list[tuple[int, int]]:
    """``(mc, kc)`` cache blocks worth timing with an ``mr`` x ``nr`` tile: the database's, and
    ``kc`` such that the packed ``kc x nr`` panel of B fills a half or all of L1 (it is reused by
    every row panel of the A block), ``mc`` such that the ``mc x kc`` block of A fills an eighth
    or a quarter of L2; ``mc`` a whole number of row panels."""
    size = np.dtype(dtype).itemsize
    blk = params.AUTO_BLOCKING[np.dtype(dtype)]
    l1, l2 = (caches().get(k) for k in ("L1", "L2"))
    kcs = {blk.kc, 256}
    if l1:
        kcs |= {max(64, l1 // (f * nr * size) // 32 * 32) for f in (1, 2)}
    found = []
    for kc in sorted(kcs):
        mcs = {blk.mc, 128}
        if l2:
            mcs |= {min(512, l2 // (f * kc * size)) for f in (4, 8)}
        for mc in sorted({max(mr, m // mr * mr) for m in mcs}):
            found.append((mc, kc))
    return found


#: The squares whose best team the tuner measures (``n``: ``n^3`` multiply-adds): the mid-size
#: products, where a team larger than the work can use is slowest (the large ones take every core).
TEAM_SIZES = (256, 512, 1024)
#: Calls of one team in a row (the first not timed): a call after a change of team size pays for
#: the change. 256^3 float32 on the 16-core GPU host (2026-12-02), timed one call a team: 0.23-0.27
#: ms on 16 threads, 2 threads fastest; in blocks of four: 0.13 ms on 16, the fastest
#: (benchmarks/cliffs/cpu-16core-team-blocks-2026-12-02-128c08e.log).
TEAM_BLOCK = 4


def team_candidates(cores: int) -> list[int]:
    """Team sizes worth timing on ``cores`` threads: one, two, a quarter, half and all of them."""
    return sorted({t for t in (1, 2, cores // 4, cores // 2, cores) if 1 <= t <= cores})


def tune_teams(name, sizes=TEAM_SIZES, seconds=0.5, log=print, command="polymm tune --backend cpu", save=True):
    """Measure, for squares of each of ``sizes``, which team of this machine's threads runs the
    ``"auto"`` kernel fastest (wall clock, best of round-robin calls, no neighbour; a smaller team
    within :data:`MARGIN` of the best wins: fewer threads leave more to the program's others) and
    (``save``) record the classes in the tuning file, where :func:`.params.team_cap` reads them;
    returns ``([work, team] pairs, evidence)``."""
    import numba

    import polymm
    from polymm.kernels.params import save_tuned_value

    backend = polymm.get_backend("cpu")
    dt = np.dtype(name)
    cores = numba.get_num_threads()
    teams = team_candidates(cores)
    rng = np.random.default_rng(1)
    saved = params.TEAMS.pop(dt, None)  # time every team, not the one a former tuning allows
    classes, seen = [], {}
    try:
        for n in sizes:
            a = rng.standard_normal((1, n, n)).astype(dt)
            b = rng.standard_normal((1, n, n)).astype(dt)
            out = np.empty((1, n, n), dt)

            def call(team):
                def run():
                    numba.set_num_threads(team)
                    try:
                        backend.matmul(a, b, out, "auto")
                    finally:
                        numba.set_num_threads(cores)

                return run

            calls = {team: call(team) for team in teams}
            for run in calls.values():  # compiled (or loaded) and warm before timing
                run()
            best = _time_round_robin(calls, seconds, clock=time.perf_counter, block=TEAM_BLOCK)
            fastest = min(best.values())
            team = min(t for t in teams if best[t] <= (1 + MARGIN) * fastest)
            classes.append([n**3, team])
            seen[str(n)] = {str(t): round(best[t] * 1e6, 1) for t in teams}
            log(f"  {n}^3: " + ", ".join(f"{t} threads {best[t] * 1e3:.3f} ms" for t in teams) + f": {team}")
    finally:
        if saved is not None:
            params.TEAMS[dt] = saved
    evidence = {
        "date": datetime.date.today().isoformat(),
        "device": f"{params.TUNING_KEY}, {os.cpu_count()} CPUs",
        "command": command,
        "result": f"{name} squares, best wall-clock time in us per team size: {seen}",
    }
    if save:
        entry = {
            "value": classes,
            "why": f"the fastest of {len(teams)} team sizes timed on this machine",
            "evidence": evidence,
        }
        log(f"{name}: teams {classes} written to {save_tuned_value(params.TUNING_KEY, f'cpu-teams {name}', entry)}")
    else:
        log(f"{name}: teams {classes} (not written)")
    return classes, evidence


def _time_round_robin(calls: dict, seconds: float, clock=time.thread_time, block: int = 1) -> dict:
    """The best time per call of each of ``calls`` by ``clock`` (default: this thread's CPU time;
    a parallel call needs the wall clock), taken ``block`` calls of each a round until ``seconds``
    have passed (at least three rounds). With ``block`` > 1 a block's first call is not timed: it
    pays for the change from the call before (a team of another size)."""
    times = {key: [] for key in calls}
    end = time.perf_counter() + seconds
    rounds = 0
    while rounds < 3 or time.perf_counter() < end:
        for key, call in calls.items():
            for i in range(block):
                start = clock()
                call()
                if i or block == 1:
                    times[key].append(clock() - start)
        rounds += 1
    return {key: min(t) for key, t in times.items()}


def tune(
    dtypes=params.TUNED_DTYPES,
    n=640,
    seconds=3.0,
    max_tiles=4,
    log=print,
    command="polymm tune --backend cpu",
    save=True,
    teams=TEAM_SIZES,
    large=1536,
):
    """Measure the blocking of each of ``dtypes`` and (``save``) record it in the tuning file, then
    the team sizes (:func:`tune_teams` for the squares of ``teams``; none: not measured);
    returns ``{dtype name: (Blocking, evidence)}``. ``n`` and ``large``: the sides of the square
    products timed on every thread (a candidate is scored by the geometric mean of its time
    ratios to the incumbent's at both: on the 2-core Xeon 14 x 32 was 3% faster than 8 x 32 at
    640 and 10% at 1536, on one thread); ``seconds``: per dtype and phase (tiles, then cache
    blocks); ``max_tiles``: register tiles tried (the database's first)."""
    import numba

    import polymm
    from polymm.kernels.params import save_tuned_value

    backend = polymm.get_backend("cpu")
    rng = np.random.default_rng(0)
    sizes = tuple(sorted({n, large or n}))
    threads = numba.get_num_threads()
    # on every thread, as the suite and the user's program run it: a tile must also share out
    # well (the 16-core host: float64 14 x 16 ran 9% faster than 6 x 32 on one thread, and its
    # 16-thread squares slower, square-1000 0.80x -> 0.64x NumPy, 2026-12-02). A parallel call
    # needs the wall clock; one thread is timed by its own CPU clock.
    kind, clock = ("auto_parallel", time.perf_counter) if threads > 1 else ("auto_serial", time.thread_time)
    where = f"on {threads} threads (wall clock)" if threads > 1 else "on one thread (CPU time)"
    found = {}
    for name in dtypes:
        dt = np.dtype(name)
        operands = {}
        for side in sizes:
            a = rng.standard_normal((1, side, side)).astype(dt)
            b = rng.standard_normal((1, side, side)).astype(dt)
            operands[side] = (a, b, np.empty((1, side, side), dt), a[0].astype(np.float64) @ b[0].astype(np.float64))
        incumbent = params.AUTO_BLOCKING[dt]

        def checked(blk, side):
            kernel = backend._packed(kind, dt, blk.mr, blk.nr)
            a, b, out, expect = operands[side]

            def fn():
                kernel(a, b, out, blk.mc, blk.nc, blk.kc, threads)

            fn()
            error = np.abs(out[0] - expect).max() / np.abs(expect).max()
            if not error < (1e-4 if dt.itemsize == 4 else 1e-12):
                raise RuntimeError(
                    f"polymm tune: the {name} blocking {blk} computed a wrong product (error {error:.1e})"
                )
            return fn

        def timed(blocks):
            """``{blocking: {side: best seconds}}``, every call compiled and checked first."""
            best = _time_round_robin(
                {(blk, side): checked(blk, side) for blk in blocks for side in sizes}, seconds, clock
            )
            return {blk: {side: best[(blk, side)] for side in sizes} for blk in blocks}

        def score(times, against):
            return float(np.prod([times[side] / against[side] for side in sizes]) ** (1 / len(sizes)))

        sizes_text = " and ".join(f"{side}^3" for side in sizes)

        def rate(times):
            return " / ".join(f"{2 * side**3 / times[side] / 1e9:.0f}" for side in sizes) + " GFLOP/s"

        tiles = []
        for mr, nr in tile_candidates(dt)[:max_tiles]:
            mc = max(mr, incumbent.mc // mr * mr)
            tiles.append(params.Blocking(mr, nr, mc, incumbent.nc, incumbent.kc))
        started = time.perf_counter()
        best = timed(tiles)  # compiled (or loaded from the cache) here
        log(
            f"{name}: {len(tiles)} register tiles timed at {sizes_text} {where} in {time.perf_counter() - started:.1f} s"
        )
        for blk, t in best.items():
            log(f"  {blk.mr:2d} x {blk.nr:2d} tile: {rate(t)}")
        winner = min(best, key=lambda blk: score(best[blk], best[tiles[0]]))
        if score(best[winner], best[tiles[0]]) > 1 - MARGIN:
            winner = tiles[0]
        blocks = [
            params.Blocking(winner.mr, winner.nr, mc, winner.nc, kc)
            for mc, kc in block_candidates(dt, winner.mr, winner.nr)
        ]
        blocks = [winner] + [blk for blk in blocks if blk != winner]
        times = timed(blocks)
        for blk, t in times.items():
            log(f"  mc {blk.mc:4d} kc {blk.kc:4d}: {rate(t)}")
        chosen = min(times, key=lambda blk: score(times[blk], times[winner]))
        if score(times[chosen], times[winner]) > 1 - MARGIN:
            chosen = winner
        evidence = {
            "date": datetime.date.today().isoformat(),
            "device": f"{params.TUNING_KEY}, {os.cpu_count()} CPUs, caches {caches()}",
            "command": command,
            "result": f"{name} {sizes_text} {where}, best of round-robin times: {rate(times[chosen])} "
            f"(the database's {incumbent.mr} x {incumbent.nr}, mc {incumbent.mc}, kc {incumbent.kc}: "
            f"{rate(best[tiles[0]])})",
        }
        value = {k: getattr(chosen, k) for k in ("mr", "nr", "mc", "nc", "kc")}
        why = f"the fastest of {len(tiles)} register tiles and {len(blocks)} cache blocks timed on this machine"
        if save:
            entry = {"value": value, "why": why, "evidence": evidence}
            log(f"{name}: {value} written to {save_tuned_value(params.TUNING_KEY, f'cpu-blocking {name}', entry)}")
        else:
            log(f"{name}: {value} (not written)")
        found[name] = (chosen, evidence)
        if teams:
            tune_teams(name, teams, seconds=seconds / 6, log=log, command=command, save=save)
    return found
