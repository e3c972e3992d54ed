"""Which decomposition of a Dask ``x1 @ x2`` moves the fewest bytes between workers: a cost model and a chooser.

Pure Python over block sizes and a placement (which workers hold which operand
block); it imports neither Dask nor ``distributed``, so the chooser is tested on
synthetic placements.  :mod:`polymm.dask` reads the placement of persisted
operands from the active ``distributed`` client, asks :func:`choose`, and builds
the chosen graph.

The schedules of a 2-D product ``C[i, j] = sum_k A[i, k] B[k, j]`` (blocks
``A[i, k]`` of ``x1``, ``B[k, j]`` of ``x2``):

``"panel"``
    one task per output block on the whole K panels, placed by Dask's scheduler;
``"tree"``
    one task per ``(i, j, k)`` and a tree sum over ``k``, placed by Dask;
``"broadcast"``
    the panel tasks pinned where the larger operand's panels live: ``C[i, :]``
    on the worker holding row panel ``A[i, :]`` (or ``C[:, j]`` on the holder of
    ``B[:, j]``); the smaller operand travels once to each worker that lacks it,
    not once per output block;
``"grid"``
    the panel tasks pinned in a ``pr x pc`` grid of workers (SUMMA's data
    movement: a worker receives the row panels of its grid row and the column
    panels of its grid column once, and fetches the next task's panels while it
    computes), the grid and the worker of each cell chosen to match where the
    blocks already are;
``"split-k"``
    K split by where its blocks live: each worker multiplies the K blocks it
    holds (one kernel on its concatenated blocks) and only the partial output
    blocks move, to be summed: for deep K, where the operands dwarf the result.

Where two whole K panels exceed ``panel_limit``, ``"broadcast"`` and ``"grid"`` are
*streamed* (:func:`streamed`): the same pins and bytes, but each output block is
summed on its worker one K block at a time (``acc + A[i, k] @ B[k, j]``, a task a
step), so no task holds more than one block of each operand and the worker fetches
the next step's blocks while it computes (SUMMA with its panels streamed). On four
H200s a 49152 square's 2 x 2 grid would otherwise concatenate 3 GiB panels per task.

The cost of a pinned schedule is exact in this model: a worker fetches each
block it lacks once and keeps it for its later tasks (Dask keeps the replica),
so the bytes moved are, per worker, the bytes of the blocks its tasks read and
it does not hold, plus the partial products sent to their sum.  Blocks nobody
holds yet (an operand that is not persisted) count as moved to every worker that
reads them.  The chooser takes the pinned schedule that moves the fewest bytes
among those that keep every worker's share of the flops within
:data:`BALANCE` of an even split (or no worse than the grid's, which is balanced
to the block); ties go to the fewer, larger tasks (a streamed schedule last).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["SCHEDULES", "PINNED", "BALANCE", "Blocks", "Plan", "choose", "cost", "candidates", "streamed"]

#: Every schedule :func:`polymm.dask.matmul` can build; "auto" lets :func:`choose` pick.
SCHEDULES = ("auto", "panel", "tree", "broadcast", "grid", "split-k")

#: The schedules whose tasks are pinned to workers (they need to know where the blocks live).
PINNED = ("broadcast", "grid", "split-k")

#: A pinned schedule may give a worker at most this multiple of an even share of the flops.
BALANCE = 1.25

#: Tie-break between equal byte counts: fewer, larger tasks first.
_PREFERENCE = ("broadcast", "grid", "split-k")


@dataclass(frozen=True)
class Blocks:
    """The block structure of a 2-D product: row chunks of ``x1``, common K chunks, column chunks of ``x2``."""

    rows: tuple[int, ...]
    ks: tuple[int, ...]
    cols: tuple[int, ...]
    itemsize1: int = 4
    itemsize2: int = 4
    itemsize_out: int = 4  # of the partial products (the accumulation dtype)

    def a(self, i, k) -> int:
        return self.rows[i] * self.ks[k] * self.itemsize1

    def b(self, k, j) -> int:
        return self.ks[k] * self.cols[j] * self.itemsize2

    def c(self, i, j) -> int:
        return self.rows[i] * self.cols[j] * self.itemsize_out

    def flops(self, i, j, ks=None) -> int:
        depth = sum(self.ks) if ks is None else sum(self.ks[k] for k in ks)
        return 2 * self.rows[i] * self.cols[j] * depth

    @property
    def total_flops(self) -> int:
        return 2 * sum(self.rows) * sum(self.cols) * sum(self.ks)


@dataclass
class Plan:
    """A chosen schedule: what, where, why, and the bytes it is expected to move between workers.

    ``assignment`` maps output blocks ``(i, j)`` to a worker (pinned panel
    schedules); ``groups`` maps a worker to the K blocks it multiplies and
    ``finals`` an output block to the worker that sums it (``"split-k"``).
    ``candidates`` gives every schedule considered with its estimate (or the
    reason it was not considered).  ``str(plan)`` is the report
    :func:`polymm.dask.explain` prints.
    """

    schedule: str
    reason: str
    bytes_moved: int | None
    workers: tuple[str, ...] = ()
    placement: str = "unknown"
    assignment: dict | None = None
    groups: dict | None = None
    finals: dict | None = None
    grid: tuple[int, int] | None = None
    candidates: dict = field(default_factory=dict)
    blocks: Blocks | None = None
    rechunk: str | None = None
    shapes: tuple | None = None
    loads: dict | None = None
    streamed: bool = False

    def __str__(self) -> str:
        head = "polymm.dask.explain"
        if self.shapes is not None:
            head += f": {tuple(self.shapes[0])} @ {tuple(self.shapes[1])}"
        lines = [head]
        if self.blocks is not None:
            b = self.blocks
            lines.append(f"blocks    {len(b.rows)} x {len(b.cols)} output blocks, {len(b.ks)} along K")
        n = len(self.workers)
        lines.append(f"workers   {n}" + (f" ({', '.join(self.workers)})" if 0 < n <= 8 else ""))
        lines.append(f"placement {self.placement}")
        if self.rechunk:
            lines.append(f"rechunk   {self.rechunk}")
        lines.append(f"schedule  {self.schedule}: {self.reason}")
        if self.grid is not None:
            lines.append(f"grid      {self.grid[0]} x {self.grid[1]} workers")
        lines.append(f"moves     {_fmt(self.bytes_moved)} between workers (estimate)")
        if self.loads and self.blocks is not None:
            total = self.blocks.total_flops or 1
            shares = ", ".join(f"{w}: {100 * f / total:.0f}%" for w, f in self.loads.items())
            lines.append(f"flops     {shares}")
        for name, value in self.candidates.items():
            mark = "*" if name == self.schedule else " "
            text = _fmt(value) if isinstance(value, int) else value
            lines.append(f"  {mark} {name:10} {text}")
        return "\n".join(lines)


def streamed(plan: Plan) -> Plan:
    """``plan`` (``"broadcast"`` or ``"grid"``) with K streamed block by block into each output
    block instead of whole K panels per task; the pins and the bytes moved stay as they are."""
    plan.streamed = True
    plan.reason += "; K streamed a block at a time into each output block (whole K panels exceed panel_limit)"
    return plan


def _fmt(nbytes) -> str:
    if nbytes is None:
        return "unknown"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit} ({nbytes} bytes)"
    return f"{nbytes} bytes"


# -- the cost model -------------------------------------------------------------------------------


def _missing(blocks: Blocks, worker, needs1, needs2, holders1, holders2) -> int:
    """Bytes of the blocks ``worker`` reads and does not hold."""
    moved = 0
    for key in needs1:
        if worker not in holders1.get(key, ()):
            moved += blocks.a(*key)
    for key in needs2:
        if worker not in holders2.get(key, ()):
            moved += blocks.b(*key)
    return moved


def cost_assignment(blocks: Blocks, assignment: Mapping, holders1: Mapping, holders2: Mapping) -> tuple[int, dict]:
    """Bytes moved by whole-K panel tasks placed by ``assignment`` ((i, j) -> worker), and each worker's flops.

    A worker reads the row panels of the output rows it has and the column panels of its output
    columns, each once, whatever the number of its output blocks in that row or column."""
    rows: dict = {}
    cols: dict = {}
    loads: dict = {}
    for (i, j), w in assignment.items():
        rows.setdefault(w, set()).add(i)
        cols.setdefault(w, set()).add(j)
        loads[w] = loads.get(w, 0) + blocks.flops(i, j)
    nk = len(blocks.ks)
    moved = 0
    for w in rows:
        moved += sum(blocks.a(i, k) for i in rows[w] for k in range(nk) if w not in holders1.get((i, k), ()))
        moved += sum(blocks.b(k, j) for j in cols[w] for k in range(nk) if w not in holders2.get((k, j), ()))
    return moved, loads


def cost_split_k(blocks: Blocks, groups: Mapping, finals: Mapping, holders1: Mapping, holders2: Mapping):
    """Bytes moved when each worker multiplies its K blocks (``groups``: worker -> k indices) for every output
    block and the partial products travel to ``finals[(i, j)]``; and each worker's flops."""
    nm, nn = len(blocks.rows), len(blocks.cols)
    moved = 0
    loads = {}
    for w, ks in groups.items():
        n1 = {(i, k) for i in range(nm) for k in ks}
        n2 = {(k, j) for k in ks for j in range(nn)}
        moved += _missing(blocks, w, n1, n2, holders1, holders2)
        loads[w] = sum(blocks.flops(i, j, ks) for i in range(nm) for j in range(nn))
    for (i, j), w in finals.items():
        moved += sum(blocks.c(i, j) for g in groups if g != w)
    return moved, loads


def cost(plan: Plan, holders1: Mapping, holders2: Mapping) -> int:
    """The bytes ``plan`` moves, by the model above (pinned schedules only)."""
    if plan.groups is not None:
        return cost_split_k(plan.blocks, plan.groups, plan.finals, holders1, holders2)[0]
    return cost_assignment(plan.blocks, plan.assignment, holders1, holders2)[0]


# -- the candidates --------------------------------------------------------------------------------


def _owner(keys, size, holders, workers, fallback, load=None):
    """The worker holding the most bytes of ``keys`` (ties: the least loaded so far in ``load``, then the
    earlier in ``workers``), or ``fallback`` when nobody holds any."""
    held = {w: 0 for w in workers}
    for key in keys:
        for w in holders.get(key, ()):
            if w in held:
                held[w] += size(*key)
    load = load or {}
    best = max(workers, key=lambda w: (held[w], -load.get(w, 0)))
    return best if held[best] > 0 else fallback


def _split(sizes: Sequence[int], parts: int) -> list[int]:
    """Each index's part when ``sizes`` are cut into ``parts`` contiguous runs of about equal sum."""
    total = sum(sizes) or 1
    out, before = [], 0
    for s in sizes:
        out.append(min(parts - 1, (2 * before + s) * parts // (2 * total)))
        before += s
    return out


def _broadcast(blocks, workers, holders1, holders2, along):
    """Pinned panels following the larger operand: rows of C where ``A[i, :]`` lives (``along="rows"``),
    or columns of C where ``B[:, j]`` lives."""
    nm, nk, nn = len(blocks.rows), len(blocks.ks), len(blocks.cols)
    sizes, size, holders = (blocks.rows, blocks.a, holders1) if along == "rows" else (blocks.cols, blocks.b, holders2)
    home = _split(sizes, len(workers))
    load: dict = {}
    owners = []
    for n in range(len(sizes)):
        keys = [(n, k) for k in range(nk)] if along == "rows" else [(k, n) for k in range(nk)]
        w = _owner(keys, size, holders, workers, workers[home[n]], load)
        load[w] = load.get(w, 0) + sizes[n]
        owners.append(w)
    if along == "rows":
        return {(i, j): owners[i] for i in range(nm) for j in range(nn)}
    return {(i, j): owners[j] for i in range(nm) for j in range(nn)}


def _grids(blocks, workers, holders1, holders2):
    """The pinned ``pr x pc`` grid (over the factorisations of the worker count, and the orders of the workers
    over its cells) that moves the fewest bytes: [bytes, loads, assignment, (pr, pc)], or [] when none fits."""
    p = len(workers)
    nm, nn = len(blocks.rows), len(blocks.cols)
    best = []
    for pr in range(1, p + 1):
        if p % pr:
            continue
        pc = p // pr
        if pr > nm or pc > nn:
            continue
        rows, cols = _split(blocks.rows, pr), _split(blocks.cols, pc)
        cells = [(r, c) for r in range(pr) for c in range(pc)]
        # bytes a worker lacks of each grid row's x1 panels and each grid column's x2 panels: a worker takes
        # one cell, so an order's cost is a sum over cells
        nk = len(blocks.ks)
        lack1 = {(r, w): 0 for r in range(pr) for w in workers}
        lack2 = {(c, w): 0 for c in range(pc) for w in workers}
        for w in workers:
            for i in range(nm):
                lack1[rows[i], w] += sum(blocks.a(i, k) for k in range(nk) if w not in holders1.get((i, k), ()))
            for j in range(nn):
                lack2[cols[j], w] += sum(blocks.b(k, j) for k in range(nk) if w not in holders2.get((k, j), ()))
        if p <= 6:
            orders = itertools.permutations(workers)
        else:  # each cell to the worker holding most of its panels, taken greedily; and the plain order
            orders = [tuple(workers), _greedy_cells(cells, workers, lack1, lack2)]
        for order in orders:
            moved = sum(lack1[r, w] + lack2[c, w] for (r, c), w in zip(cells, order))
            if not best or moved < best[0]:
                best = [moved, order, rows, cols, (pr, pc)]
    if not best:
        return []
    moved, order, rows, cols, shape = best
    where = dict(zip([(r, c) for r in range(shape[0]) for c in range(shape[1])], order))
    assignment = {(i, j): where[rows[i], cols[j]] for i in range(nm) for j in range(nn)}
    moved, loads = cost_assignment(blocks, assignment, holders1, holders2)  # (a cell may be empty: exact here)
    return [moved, loads, assignment, shape]


def _greedy_cells(cells, workers, lack1, lack2):
    """Each cell, in turn, to the free worker that lacks the fewest bytes of its panels."""
    free = list(workers)
    order = []
    for r, c in cells:
        w = min(free, key=lambda w: lack1[r, w] + lack2[c, w])
        free.remove(w)
        order.append(w)
    return tuple(order)


def _split_k(blocks, workers, holders1, holders2, cap=None):
    """K blocks grouped by the worker holding most of ``A[:, k]`` and ``B[k, :]``; partial sums rotate over the group.

    ``cap``: the most K (in elements) one worker may take. With it the K blocks held most
    strongly go first, each to the worker holding most of it that still has room, else to the
    one with the least: the grouping that moves the fewest blocks while the flops stay even (a
    ``persist()`` that left a worker most of K made the plain grouping unbalanced, and the tree
    Dask then placed moved 5-10 GB on two H200s where split-k moves 4.3).
    """
    nm, nk, nn = len(blocks.rows), len(blocks.ks), len(blocks.cols)
    home = _split(blocks.ks, len(workers))
    held_by = []
    for k in range(nk):
        held = {w: 0 for w in workers}
        for i in range(nm):
            for w in holders1.get((i, k), ()):
                if w in held:
                    held[w] += blocks.a(i, k)
        for j in range(nn):
            for w in holders2.get((k, j), ()):
                if w in held:
                    held[w] += blocks.b(k, j)
        held_by.append(held)
    order = range(nk) if cap is None else sorted(range(nk), key=lambda k: -max(held_by[k].values()))
    groups: dict = {}
    depth: dict = {}
    for k in order:
        held = held_by[k]
        room = [w for w in workers if cap is None or depth.get(w, 0) + blocks.ks[k] <= cap]
        if not room:
            best = min(workers, key=lambda w: depth.get(w, 0))
        else:
            best = max(room, key=lambda w: (held[w], -depth.get(w, 0)))
            if not held[best]:
                best = workers[home[k]] if workers[home[k]] in room else min(room, key=lambda w: depth.get(w, 0))
        groups.setdefault(best, []).append(k)
        depth[best] = depth.get(best, 0) + blocks.ks[k]
    order = [w for w in workers if w in groups]
    finals = {(i, j): order[(i * nn + j) % len(order)] for i in range(nm) for j in range(nn)}
    return {w: tuple(sorted(groups[w])) for w in order}, finals


def candidates(blocks: Blocks, workers: Sequence[str], holders1: Mapping, holders2: Mapping) -> dict:
    """Every pinned schedule for these workers and placement: name -> Plan (or the reason it does not apply)."""
    workers = tuple(workers)
    out: dict = {}
    nk = len(blocks.ks)
    grid = _grids(blocks, workers, holders1, holders2)
    larger_x1 = sum(blocks.a(i, k) for i in range(len(blocks.rows)) for k in range(nk)) >= sum(
        blocks.b(k, j) for j in range(len(blocks.cols)) for k in range(nk)
    )
    options = []
    for along in ("rows", "cols") if larger_x1 else ("cols", "rows"):
        assignment = _broadcast(blocks, workers, holders1, holders2, along)
        moved, loads = cost_assignment(blocks, assignment, holders1, holders2)
        options.append((moved, along, assignment, loads))
    moved, along, assignment, loads = min(options, key=lambda o: o[0])
    out["broadcast"] = Plan(
        "broadcast",
        f"C's {'rows' if along == 'rows' else 'columns'} computed where the "
        f"{'row panels of x1' if along == 'rows' else 'column panels of x2'} live; "
        f"x{'2' if along == 'rows' else '1'} sent once to each worker that lacks it",
        moved,
        workers,
        assignment=assignment,
        blocks=blocks,
        loads=loads,
    )
    if grid:
        moved, loads, assignment, shape = grid
        out["grid"] = Plan(
            "grid",
            f"output blocks in a {shape[0]} x {shape[1]} grid of workers (SUMMA-like): each worker receives its "
            "grid row's x1 panels and its grid column's x2 panels once",
            moved,
            workers,
            assignment=assignment,
            grid=shape,
            blocks=blocks,
            loads=loads,
        )
    else:
        out["grid"] = "not considered: too few output blocks to lay out over the workers"
    if nk >= 2 and len(workers) >= 2:
        groups, finals = _split_k(blocks, workers, holders1, holders2)
        how = "by where its blocks live"
        even = sum(blocks.ks) / min(len(workers), nk)
        if max(sum(blocks.ks[k] for k in ks) for ks in groups.values()) > BALANCE * even:
            # most of K lives on few workers: move the fewest K blocks that even the flops out
            groups, finals = _split_k(blocks, workers, holders1, holders2, cap=max(BALANCE * even, max(blocks.ks)))
            how = "where its blocks live, as far as the flops stay even (some K blocks move)"
        if len(groups) >= 2:
            moved, loads = cost_split_k(blocks, groups, finals, holders1, holders2)
            out["split-k"] = Plan(
                "split-k",
                f"K split over {len(groups)} workers {how}; partial output blocks move",
                moved,
                workers,
                groups=groups,
                finals=finals,
                blocks=blocks,
                loads=loads,
            )
        else:
            out["split-k"] = "not considered: every K block lives on one worker"
    else:
        out["split-k"] = "not considered: K is one block" if nk < 2 else "not considered: one worker"
    return out


def choose(
    blocks: Blocks,
    workers: Sequence[str],
    holders1: Mapping,
    holders2: Mapping,
    *,
    panel_fits: bool = True,
    placement: str = "persisted",
) -> Plan:
    """The pinned schedule that moves the fewest bytes with the flops balanced (see the module's docstring).

    ``holders1[(i, k)]`` / ``holders2[(k, j)]``: the workers holding block ``A[i, k]`` / ``B[k, j]``
    (a block missing from the mapping is held by nobody yet).  ``panel_fits``: whether two whole K
    panels fit one task's memory (``panel_limit``); when not, ``"broadcast"`` and ``"grid"`` are
    :func:`streamed`.
    """
    workers = tuple(workers)
    if not workers:
        raise ValueError("polymm.dask: cannot choose a schedule for zero workers")
    options = candidates(blocks, workers, holders1, holders2)
    ideal = blocks.total_flops / len(workers)
    grid = options.get("grid")
    coarsest = max((blocks.flops(i, j) for i in range(len(blocks.rows)) for j in range(len(blocks.cols))), default=0)
    # a panel schedule cannot split one output block: its flops are the floor of what "balanced" can mean
    cap = max(BALANCE * ideal, coarsest, max(grid.loads.values(), default=0) if isinstance(grid, Plan) else 0)
    summary: dict = {}
    valid = []
    for name in _PREFERENCE:
        plan = options.get(name)
        if not isinstance(plan, Plan):
            summary[name] = plan or "not considered"
            continue
        if not panel_fits and name != "split-k":
            plan = streamed(plan)
        busiest = max(plan.loads.values(), default=0)
        if busiest > cap * (1 + 1e-9):
            share = 100 * busiest / (blocks.total_flops or 1)
            summary[name] = f"{_fmt(plan.bytes_moved)}; not balanced (one worker would do {share:.0f}% of the flops)"
            continue
        summary[name] = plan.bytes_moved
        valid.append(plan)
    if not valid:
        return Plan(
            "tree",
            "no pinned schedule keeps the flops balanced: Dask places a tree of block products",
            None,
            workers,
            placement=placement,
            candidates=summary,
            blocks=blocks,
        )
    # ties: fewer, larger tasks first; a streamed schedule (a task per K block) last
    best = min(valid, key=lambda p: (p.bytes_moved, p.streamed, _PREFERENCE.index(p.schedule)))
    best.placement = placement
    best.candidates = summary
    runner_up = [p for p in valid if p is not best]
    if runner_up:
        other = min(runner_up, key=lambda p: p.bytes_moved)
        best.reason += f" (fewest bytes; next: {other.schedule}, {_fmt(other.bytes_moved)})"
    return best


def assumed_placement(blocks: Blocks, workers: Sequence[str]) -> tuple[dict, dict]:
    """A placement for operands that are not persisted: each operand's blocks in row-major order, cut into
    ``len(workers)`` contiguous runs (what Dask's scheduler tends to do with the tasks that make them)."""
    nm, nk, nn = len(blocks.rows), len(blocks.ks), len(blocks.cols)
    p = len(workers)
    h1 = {(i, k): frozenset({workers[(i * nk + k) * p // (nm * nk)]}) for i in range(nm) for k in range(nk)}
    h2 = {(k, j): frozenset({workers[(k * nn + j) * p // (nk * nn)]}) for k in range(nk) for j in range(nn)}
    return h1, h2


def dask_placed_estimate(blocks: Blocks, workers, holders1, holders2, schedule: str) -> int:
    """A rough estimate for the schedules Dask places (``"panel"``, ``"tree"``): each task goes to the worker
    holding the most of its input bytes (a worker keeps what it fetched), with no regard for balance; the
    tree's partial products meet on the worker of their first K block.  Dask also balances load, which can
    move more (the record in ``benchmarks/dask/`` shows how much)."""
    workers = tuple(workers)
    if len(workers) < 2:
        return 0
    nm, nk, nn = len(blocks.rows), len(blocks.ks), len(blocks.cols)
    h1 = {key: set(v) for key, v in holders1.items()}
    h2 = {key: set(v) for key, v in holders2.items()}
    moved = 0
    if schedule == "panel":
        for i in range(nm):
            for j in range(nn):
                keys1, keys2 = [(i, k) for k in range(nk)], [(k, j) for k in range(nk)]

                def held(w):
                    return sum(blocks.a(*key) for key in keys1 if w in h1.get(key, ())) + sum(
                        blocks.b(*key) for key in keys2 if w in h2.get(key, ())
                    )

                w = max(workers, key=held)
                moved += _missing(blocks, w, keys1, keys2, h1, h2)
                for key in keys1:
                    h1.setdefault(key, set()).add(w)
                for key in keys2:
                    h2.setdefault(key, set()).add(w)
        return moved
    for i in range(nm):
        for j in range(nn):
            places = []
            for k in range(nk):

                def held(w):
                    return (blocks.a(i, k) if w in h1.get((i, k), ()) else 0) + (
                        blocks.b(k, j) if w in h2.get((k, j), ()) else 0
                    )

                w = max(workers, key=held)
                moved += _missing(blocks, w, [(i, k)], [(k, j)], h1, h2)
                h1.setdefault((i, k), set()).add(w)
                h2.setdefault((k, j), set()).add(w)
                places.append(w)
            moved += sum(blocks.c(i, j) for w in places[1:] if w != places[0])
    return moved


def balanced(loads: Mapping, total: int, workers: int) -> bool:
    """Whether no worker does more than :data:`BALANCE` times an even share."""
    return max(loads.values(), default=0) <= BALANCE * math.ceil(total / max(workers, 1))
