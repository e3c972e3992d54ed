"""polymm on Dask arrays: a lazy ``x1 @ x2`` whose block products run :func:`polymm.matmul` on the workers.

Dask is optional: this module is imported only when a Dask array reaches
:func:`polymm.matmul` (or when a user imports it), so ``import polymm`` never
imports Dask.  The graph is built here, on the client, with the contract's
rules checked at once (shapes, dtypes, backend and algorithm names); each task
then calls :func:`polymm.matmul` on NumPy or CuPy blocks with the keywords the
caller gave (``backend=``, ``algorithm=``, and any later ones), so the worker
picks its kernels exactly as a local call would.

The contraction over K is built one of two ways (``docs/scaling.md`` compares
them with SUMMA):

``"panel"``
    one task per output block multiplies a whole row panel of ``x1`` by a whole
    column panel of ``x2`` (the K blocks concatenated inside the task): one big
    kernel call per output block, which is what GPUs want;
``"tree"``
    one task per ``(output block, K block)`` pair, the partial products summed
    in a tree (:meth:`dask.array.Array.sum`): no task ever holds more than one
    block of each operand, at the price of more, smaller calls and the sums.

With a ``distributed`` client of several workers and operands persisted on
them, three more schedules pin the tasks to workers, chosen by a cost model in
bytes moved (:mod:`polymm.dask_schedule`): ``"broadcast"`` (C follows the larger
operand's panels, the smaller one travels once per worker), ``"grid"``
(SUMMA-like ``pr x pc`` panels) and ``"split-k"`` (K split where its blocks
live, only partial output blocks move); where whole K panels exceed ``panel_limit``,
broadcast and grid stream K into each output block a block at a time.  :func:`explain`
says which schedule a product gets, why, and how many bytes it is expected to move.

``"auto"`` takes the pinned schedule that moves the fewest bytes when the
placement is known (2-D operands, a client, persisted blocks); otherwise the
panel when one output block's two panels fit in ``panel_limit`` bytes (default
1 GiB, or the Dask config key ``polymm.panel-limit``), else the tree.
"""

from __future__ import annotations

import collections
import inspect
import math

import dask
import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array
from dask.utils import parse_bytes

from . import dask_schedule, dispatch, promotion
from .arrays import DLPACK, is_dask_array, kind_named, kind_of
from .precision import current as current_precision
from .registry import BackendUnavailable, check_algorithm, get_backend, scoped_backend
from .shapes import matmul_shape

__all__ = ["matmul", "explain", "REDUCTIONS", "SCHEDULES", "PANEL_LIMIT"]

#: How the contraction over K may be built (``reduction=``, the older keyword, takes these).
REDUCTIONS = ("auto", "panel", "tree")

#: Every schedule ``schedule=`` takes (:mod:`polymm.dask_schedule` explains them).
SCHEDULES = dask_schedule.SCHEDULES

#: Default bytes of the two K panels one output block may need before ``"auto"`` prefers the tree.
PANEL_LIMIT = 2**30

#: Chunk libraries whose blocks polymm computes on natively.
CHUNK_LIBRARIES = ("numpy", "cupy")


def matmul(
    x1, x2, /, *, schedule: str | None = None, reduction: str | None = None, panel_limit=None, out=None, **options
):
    """``x1 @ x2`` for Dask arrays: a lazy Dask array, each block product computed by :func:`polymm.matmul`.

    ``options`` (``backend=``, ``algorithm=``, ...) are handed to every block
    product; a backend chosen with :func:`polymm.use_backend` around this call
    is carried into the graph too.  ``schedule`` is one of :data:`SCHEDULES`
    (default: the Dask config key ``polymm.schedule``, else ``polymm.reduction``,
    else ``"auto"``); ``reduction`` is its older name and takes ``"auto"``,
    ``"panel"`` or ``"tree"``.  ``panel_limit`` (bytes, or a string like
    ``"2GiB"``) is the largest pair of K panels one task may be given.
    :func:`explain` says what ``"auto"`` picks and why.

    One operand may be a NumPy (or CuPy) array when the other is a Dask array of
    NumPy (or CuPy) chunks: it is wrapped with :func:`dask.array.from_array`,
    chunked like the Dask operand along K.
    """
    if out is not None:
        raise TypeError(
            f"polymm.matmul: out= cannot be used with Dask arrays (they are immutable), got out of type "
            f"{type(out).__module__}.{type(out).__qualname__}; use the returned Dask array "
            "(dask.array.store writes it into an existing array)"
        )
    schedule = _schedule_name(schedule, reduction)
    x1, x2, library = _operands(x1, x2)

    promotion.check_operand_dtype(x1.dtype, "x1")
    promotion.check_operand_dtype(x2.dtype, "x2")
    dtype = promotion.check_operand_dtype(kind_named(library).result_type(x1, x2), "the result").newbyteorder("=")
    shape = matmul_shape(tuple(x1.shape), tuple(x2.shape))
    options = _carried(options)

    plan, x1, x2 = _plan(x1, x2, schedule, panel_limit, dtype)
    gpu = _gpu_settings()
    ind1, ind2, out_ind = _indices(x1.ndim, x2.ndim, len(shape.batch))
    if plan.streamed:
        return _streamed_graph(x1, x2, plan, dtype, options, gpu)
    if plan.schedule in ("panel", "broadcast", "grid"):
        pin = plan.assignment if plan.schedule != "panel" and len(plan.workers) >= 2 else None
        with _pinned(pin, _block_index):
            result = da.blockwise(
                _panel_product,
                out_ind,
                x1,
                ind1,
                x2,
                ind2,
                concatenate=True,
                dtype=dtype,
                meta=meta_from_array(x1._meta, ndim=len(out_ind), dtype=dtype),
                token=f"polymm-matmul-{plan.schedule}",
                options=options,
                gpu=gpu,
            )
        return _PinnedArray.of(result) if pin else result
    if plan.schedule == "split-k":
        return _split_k_graph(x1, x2, plan, dtype, options, gpu)
    accumulate = _accumulation_dtype(dtype)
    partial = da.blockwise(
        _block_product,
        out_ind + ("k",),
        x1,
        ind1,
        x2,
        ind2,
        adjust_chunks={"k": 1},
        dtype=accumulate,
        meta=meta_from_array(x1._meta, ndim=len(out_ind) + 1, dtype=accumulate),
        token="polymm-matmul-block",
        options=options,
        dtype_in=dtype,
        accumulate=accumulate,
        gpu=gpu,
    )
    total = partial.sum(axis=-1, dtype=accumulate, keepdims=True)
    return total.map_blocks(
        _drop_k_axis,
        dtype,
        drop_axis=-1,
        dtype=dtype,
        meta=meta_from_array(x1._meta, ndim=len(out_ind), dtype=dtype),
        token="polymm-matmul-tree",
    )


def explain(x1, x2, /, *, schedule: str | None = None, panel_limit=None, workers=None, placement=None):
    """Which schedule :func:`matmul` builds for ``x1 @ x2``, why, and the bytes it expects to move between workers.

    Returns a :class:`polymm.dask_schedule.Plan` (``.schedule``, ``.reason``,
    ``.bytes_moved``, ``.candidates``, ...); ``print`` it for a report.  The
    placement is read, like :func:`matmul` reads it, from the active
    ``distributed`` client and the operands' persisted blocks, unless given:
    ``workers`` (a sequence of worker names) and ``placement``
    (``{"x1": {(i, k): worker or workers}, "x2": {(k, j): ...}}``, block indices
    of the operands as chunked) describe a cluster that need not exist.
    """
    schedule = _schedule_name(schedule, None)
    x1, x2, library = _operands(x1, x2)
    dtype = promotion.check_operand_dtype(kind_named(library).result_type(x1, x2), "the result").newbyteorder("=")
    matmul_shape(tuple(x1.shape), tuple(x2.shape))
    plan, _, _ = _plan(x1, x2, schedule, panel_limit, dtype, workers=workers, placement=placement)
    plan.shapes = (tuple(x1.shape), tuple(x2.shape))
    return plan


def _schedule_name(schedule, reduction) -> str:
    if reduction is not None:
        if reduction not in REDUCTIONS:
            raise ValueError(
                f"polymm.matmul: unknown reduction {reduction!r}; choose one of {', '.join(REDUCTIONS)} "
                f"(or schedule= one of {', '.join(SCHEDULES)})"
            )
        if schedule is not None and schedule != reduction:
            raise ValueError(f"polymm.matmul: schedule={schedule!r} and reduction={reduction!r} disagree; give one")
        schedule = reduction
    if schedule is None:
        schedule = dask.config.get("polymm.schedule", None) or dask.config.get("polymm.reduction", "auto")
    if schedule not in SCHEDULES:
        raise ValueError(f"polymm.matmul: unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    return schedule


# -- planning: where the blocks are, and which schedule moves the fewest bytes -------------------------


def _plan(x1, x2, schedule, panel_limit, dtype, workers=None, placement=None):
    """The :class:`~polymm.dask_schedule.Plan` for this product, and the operands with one chunking along K."""
    originals = x1, x2
    x1, x2, rechunk = _common_k_chunks(x1, x2, note=True)
    limit = panel_limit if panel_limit is not None else dask.config.get("polymm.panel-limit", PANEL_LIMIT)
    single_k_block = len(x1.chunks[-1]) == 1
    panel_fits = single_k_block or _panel_bytes(x1, x2) <= parse_bytes(limit)
    by_size = "panel" if panel_fits else "tree"
    size_reason = (
        "K is one block"
        if single_k_block
        else f"two whole K panels take {_panel_bytes(x1, x2)} bytes, "
        f"{'within' if panel_fits else 'over'} panel_limit ({parse_bytes(limit)} bytes)"
    )
    two_d = x1.ndim == 2 and x2.ndim == 2
    if not two_d:
        if schedule in dask_schedule.PINNED:
            raise ValueError(
                f"polymm.matmul: schedule {schedule!r} is for 2-D operands (got shapes {tuple(x1.shape)} and "
                f"{tuple(x2.shape)}); batched and 1-D products use 'panel' or 'tree'"
            )
        chosen = by_size if schedule == "auto" else schedule
        why = f"{size_reason}" if schedule == "auto" else "asked for"
        return (
            dask_schedule.Plan(
                chosen,
                f"{why} (batched or 1-D: Dask places the tasks)",
                None,
                placement="not used (batched or 1-D operands)",
                rechunk=rechunk,
            ),
            x1,
            x2,
        )
    blocks = dask_schedule.Blocks(
        tuple(x1.chunks[0]),
        tuple(x1.chunks[1]),
        tuple(x2.chunks[1]),
        x1.dtype.itemsize,
        x2.dtype.itemsize,
        _accumulation_dtype(dtype).itemsize,
    )
    names, holders1, holders2, where = _placement(*originals, workers, placement)
    holders1 = _after_rechunk(holders1, originals[0].chunks[1], x1.chunks[1], axis=1)
    holders2 = _after_rechunk(holders2, originals[1].chunks[0], x2.chunks[0], axis=0)
    if len(names) < 2:
        chosen = by_size if schedule == "auto" else schedule
        plan = dask_schedule.Plan(
            chosen,
            (size_reason if schedule == "auto" else "asked for") + "; nothing moves between workers",
            0,
            names,
            placement=where,
            blocks=blocks,
            rechunk=rechunk,
        )
        if chosen == "split-k":
            plan.groups = {names[0] if names else "local": tuple(range(len(blocks.ks)))}
        return plan, x1, x2
    placed = bool(holders1) or bool(holders2)
    if not placed:
        h1, h2 = dask_schedule.assumed_placement(blocks, names)
    else:
        h1, h2 = holders1, holders2
    if schedule == "auto" and not placed:
        estimates = {
            name: dask_schedule.dask_placed_estimate(blocks, names, h1, h2, name) for name in ("panel", "tree")
        }
        chosen, why = by_size, size_reason
        if panel_fits and estimates["tree"] < estimates["panel"]:
            chosen, why = "tree", "the K blocks' partial products move fewer bytes than whole K panels"
        return (
            dask_schedule.Plan(
                chosen,
                f"{why}; the operands' blocks are not placed yet (not persisted), so Dask places the tasks "
                "(estimate: blocks assumed in contiguous runs per worker, each task where most of its inputs are)",
                estimates[chosen],
                names,
                placement=where,
                blocks=blocks,
                rechunk=rechunk,
                candidates=dict(estimates),
            ),
            x1,
            x2,
        )
    if schedule in ("panel", "tree"):
        estimate = dask_schedule.dask_placed_estimate(blocks, names, h1, h2, schedule)
        return (
            dask_schedule.Plan(
                schedule,
                "asked for; Dask places the tasks (estimate: each task where most of its input bytes are, "
                "no load balancing: a lower bound)",
                estimate,
                names,
                placement=where,
                blocks=blocks,
                rechunk=rechunk,
            ),
            x1,
            x2,
        )
    if schedule == "auto":
        plan = dask_schedule.choose(blocks, names, h1, h2, panel_fits=panel_fits, placement=where)
        if plan.schedule == "tree":
            plan.bytes_moved = dask_schedule.dask_placed_estimate(blocks, names, h1, h2, "tree")
    else:
        options = dask_schedule.candidates(blocks, names, h1, h2)
        plan = options.get(schedule)
        if not isinstance(plan, dask_schedule.Plan) and schedule != "split-k":
            raise ValueError(
                f"polymm.matmul: schedule {schedule!r} does not apply to {tuple(x1.shape)} @ {tuple(x2.shape)} in "
                f"{len(blocks.rows)} x {len(blocks.cols)} output blocks on {len(names)} workers ({plan}); "
                "use 'auto' or another schedule"
            )
        if not isinstance(plan, dask_schedule.Plan):
            if len(blocks.ks) < 2:
                raise ValueError(
                    f"polymm.matmul: schedule 'split-k' needs K in at least two blocks; x1 {tuple(x1.shape)} "
                    f"has K chunks {x1.chunks[1]}"
                )
            groups = {names[0]: tuple(range(len(blocks.ks)))}  # every K block on one worker: one group
            finals = {(i, j): names[0] for i in range(len(blocks.rows)) for j in range(len(blocks.cols))}
            moved, loads = dask_schedule.cost_split_k(blocks, groups, finals, h1, h2)
            plan = dask_schedule.Plan(
                "split-k",
                "K lives on one worker: one group",
                moved,
                names,
                groups=groups,
                finals=finals,
                blocks=blocks,
                loads=loads,
            )
        plan.reason = "asked for: " + plan.reason
        if schedule in ("broadcast", "grid") and not panel_fits:
            plan = dask_schedule.streamed(plan)
        plan.placement = where
        plan.candidates = {
            name: (p.bytes_moved if isinstance(p, dask_schedule.Plan) else p) for name, p in options.items()
        }
    plan.rechunk = rechunk
    if not placed:
        plan.placement = where + "; pinned as if blocks were in contiguous runs per worker"
    return plan, x1, x2


def _placement(x1, x2, workers, placement):
    """(worker names, holders of x1's blocks, holders of x2's blocks, a description).

    Given ``workers``/``placement`` (explain's synthetic cluster), those; else the
    active ``distributed`` client's workers and, for each persisted operand, which
    workers hold its blocks (the scheduler's ``who_has``).  No client: one
    "local" place, nothing moves.
    """
    if workers is not None or placement is not None:
        placement = placement or {}
        names = (
            tuple(workers)
            if workers is not None
            else tuple(
                sorted({w for which in ("x1", "x2") for v in placement.get(which, {}).values() for w in _as_set(v)})
            )
        )
        h1 = {tuple(k): _as_set(v) for k, v in placement.get("x1", {}).items()}
        h2 = {tuple(k): _as_set(v) for k, v in placement.get("x2", {}).items()}
        unknown = {w for h in (h1, h2) for v in h.values() for w in v} - set(names)
        if unknown:
            raise ValueError(
                f"polymm.dask.explain: placement names workers {sorted(unknown)} not in workers={list(names)}"
            )
        for which, h, x, axes in (("x1", h1, x1, (0, 1)), ("x2", h2, x2, (0, 1))):
            counts = tuple(len(x.chunks[a]) for a in axes)
            bad = [k for k in h if len(k) != 2 or not all(0 <= k[d] < counts[d] for d in range(2))]
            if bad:
                raise ValueError(
                    f"polymm.dask.explain: placement of {which} names block(s) {bad[:3]} outside its "
                    f"{counts[0]} x {counts[1]} blocks"
                )
        held = [which for which, h in (("x1", h1), ("x2", h2)) if h]
        where = f"given: {', '.join(held) if held else 'no'} block(s) placed"
        return names, h1, h2, where
    client = _client()
    if client is None:
        return ("local",), {}, {}, "no distributed client: one process, nothing moves between workers"
    # the workers as the scheduler knows them now (scheduler_info's cached identity may be the
    # periodic update's, which carries no workers: a busy test run once saw none there)
    names = tuple(sorted(client.nthreads()))
    holders = []
    described = []
    for which, x in (("x1", x1), ("x2", x2)):
        h = _who_has(client, x)
        holders.append(h)
        described.append(f"{which} {'persisted' if h else 'not persisted'}")
    return names, holders[0], holders[1], f"distributed client: {', '.join(described)}"


def _after_rechunk(holders: dict, before, after, axis: int) -> dict:
    """Holders of the blocks after the K axis went from chunks ``before`` to ``after``.

    A split piece is cut from one block, on the worker that holds it (Dask runs a
    task with one input where that input is), so it inherits its holders; a
    merged block is made from several, somewhere: it counts as held by nobody
    (the estimate then charges it to every worker that reads it).
    """
    if not holders or tuple(before) == tuple(after):
        return holders
    edges = np.cumsum((0,) + tuple(before))
    starts = np.cumsum((0,) + tuple(after))[:-1]
    source = {}
    for n, (start, size) in enumerate(zip(starts, after)):
        b = int(np.searchsorted(edges, start, side="right")) - 1
        if start + size <= edges[b + 1]:  # inside one block: a split piece
            source[n] = b
    out = {}
    for key, who in holders.items():
        for n, b in source.items():
            if key[axis] == b:
                new = list(key)
                new[axis] = n
                out[tuple(new)] = who
    return out


def _as_set(value) -> frozenset:
    return frozenset([value]) if isinstance(value, str) else frozenset(value)


def _client():
    """The active ``distributed`` client, or None (no distributed installed, or none running)."""
    import sys

    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _who_has(client, x) -> dict:
    """Block index -> workers holding it, when every block of ``x`` is in a worker's memory; else {}."""
    from dask.core import flatten

    keys = list(flatten(x.__dask_keys__()))
    if not keys:
        return {}
    if getattr(client, "asynchronous", False):  # its calls return awaitables: the graph is built unpinned
        return {}
    futures = client.futures_of(x)
    if len(futures) < len(keys):  # not (wholly) persisted: its blocks are still to be computed
        return {}
    try:
        holders = client.who_has(futures)
    except Exception:  # a scheduler gone or unreachable: build the graph as if nothing were placed
        return {}
    out = {}
    for key in keys:
        workers = holders.get(key) or holders.get(str(key))
        if not workers:
            return {}
        out[tuple(key[1:])] = frozenset(workers)
    return out


def _block_index(key):
    """The block index of a Dask array key: ``(name, i, j, ...)`` -> ``(i, j, ...)``."""
    return tuple(key[1:])


class _PinnedArray(da.Array):
    """A Dask array whose worker annotations survive Dask's array optimisation.

    Dask's low-level fusion (``optimization.fuse.active``, on by default) turns the
    graph into a plain dict and drops every layer's annotations, so a ``workers=``
    annotation never reaches the scheduler.  This class's optimiser reads the
    annotations first, optimises without fusion (a fused task has a key no pin
    names) and hands them back on the optimised graph.  Arrays made
    from it by further operations are ordinary Dask arrays (their own tasks are
    placed by Dask; the pinned tasks keep their pins only where their keys survive
    fusion, i.e. when this array itself is persisted or computed).
    """

    __slots__ = ()

    @classmethod
    def of(cls, x):
        return cls(x.dask, x.name, x.chunks, meta=x._meta)

    @staticmethod
    def __dask_optimize__(dsk, keys, **kwargs):
        return _optimize_keeping_annotations(dsk, keys, **kwargs)


def _optimize_keeping_annotations(dsk, keys, **kwargs):
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    kept: dict = {}
    if isinstance(dsk, HighLevelGraph):
        for layer in dsk.layers.values():
            for kind, value in (layer.annotations or {}).items():
                if kind in ("workers", "allow_other_workers"):
                    values = kept.setdefault(kind, {})
                    for key in layer:
                        v = value(key) if callable(value) else value
                        if v is not None:
                            values[key] = v
    # no low-level fusion: it would fuse a streamed schedule's chain of steps into one task under
    # a new key, which no pin names (the pins are handed back by key)
    with dask.config.set({"optimization.fuse.active": False}):
        out = da.Array.__dask_optimize__(dsk, keys, **kwargs)
    if not kept or isinstance(out, HighLevelGraph):
        return out
    name = "polymm-pinned-optimized"
    annotations = {kind: _Lookup(values) for kind, values in kept.items()}
    return HighLevelGraph({name: MaterializedLayer(out, annotations=annotations)}, {name: set()})


class _Lookup:
    """An annotation given per key (None for keys it does not name)."""

    def __init__(self, values):
        self.values = values

    def __call__(self, key):
        return self.values.get(key)


class _Pin:
    """A ``workers`` annotation: key -> [worker], from output block index (``index(key)``) to worker."""

    def __init__(self, assignment, index):
        self.assignment = assignment
        self.index = index

    def __call__(self, key):
        worker = self.assignment.get(self.index(key))
        return [worker] if worker is not None else None


#: How pinned tasks hold to their worker (Dask config key ``polymm.pin``).
PINS = ("loose", "strict")


def _loose() -> bool:
    """Whether pinned tasks may run elsewhere (Dask config ``polymm.pin``: "loose", the default, or "strict").

    Loose: the scheduler may still move a task when its worker is gone or, through work
    stealing, falls far behind (then a few more bytes move than :func:`explain` said).
    Strict: a task waits for its worker, so the bytes are exactly the estimate, but it
    waits for ever if that worker leaves the cluster.
    """
    pin = dask.config.get("polymm.pin", "loose")
    if pin not in PINS:
        raise ValueError(f"polymm.dask: unknown polymm.pin {pin!r}; choose one of {', '.join(PINS)}")
    return pin == "loose"


def _pinned(assignment, index):
    """A context that pins the layers made inside it (Dask's ``workers=`` annotation, loose), or does nothing."""
    import contextlib

    if not assignment:
        return contextlib.nullcontext()
    return dask.annotate(workers=_Pin(assignment, index), allow_other_workers=_loose())


def _split_k_graph(x1, x2, plan, dtype, options, gpu):
    """Partial products of each worker's K blocks (pinned there), summed on ``plan.finals``' worker."""
    from dask.base import tokenize

    accumulate = _accumulation_dtype(dtype)
    nm, nn = len(x1.chunks[0]), len(x2.chunks[1])
    groups = list(plan.groups.items())
    finals = plan.finals or {}
    token = tokenize(x1.name, x2.name, [ks for _, ks in groups], options, str(dtype))
    name, pname = f"polymm-matmul-split-k-{token}", f"polymm-matmul-split-k-partial-{token}"
    partials, sums = {}, {}
    for i in range(nm):
        for j in range(nn):
            for g, (_, ks) in enumerate(groups):
                partials[(pname, i, j, g)] = (
                    _group_product,
                    [(x1.name, i, k) for k in ks],
                    [(x2.name, k, j) for k in ks],
                    options,
                    dtype,
                    accumulate,
                    gpu,
                )
            sums[(name, i, j)] = (_sum_partials, [(pname, i, j, g) for g in range(len(groups))], dtype, gpu)
    pinned = {(i, j, g): w for i in range(nm) for j in range(nn) for g, (w, _) in enumerate(groups)}
    pins = (_Pin(pinned, _block_index), _Pin(finals, _block_index)) if len(plan.workers) >= 2 else None
    return _product_of_two_layers(x1, x2, dtype, (pname, partials), (name, sums), pins)


def _streamed_graph(x1, x2, plan, dtype, options, gpu):
    """``plan``'s pinned output blocks, each summed on its worker one K block at a time
    (:func:`dask_schedule.streamed`): a chain of tasks ``acc + A[i, k] @ B[k, j]`` in the
    accumulation dtype, in K order, then the result dtype."""
    from dask.base import tokenize

    accumulate = _accumulation_dtype(dtype)
    nm, nn, nk = len(x1.chunks[0]), len(x2.chunks[1]), len(x1.chunks[1])
    token = tokenize(x1.name, x2.name, plan.schedule, sorted(plan.assignment.items()), options, str(dtype))
    name, sname = f"polymm-matmul-{plan.schedule}-{token}", f"polymm-matmul-{plan.schedule}-step-{token}"
    steps, sums = {}, {}
    for i in range(nm):
        for j in range(nn):
            for k in range(nk):
                previous = (sname, i, j, k - 1) if k else None
                a, b = (x1.name, i, k), (x2.name, k, j)
                steps[(sname, i, j, k)] = (_stream_step, previous, a, b, options, dtype, accumulate, gpu)
            sums[(name, i, j)] = (_sum_partials, [(sname, i, j, nk - 1)], dtype, gpu)
    pins = (_Pin(plan.assignment, lambda key: key[1:3]), _Pin(plan.assignment, _block_index))
    return _product_of_two_layers(x1, x2, dtype, (sname, steps), (name, sums), pins)


def _product_of_two_layers(x1, x2, dtype, first, second, pins):
    """The 2-D product array of a hand-built graph: ``first`` (name, tasks) reads the operands'
    blocks, ``second`` (name, tasks: the output blocks) reads ``first``; ``pins``, a ``_Pin``
    per layer (or None), place their tasks (loose or strict, ``polymm.pin``)."""
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    layers = {**x1.dask.layers, **x2.dask.layers}
    dependencies = {**x1.dask.dependencies, **x2.dask.dependencies}
    annotations = [None, None] if pins is None else [{"workers": pin, "allow_other_workers": _loose()} for pin in pins]
    (first_name, first_tasks), (name, tasks) = first, second
    layers[first_name] = MaterializedLayer(first_tasks, annotations=annotations[0])
    dependencies[first_name] = {x1.name, x2.name} & set(layers) or set()
    layers[name] = MaterializedLayer(tasks, annotations=annotations[1])
    dependencies[name] = {first_name}
    cls = _PinnedArray if pins is not None else da.Array
    meta = meta_from_array(x1._meta, ndim=2, dtype=dtype)
    return cls(HighLevelGraph(layers, dependencies), name, chunks=(x1.chunks[0], x2.chunks[1]), meta=meta)


def _stream_step(previous, a, b, options, dtype_in, accumulate, gpu):
    """One K block's product added to the output block's running sum (``previous``, None first)."""

    def step():
        part = _widened_product(a, b, options, dtype_in, accumulate)
        return part if previous is None else previous + part

    return _on_gpu(gpu, a, step)


def _group_product(blocks1, blocks2, options, dtype_in, accumulate, gpu):
    """One worker's share of one output block: its K blocks concatenated, one product, in the accumulation dtype."""

    def product():
        a = blocks1[0] if len(blocks1) == 1 else _concat(blocks1, 1)
        b = blocks2[0] if len(blocks2) == 1 else _concat(blocks2, 0)
        return _widened_product(a, b, options, dtype_in, accumulate)

    return _on_gpu(gpu, blocks1[0], product)


def _concat(parts, axis):
    """Concatenate NumPy or CuPy blocks with their own library."""
    module = type(parts[0]).__module__.split(".")[0]
    xp = np if module == "numpy" else __import__(module)
    return xp.concatenate(parts, axis=axis)


def _sum_partials(partials, dtype, gpu):
    """The partial products of one output block summed (in their accumulation dtype), then in the result dtype."""

    def summed():
        total = partials[0].copy() if len(partials) > 1 else partials[0]
        for p in partials[1:]:
            total += p
        return total.astype(dtype, copy=False)

    return _on_gpu(gpu, partials[0], summed)


def _panel_product(a, b, options, gpu):
    """One output block: a row panel of ``x1`` times a column panel of ``x2`` (whole K)."""
    return _on_gpu(gpu, a, lambda: dispatch.matmul(a, b, **options))


def _block_product(a, b, options, dtype_in, accumulate, gpu):
    """One K block's contribution to one output block, with a trailing axis of length 1 for the tree sum."""
    return _on_gpu(gpu, a, lambda: _widened_product(a, b, options, dtype_in, accumulate)[..., None])


def _widened_product(a, b, options, dtype_in, accumulate):
    """A partial product in the accumulation dtype.

    Where the result dtype accumulates in a wider one (float16 in float32), the operands are
    widened first, so the partial sums round to float16 once, at the end, as a single kernel
    would.  The widened product may run in the ``"tf32"`` mode: float16 and bfloat16 values
    carry at most 10 mantissa bits, so TF32 reads them exactly and its float32 accumulation is
    the half-precision kernel's own arithmetic, on tensor cores instead of float32 SIMT units.
    """
    if accumulate == dtype_in:
        return dispatch.matmul(a, b, **options)
    a = a.astype(dtype_in, copy=False).astype(accumulate)
    b = b.astype(dtype_in, copy=False).astype(accumulate)
    return dispatch.matmul(a, b, **{**options, "precision": "tf32"})


# -- how a worker's GPU runs its block tasks ---------------------------------------------------------

#: Default number of block products a worker's GPU may have queued (Dask config ``polymm.gpu-queue``;
#: 0: no bound). Two H200s over UCX, 32768^2 float32 in 8192 chunks, medians of 3 (2026-11-28,
#: ``benchmarks/dask/h200x2-2026-11-28-ucx-queue-f8c0695``): bounds of 2, 1 and none all took
#: 0.86-0.88 s, so none is the default.
GPU_QUEUE = 0

#: Where a worker's block tasks run (Dask config ``polymm.gpu-stream``): ``"default"``, CuPy's
#: current stream, or ``"private"``, a non-blocking stream per device and thread, finished before
#: the task returns. In the same setting (``...-ucx-streams-f1eceee``) private streams halved the
#: seconds spent receiving (0.84 s against 1.36, summed over the workers) but idle the GPU
#: between tasks: 0.889 s against 0.866 on two GPUs, 1.77 s against 1.63 on one; opt-in.
GPU_STREAMS = ("default", "private")

#: Per device: an event recorded after each queued block product, oldest first.
_IN_FLIGHT: dict = {}

#: Per (device, thread): the private stream of the block tasks.
_STREAMS: dict = {}


def _gpu_settings() -> tuple[int, str]:
    """``(queue depth, stream)`` for a worker's GPU block tasks, read on the client and written into the graph."""
    depth = dask.config.get("polymm.gpu-queue", GPU_QUEUE)
    if depth is None:
        depth = 0
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"polymm.dask: polymm.gpu-queue must be a whole number >= 0 (0: no bound), got {depth!r}")
    stream = dask.config.get("polymm.gpu-stream", "default")
    if stream not in GPU_STREAMS:
        raise ValueError(f"polymm.dask: unknown polymm.gpu-stream {stream!r}; choose one of {', '.join(GPU_STREAMS)}")
    return depth, stream


def _on_gpu(gpu: tuple[int, str], sample, task):
    """``task()``, one block task's kernels, run as ``gpu`` (:func:`_gpu_settings`) says on CuPy blocks.

    A task on CuPy blocks returns when its kernels are queued, and distributed-ucxx
    synchronizes the default stream before every send and receive: a block another worker asks
    for waits for every kernel queued before the send (docs/scaling.md).  ``depth`` bounds that
    queue: past ``depth`` queued products the oldest is waited for.  A ``"private"`` stream takes
    the tasks off the default stream altogether; each task then finishes its kernels before it
    returns (nothing else would order a send after them).  NumPy blocks run as they are.
    """
    depth, stream = gpu
    if (not depth and stream == "default") or type(sample).__module__.split(".")[0] != "cupy":
        return task()
    import threading

    import cupy

    if stream == "private":
        key = (cupy.cuda.Device().id, threading.get_ident())
        own = _STREAMS.get(key)
        if own is None:
            own = _STREAMS[key] = cupy.cuda.Stream(non_blocking=True)
        own.wait_event(cupy.cuda.get_current_stream().record())  # after what the default stream has queued
        with own:
            result = task()
        own.synchronize()
        return result
    result = task()
    queued = _IN_FLIGHT.setdefault(cupy.cuda.Device().id, collections.deque())
    queued.append(cupy.cuda.get_current_stream().record())
    while len(queued) > depth:
        queued.popleft().synchronize()
    return result


def _drop_k_axis(total, dtype):
    """A summed block without its K axis, in the result dtype (a 0-d array, never a scalar, for 1-D @ 1-D)."""
    return total.reshape(total.shape[:-1]).astype(dtype, copy=False)


def _accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype partial products are summed in: float32 for the half-precision floats, else the result's."""
    if dtype.name in ("float16", "bfloat16"):
        return np.dtype(np.float32)
    return dtype


def _operands(x1, x2):
    """Both operands as Dask arrays of one chunk library (NumPy or CuPy), or a ``TypeError`` saying why not."""
    if not (is_dask_array(x1) or is_dask_array(x2)):
        raise TypeError("polymm.dask.matmul: at least one operand must be a dask.array.Array; use polymm.matmul")
    library = None
    for which, x in (("x1", x1), ("x2", x2)):
        if is_dask_array(x):
            chunk_library = _library_name(x._meta)
            if chunk_library not in CHUNK_LIBRARIES:
                raise TypeError(
                    f"polymm.matmul: {which} is a Dask array of {dispatch._describe(x._meta)} chunks; "
                    f"polymm computes on Dask arrays of {' or '.join(CHUNK_LIBRARIES)} chunks"
                )
            if library is not None and chunk_library != library:
                raise TypeError(
                    f"polymm.matmul: x1 and x2 are Dask arrays of different chunk libraries ({library} and "
                    f"{chunk_library}); convert one of them first (e.g. x.map_blocks(cupy.asarray))"
                )
            library = chunk_library
            for axis, n in enumerate(x.shape):
                if isinstance(n, float) and math.isnan(n):
                    raise ValueError(
                        f"polymm.matmul: {which} has unknown chunk sizes (shape {x.shape}, axis {axis}); "
                        f"call {which}.compute_chunk_sizes() first"
                    )
    dask_operand = x1 if is_dask_array(x1) else x2
    wrapped = []
    for which, x in (("x1", x1), ("x2", x2)):
        if not is_dask_array(x):
            if kind_of(x) is None:
                raise TypeError(f"polymm.matmul: {which} must be an array, got {dispatch._describe(x)}")
            if _library_name(x) != library:
                raise TypeError(
                    f"polymm.matmul: x1 and x2 come from different array libraries ({dispatch._describe(x)} and a Dask "
                    f"array of {library} chunks); pass a {library} array or a Dask array"
                )
            x = _wrap(x, which, dask_operand)
        wrapped.append(x)
    return wrapped[0], wrapped[1], library


def _library_name(x) -> str | None:
    """The name of the array library ``x`` belongs to ('numpy', 'cupy', ...), or None."""
    kind = kind_of(x)
    return None if kind is None or kind is DLPACK else kind.name


def _wrap(x, which, other):
    """A NumPy/CuPy operand as a Dask array: one block, except along K where it takes the Dask operand's chunks."""
    chunks = list(x.shape)
    if x.ndim and other.ndim:
        k_axis = _k_axis(which, x.ndim)
        other_k = other.chunks[_k_axis("x2" if which == "x1" else "x1", other.ndim)]
        if sum(other_k) == x.shape[k_axis]:  # else matmul_shape names the mismatch
            chunks[k_axis] = other_k
    return da.from_array(x, chunks=tuple(chunks))


def _k_axis(which: str, ndim: int) -> int:
    """The contracted axis: last of ``x1``; second to last of ``x2`` (its only one when 1-D)."""
    return ndim - 1 if which == "x1" or ndim == 1 else ndim - 2


def _common_k_chunks(x1, x2, note=False):
    """Give both operands one chunking along K.

    Where one operand's K chunks split the other's (every boundary of the coarser
    is one of the finer), the coarser is split: each piece comes from one block on
    the worker that holds it, so nothing moves, and a panel task concatenates the
    pieces again.  Otherwise the operand with more K blocks is rechunked to the
    other's (fewer, larger block products; an ordinary Dask rechunk that moves
    data but never changes a value).  With ``note``, also returns what was done
    (None when nothing was).
    """
    a1, a2 = _k_axis("x1", x1.ndim), _k_axis("x2", x2.ndim)
    c1, c2 = x1.chunks[a1], x2.chunks[a2]
    if c1 == c2:
        return (x1, x2, None) if note else (x1, x2)
    b1, b2 = set(np.cumsum(c1)), set(np.cumsum(c2))
    if b2 < b1:  # x1's chunks split x2's: split x2
        x1, x2, text = x1, x2.rechunk({a2: c1}), f"x2's K blocks split to x1's ({len(c2)} -> {len(c1)}; nothing moves)"
    elif b1 < b2:
        x1, x2, text = x1.rechunk({a1: c2}), x2, f"x1's K blocks split to x2's ({len(c1)} -> {len(c2)}; nothing moves)"
    elif len(c1) <= len(c2):
        x1, x2, text = x1, x2.rechunk({a2: c1}), f"x2 rechunked along K to x1's {len(c1)} blocks (moves data)"
    else:
        x1, x2, text = x1.rechunk({a1: c2}), x2, f"x1 rechunked along K to x2's {len(c2)} blocks (moves data)"
    return (x1, x2, text) if note else (x1, x2)


def _indices(ndim1: int, ndim2: int, batch_ndim: int):
    """Blockwise indices of ``x1``, ``x2`` and the result.

    Batch axes are aligned from the right and broadcast by Dask (an axis of
    length 1 pairs with every block of the other); 1-D operands keep their one
    axis, and each block product applies the 1-D rules itself.
    """
    batch = tuple(f"b{i}" for i in range(batch_ndim))
    rows = ("m",) if ndim1 > 1 else ()
    cols = ("n",) if ndim2 > 1 else ()
    ind1 = batch[batch_ndim - max(ndim1 - 2, 0) :] + rows + ("k",)
    ind2 = batch[batch_ndim - max(ndim2 - 2, 0) :] + ("k",) + cols
    return ind1, ind2, batch + rows + cols


def _panel_bytes(x1, x2) -> int:
    """Bytes of the largest row panel of ``x1`` plus the largest column panel of ``x2`` (whole K)."""
    total = 0
    for which, x in (("x1", x1), ("x2", x2)):
        k_axis = _k_axis(which, x.ndim)
        elements = x.shape[k_axis]
        for axis, chunks in enumerate(x.chunks):
            if axis != k_axis:
                elements *= max(chunks, default=0)
        total += elements * x.dtype.itemsize
    return total


def _block_keywords() -> set[str]:
    """The keywords :func:`polymm.matmul` takes, ``out`` aside: what a block product may be given."""
    parameters = inspect.signature(dispatch.matmul).parameters.values()
    return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY} - {"out"}


def _carried(options: dict) -> dict:
    """The block products' keywords: the caller's, plus the backend and precision in scope here, checked here when possible.

    ``use_backend(...)`` and ``use_precision(...)`` are contexts of this process that the
    workers do not share, so the scoped names are written into the graph.  ``POLYMM_BACKEND``
    and the chunks' device are the workers' own and are read there.
    """
    accepted = _block_keywords()
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise TypeError(
            f"polymm.matmul: unexpected keyword(s) {', '.join(unknown)}; the block products take "
            f"{', '.join(sorted(accepted))} (and polymm.dask.matmul reduction, panel_limit)"
        )
    options = dict(options)
    if options.get("precision") is None:  # use_precision(...) is a context of this process, too
        options.pop("precision", None)
        if current_precision() != "default":
            options["precision"] = current_precision()
    if options.get("backend") is None:
        options.pop("backend", None)
        name = scoped_backend()
        if name is not None:
            options["backend"] = name
    name = options.get("backend")
    if name is not None:
        try:
            impl = get_backend(name)  # an unknown name is a ValueError listing the known ones
        except BackendUnavailable:
            impl = None  # it may be available on the workers (a GPU backend seen from a CPU-only client)
        if impl is not None and "algorithm" in options:
            check_algorithm(impl, name, options["algorithm"])
    return options
