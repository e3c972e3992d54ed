"""The one planner of the GPU (and OpenCL CPU) backends: which kernels a product runs, and why.

:func:`choose` picks a path by shape (a :class:`Choice` with its ``reason``);
:func:`plan` turns it into launches -- kernel, parameters (the ``#define``s),
fast-path flags, arguments packed by :mod:`polymm.kernels.abi`, NDRange,
local memory -- that a backend only has to compile, cache and enqueue.  Both
the CUDA and the OpenCL backend call it with their own :class:`DeviceInfo`.

GPU paths: ``matvec`` (work-group per row block, lanes along K) for N up to
``matvec.most_columns``; ``vecmat`` (lanes along N, teams along K, one pass over B) for M = 1;
a split row strip for M up to ``row-strip.most_rows``; split-K with a
deterministic reduction (``sum-slices``, slices added in order) for deep K;
small tiles for batches of small matrices; tiles sized so that small squares
fill the device; the table's large tiles otherwise.  Column-major operands are
read in place with vectors along M (A) or K (B); operands the vector path still
cannot read (odd K or N, other strides) get narrower vectors in small products
and are packed first into zero-padded scratch in large ones.  complex128 may run as one
float64 product on a dialect entry's kernel, B realified (:func:`_realified`).  CPU devices
(PoCL) keep their own shapes (:func:`_cpu_choice`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from . import KernelParams, abi, fast_path, launch_geometry, local_mem_bytes, value_itemsize
from .devices import recording, settings_for
from .params import DeviceInfo, regblock_params, tiled_params

__all__ = ["Choice", "Launch", "Plan", "RELAYOUT", "choose", "plan", "register_entry", "DeviceInfo", "wave_is_full"]

_VECTOR = ("float32", "float64")
# Every tile and threshold below is read from the device database (``devices.json``, through
# :func:`~polymm.kernels.devices.settings_for`): this module keeps the formulas only.


def wave_is_full(groups: int, device: DeviceInfo) -> bool:
    """Whether ``groups`` work-groups fill the device's compute units: a wave within the
    database's ``tiles.full_wave`` share of them counts as full (compared in hundredths)."""
    full = settings_for(device)("tiles", "full_wave")
    return 100 * groups >= round(100 * full) * max(1, device.compute_units)


@dataclass(frozen=True)
class Choice:
    """What a product runs, and why (``reason``).

    ``kernel``/``params``: the product kernel; ``swap``: compute ``C^T = B^T A^T``
    (same memory layout because M or N is 1); ``pack_a``/``pack_b``: copy that
    operand to contiguous scratch first (``pack_b="transposed"`` stores B as
    N x K, what the CPU ``matvec`` reads); ``pad``: round K and B's rows up to
    a multiple of this in the packed copies (zero-filled) so that the vector
    path reads whole vectors; ``splits``: split-K, slices of K computed as a
    batch into scratch, then added in slice order (deterministic).
    Iterates as ``(kernel, params)``.
    """

    kernel: str
    params: KernelParams | None
    reason: str = ""
    swap: bool = False
    pack_a: bool = False
    pack_b: str = ""
    splits: int = 1
    pad: int = 1
    #: A dialect-only kernel outside this package (a planner entry's): its
    #: ``source`` and ``options`` to compile, ``grid``/``block``, ``smem`` bytes;
    #: optionally ``abi`` (its argument list, in :mod:`~polymm.kernels.abi`'s form, when not the
    #: products'), ``scratch`` (bytes per buffer, slots 3 and on), ``before`` and
    #: ``after`` (launches around it, see :func:`_extra_launch`), ``operands``
    #: (what it reads, as ``(slot, offset, strides...)``, when not A and B) and
    #: whatever its backend needs (``tma``: CUDA tensor maps). With ``splits``
    #: it must take the batch along grid z, and ``k_step`` (default 1) is what
    #: each slice's depth is a multiple of.
    external: dict | None = None

    def __iter__(self):
        return iter((self.kernel, self.params))

    def replace(self, **changes) -> "Choice":
        return dataclasses.replace(self, **changes)


@dataclass
class Launch:
    """One kernel launch: ``args`` in ABI order with ``None`` for buffers,
    ``buffers`` maps those positions to slots (0 = A, 1 = B, 2 = C, 3+ =
    scratch); sizes in work-items (CUDA: grid = global // local);
    ``dynamic_local``: local-memory bytes given at launch (``tiled-dynamic``)."""

    kernel: str
    params: KernelParams | None
    flags: dict
    args: list
    buffers: dict
    global_size: tuple
    local_size: tuple
    dynamic_local: int = 0
    dtype: object = None
    external: dict | None = None

    @property
    def signature(self) -> str | tuple:
        """The kernel whose ABI entry gives the argument list, or the list itself (external kernels
        take the products' unless they carry their own, as ``"abi"``)."""
        return self.external.get("abi", "regblock") if self.external is not None else self.kernel

    @property
    def local_mem(self) -> int:
        """Local (shared) memory bytes per work-group, static or dynamic."""
        if self.external is not None:
            return self.external["smem"]
        return local_mem_bytes(self.kernel, self.dtype, self.params) if self.params else 0


@dataclass
class Plan:
    """Launches in order, scratch buffers (bytes each), the :class:`Choice` behind them and the
    device-database entries the planner read to make it (``settings``, for explain)."""

    choice: Choice
    launches: list = field(default_factory=list)
    scratch: list = field(default_factory=list)
    dtype: object = None
    settings: tuple = ()
    #: A dialect entry answered :data:`RELAYOUT`: its kernels would run these operands once copied
    #: (the launches are the shared paths' for the operands as they lie; the backend may copy them
    #: and plan the copies instead).
    relayout: bool = False

    @property
    def product(self) -> Launch:
        """The (first) launch of the product kernel itself."""
        return next(x for x in self.launches if x.kernel == self.choice.kernel)

    @property
    def reason(self) -> str:
        return self.choice.reason


#: Dialect-only entries tried first for ``auto`` (e.g. CUDA's tensor cores):
#: dialect -> functions ``(device, dtype, shape, a, b) -> Choice | None``,
#: with ``shape``, ``a``, ``b`` as :func:`plan` takes them.
ENTRIES: dict[str, list] = {}
#: What an entry answers for operands its kernels would read once copied into the layout they
#: take, not as they lie: the plan is the shared paths' and says so (:attr:`Plan.relayout`), so
#: the backend learns it from the one plan rather than by asking the entry's rules again.
RELAYOUT = Choice("relayout", None, "operands to be copied into the layout a dialect entry's kernels read")


def register_entry(dialect: str, entry) -> None:
    """Let ``entry`` claim ``auto`` products on ``dialect`` devices before the shared paths."""
    if entry not in ENTRIES.setdefault(dialect, []):
        ENTRIES[dialect].append(entry)


def choose(device: DeviceInfo, algorithm: str, dtype, M, N, K, batch=1, a_strides=None, b_strides=None) -> Choice:
    """The :class:`Choice` for ``algorithm`` (``auto``, ``naive``, ``tiled``...) on ``device``.

    Strides in elements: ``(batch, row, column)`` of A and ``(batch, K, N)`` of
    B (None: contiguous).
    """
    dtype = np.dtype(dtype)
    if algorithm == "naive":
        return Choice("naive", None, "asked for naive")
    if algorithm in ("tiled", "tiled-dynamic"):
        return Choice(algorithm, tiled_params(device, dtype), f"asked for {algorithm}")
    a_strides = a_strides or (M * K, K, 1)
    b_strides = b_strides or (K * N, N, 1)
    if device.is_cpu:
        params = regblock_params(device, dtype)
        if dtype.name not in _VECTOR:
            return Choice("regblock", params, f"CPU, {dtype.name}: scalar register blocks")
        return _cpu_choice(device, dtype, M, N, K, batch, a_strides, b_strides, params)
    return _gpu_choice(device, dtype, M, N, K, batch, a_strides, b_strides)


# ---- GPU ----------------------------------------------------------------------------------


def _gpu_tile(device, dtype, mwg, nwg, kwg, mdimc, ndimc, kteams=1) -> KernelParams:
    """A local-memory tile of this shape with the table's vector widths (narrowed to fit), padding
    and work-group order; ``kteams`` teams splitting K, fewer while they exceed the device's
    work-group size or local memory, then the K step halved until the tiles fit (wide dtypes)."""
    base = regblock_params(device, dtype)

    def local(kwg, kteams):
        shape = KernelParams(mwg=mwg, nwg=nwg, kwg=kwg, mdimc=mdimc, ndimc=ndimc, pad=base.pad, kteams=kteams)
        return local_mem_bytes("regblock", dtype, shape)

    while kteams > 1 and (mdimc * ndimc * kteams > device.max_work_group or local(kwg, kteams) > device.local_mem):
        kteams //= 2
    while kwg > 1 and local(kwg, kteams) > device.local_mem:
        kwg //= 2
    for gvw in (base.gvw, 2, 1):
        vw = min(base.vw, mwg // mdimc, nwg // ndimc)
        while vw > 1 and ((mwg // mdimc) % vw or (nwg // ndimc) % vw):
            vw //= 2
        regs = 128 if (mwg // mdimc) * (nwg // ndimc) >= 32 else 0  # as the table's 8 x 8 micro-tiles
        p = base.replace(
            mwg=mwg,
            nwg=nwg,
            kwg=kwg,
            mdimc=mdimc,
            ndimc=ndimc,
            vw=max(vw, 1),
            gvw=gvw,
            maxrreg=regs,
            kteams=kteams,
        )
        try:
            p.validate("regblock")
        except ValueError:
            continue
        return p
    raise AssertionError(f"no vector width fits tile {mwg}x{nwg}x{kwg}")


def _cdiv(a, b):
    return -(-a // b)


def _gpu_choice(device, dtype, M, N, K, batch, a_strides, b_strides) -> Choice:
    _, a_sm, a_sk = a_strides
    _, b_sk, b_sn = b_strides
    cus = max(1, device.compute_units)
    settings = settings_for(device)
    few = settings("matvec", "most_columns")
    if N <= few and K >= 32:
        # Memory-bound: each element of A is used N times at most.  Lanes of a
        # work-group walk K side by side (coalesced along a row of A).
        lanes = min(256, device.max_work_group, max(64, K // settings("matvec", "k_per_lane")))
        lanes = 1 << (lanes.bit_length() - 1)
        mv = KernelParams(
            mr=max(settings("matvec", "rows_per_group"), few // N), nwg=N, mdimc=lanes, vw=1, use_local=True
        )
        while mv.mdimc > 32 and local_mem_bytes("matvec", dtype, mv) > device.local_mem:
            mv = mv.replace(mdimc=mv.mdimc // 2)
        if a_sk == 1 or M == 1:
            return Choice("matvec", mv, f"N={N} <= {few}: a work-group of {lanes} per {mv.mr} rows, lanes along K")
        return Choice("matvec", mv, f"N={N} <= {few}, A not row-major: packed to rows first", pack_a=True)
    if M == 1 and K >= 32:
        return _vecmat_choice(device, dtype, N, K, batch)
    table = regblock_params(device, dtype)
    strip_rows = settings("row-strip", "most_rows")
    if M <= strip_rows and K >= 32 and batch == 1:
        # A few rows: one pass over B in wide column panels, K split when the panels are too
        # few to keep B's reads in flight: about 4 small work-groups per compute unit (1 x 4096
        # @ 4096 x 4096 on the H100, kernels alone: 64.6 us in 4 slices, 38.4 in 8, 30.3 in 16,
        # 36.0 in 32; cuBLAS 25.2).
        # 4 KiB of each operand's rows per K step (32 float32, 16 float64 values: float64 4 x 4096
        # @ 4096 x 4096 on the H100, probe20: 122.6 -> 83.7 us with 16 instead of 32, cuBLAS 76.6).
        strip = _gpu_tile(device, dtype, 8, 128, max(8, min(32, 128 // value_itemsize(dtype))), 2, 32)
        groups = _cdiv(N, strip.nwg)
        splits = max(1, min(_cdiv(4 * cus, groups), K // 128, 32))
        choice = Choice(
            "regblock",
            strip,
            f"M={M} <= {strip_rows}: row strip, B streamed in {strip.nwg}-column panels",
            splits=splits,
        )
    elif (
        batch == 1 and K >= (deep_k := settings("split-k", "deep_k")) * max(M, N) and K >= settings("split-k", "min_k")
    ):
        # Two waves of work-groups over the compute units, slices at least 256 deep, and at most
        # split-k.slices_bytes of partial sums for the reduction to read back.
        if min(M, N) >= min(table.mwg, table.nwg):
            tile = table
        elif max(M, N) > 32:
            tile = _gpu_tile(device, dtype, 64, 64, 16, 8, 16)
        else:
            tile = _gpu_tile(device, dtype, 16, 16, 16, 8, 8)
        groups = _cdiv(M, tile.mwg) * _cdiv(N, tile.nwg)
        most = max(2, settings("split-k", "slices_bytes") // (M * N * dtype.itemsize))
        splits = max(2, min(_cdiv(2 * cus, groups), K // 256, most, 256))
        splits = 1 << (splits.bit_length() - 1)  # a power of two, rounded down
        choice = Choice(
            "regblock",
            tile,
            f"deep K={K} >= {deep_k} x max(M, N): {splits} slices of K, added in order",
            splits=splits,
        )
    elif batch > 1 and max(M, N) <= 64:
        edge = 16 if max(M, N) <= 16 else 32 if max(M, N) <= 32 else 64
        threads = 8 if edge <= 32 else 16
        tile = _gpu_tile(device, dtype, edge, edge, 16, threads, threads)
        choice = Choice("regblock", tile, f"batch of {batch} small {M}x{N}: one {edge}x{edge} work-group per matrix")
    else:
        # The table's (large) tiles, or smaller ones while they leave compute units idle (a wave
        # within a tenth of the device counts as full).
        smaller = settings("tiles", "smaller")
        if value_itemsize(dtype) > 8:
            smaller = [*smaller[:-1], settings("tiles", "smallest_wide")]
        tiles = [table] + [
            _gpu_tile(device, dtype, *shape) for shape in smaller if shape[0] * shape[1] < table.mwg * table.nwg
        ]
        for tile in tiles:
            groups = batch * _cdiv(M, tile.mwg) * _cdiv(N, tile.nwg)
            if wave_is_full(groups, device) or tile is tiles[-1]:
                break
        what = "large tiles" if tile is table else f"{tile.mwg}x{tile.nwg} tiles to fill {cus} compute units"
        what += f", {tile.kteams} teams splitting K" if tile.kteams > 1 else ""
        if K < tile.kwg:  # outer products: no K step of zeros (float64 2048 x 1 @ 1 x 2048: 15.7 -> 12.1 us)
            try:
                shape = (tile.mwg, tile.nwg, 1 << (K - 1).bit_length(), tile.mdimc, tile.ndimc, tile.kteams)
                tile = _gpu_tile(device, dtype, *shape)
                what += f", K steps of {tile.kwg}"
            except AssertionError:  # no vector width fits so shallow a tile: keep the K step
                pass
        choice = Choice("regblock", tile, f"{M}x{N}x{K}: {what} ({groups} work-groups)")
    return _gpu_packing(device, choice, dtype, M, N, K, batch, a_strides, b_strides)


def _vecmat_choice(device, dtype, N, K, batch) -> Choice:
    """A row vector times a matrix: ``vecmat`` streams B once (float32 and float64: one vector
    load per row and work-item), in one launch unless N gives too few work-groups; then K is
    split too (slices added in order), each slice deep enough for every team to fill its rows in
    flight once."""
    settings = settings_for(device)
    ndimc, mdimc, kwg, gvw = settings("vecmat", "geometry")
    params = KernelParams(mr=1, nwg=ndimc * gvw, ndimc=ndimc, mdimc=mdimc, kwg=kwg, gvw=gvw, use_local=False)
    while params.mdimc > 1 and local_mem_bytes("vecmat", dtype, params) > device.local_mem:
        params = params.replace(mdimc=params.mdimc // 2)
    cus = device.compute_units
    groups = _cdiv(N, params.nwg) * batch
    splits = 1
    if batch == 1 and groups < settings("vecmat", "split_below") * cus:
        splits = max(1, min(_cdiv(cus, 2 * groups), K // (params.mdimc * kwg), 32))
    slices = f", {splits} slices of K added in order" if splits > 1 else ""
    return Choice("vecmat", params, f"M=1: B streamed once, {params.nwg} columns per work-group{slices}", splits=splits)


def _gpu_packing(device, choice, dtype, M, N, K, batch, a_strides, b_strides) -> Choice:
    """Operands the vector path cannot read as they are (odd K or N, strides): narrower vectors
    for small products, whose packing launches would cost more than they save; packed,
    zero-padded copies for the others."""
    params = choice.params
    if np.dtype(dtype).name not in _VECTOR + ("complex64",) or params.gvw == 1:
        return choice
    flags = fast_path("cuda", dtype, params, M, N, K, batch, 0, a_strides, 0, b_strides)
    if flags["vec_a"]:
        if flags["a_mmajor"] or flags["b_kmajor"]:
            return choice.replace(reason=choice.reason + "; column-major operands read in place with vectors")
        return choice
    settings = settings_for(device)
    if M * N * K * batch < settings("packing", "worth") or K < settings("packing", "depth"):
        for g in (2, 1):  # down to single elements, which keep the prefetch pipeline of the vector path
            narrow = params.replace(gvw=g)
            try:
                narrow.validate("regblock")
            except ValueError:
                continue
            if g < params.gvw and fast_path("cuda", dtype, narrow, M, N, K, batch, 0, a_strides, 0, b_strides)["vec_a"]:
                return choice.replace(params=narrow, reason=choice.reason + f"; loads {g} wide (odd sizes)")
        return choice
    g = params.gvw
    _, a_sm, a_sk = a_strides
    _, b_sk, b_sn = b_strides
    odd_k = K % g != 0
    a_ok = a_sk == 1 and a_sm % g == 0 and (batch == 1 or a_strides[0] % g == 0) and not odd_k
    b_ok = b_sn == 1 and b_sk % g == 0 and N % g == 0 and (batch == 1 or b_strides[0] % g == 0) and not odd_k
    return choice.replace(
        pack_a=not a_ok,
        pack_b="" if b_ok else "rows",
        pad=g,
        reason=choice.reason + f"; operands packed (zero-padded to multiples of {g}) for the vector path",
    )


# ---- CPU (PoCL) -----------------------------------------------------------------------------


def _bucket(n: int, unit: int) -> int:
    """The smallest ``unit * 2**j`` holding ``n``: a CPU block size rounded so that products
    of many shapes share a few programs. The kernel stops at M and N (rows past M are not
    visited, columns past N are not stored), so only the compiled constant changes, and a
    process meeting ever new shapes does not build (and keep: PoCL holds on to a program's
    compiled code) a program per shape."""
    size = unit
    while size < n:
        size *= 2
    return size


def _cpu_choice(device, dtype, M, N, K, batch, a_strides, b_strides, params) -> Choice:
    """The CPU (PoCL) planner for float32/float64; strides in elements."""
    width = 32 // np.dtype(dtype).itemsize  # 256-bit vectors
    _, a_sm, a_sk = a_strides
    _, b_sk, b_sn = b_strides
    pack_b = "" if b_sn == 1 else "rows"
    pack_a = a_sk != 1 and a_sm != 1
    settings = settings_for(device)
    few = settings("matvec", "most_columns")
    # Batches of small matrices: one matrix per work-item, several per work-group.
    if batch > 1 and M * N <= settings("small-batched", "most_elements") and K <= 256:
        nwg = _bucket(N, width)
        nr = 2 * width if nwg % (2 * width) == 0 else width
        mr = 4 if nr == 2 * width else 6
        mr = min(mr, M)
        small = KernelParams(
            mwg=_bucket(M, mr),
            nwg=nwg,
            kwg=1 << 20,
            mdimc=1,
            ndimc=1,
            vw=width,
            mr=mr,
            nr=nr,
            use_local=False,
            bpg=16,
        )
        return Choice(
            "regblock",
            small,
            f"batch of {batch} small {M}x{N}: whole matrices per work-item",
            pack_a=pack_a,
            pack_b=pack_b,
        )
    # Matrix-vector: few columns; read A along its rows.
    if N <= few and K >= 2 * width:
        mv = KernelParams(mr={1: 4, 2: 4}.get(N, 2), nwg=N, vw=width, mdimc=4, use_local=False)
        if a_sk == 1:
            return Choice(
                "matvec", mv, f"N={N} <= {few}: dot products along K", pack_b="" if b_sk == 1 else "transposed"
            )
        if N == 1 and a_sm == 1:
            inner = _cpu_choice(device, dtype, 1, M, K, batch, (0, 0, 1), (0, a_sk, a_sm), params)
            return inner.replace(swap=True, reason="A column-major, N=1: as (B^T A^T); " + inner.reason)
        return Choice(
            "matvec",
            mv,
            f"N={N} <= {few}, A packed to rows first",
            pack_a=True,
            pack_b="" if b_sk == 1 else "transposed",
        )
    # A strip of few rows: vectors along N, one pass over B.
    strip_rows = settings("row-strip", "most_rows")
    if M <= strip_rows and K >= 2 * width:
        if b_sn != 1 and M == 1 and b_sk == 1:
            inner = _cpu_choice(device, dtype, N, 1, K, batch, (0, b_sn, b_sk), (0, 1, 1), params)
            return inner.replace(swap=True, reason="B column-major, M=1: as (B^T A^T); " + inner.reason)
        # Long contiguous runs of each row of B (a K chunk of 16 rows across NWG
        # columns, NR at a time) keep the hardware prefetcher streaming.
        mr = M if M <= 4 else 4
        nr = max(2, 8 // mr) * width
        nwg = next(w * width for w in (128, 64, 32, 16, 8) if N % (w * width) == 0 or w == 8)
        nwg = max(nwg, nr)
        strip = KernelParams(
            mwg=_bucket(M, mr), nwg=nwg, kwg=16, mdimc=1, ndimc=1, vw=width, mr=mr, nr=nr, use_local=False
        )
        splits = 2 if batch == 1 and K >= 1024 else 1
        return Choice(
            "regblock",
            strip,
            f"M={M} <= {strip_rows}: row strip, rows of B streamed {nwg} wide",
            pack_b="" if b_sn == 1 else "rows",
            splits=splits,
        )
    # Deep K: not enough blocks of C to share out; split K and add the slices in order.
    if batch == 1 and K >= settings("split-k", "deep_k") * max(M, N) and K >= settings("split-k", "min_k"):
        mr = 4 if M % 6 else 6
        deep = KernelParams(
            mwg=min(8 * mr, _bucket(M, mr)),
            nwg=min(_bucket(N, 2 * width), 16 * width),
            kwg=256,
            mdimc=1,
            ndimc=1,
            vw=width,
            mr=mr,
            nr=2 * width,
            pack_b=True,
            use_local=False,
        )
        blocks = -(-M // deep.mwg) * -(-N // deep.nwg)
        splits = max(2, min(32, -(-16 // blocks), K // 2048))
        return Choice(
            "regblock",
            deep,
            f"deep K={K}: {splits} slices of K, added in order",
            pack_a=pack_a,
            pack_b=pack_b,
            splits=splits,
        )
    # Small K (outer products): C is the traffic; write long runs of each row.
    if K <= 64 and N >= 256 and M >= 48:
        outer = KernelParams(mwg=48, nwg=256, kwg=64, mdimc=1, ndimc=1, vw=width, mr=6, nr=2 * width, use_local=False)
        return Choice("regblock", outer, f"K={K} <= 64: C written 256 columns at a time", pack_a=pack_a, pack_b=pack_b)
    # A is read a scalar at a time along K: with K-steps far apart (A transposed)
    # they all land in one cache set, so it is worth a copy too.
    pack_a = a_sk != 1
    reason = "table regblock (CPU shape)"
    if pack_a or pack_b:
        reason += ", strided operands packed first"
    return Choice("regblock", params, reason, pack_a=pack_a, pack_b=pack_b)


# ---- launches -------------------------------------------------------------------------------


def plan(device: DeviceInfo, dtype, shape, a, b, c_off=0, algorithm="auto", choice: Choice | None = None) -> Plan:
    """The launches of one product on ``device``.

    ``shape = (batch, M, N, K)``; ``a = (offset, (sb, sm, sk))`` and
    ``b = (offset, (sb, sk, sn))`` in elements; ``c_off``: where C starts in
    its (contiguous) buffer.  ``choice`` overrides :func:`choose`.  The plan
    holds the database entries that decided it (:attr:`Plan.settings`).
    """
    with recording() as read:
        made = _plan(device, dtype, shape, a, b, c_off, algorithm, choice)
    made.settings = tuple(read)
    return made


def _plan(device, dtype, shape, a, b, c_off, algorithm, choice) -> Plan:
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    batch, M, N, K = shape
    A = (0, a[0], *a[1])
    B = (1, b[0], *b[1])
    relayout = False
    if choice is None and algorithm == "auto":
        choice = _entry_choice(device, dtype, shape, a, b)
        if choice is RELAYOUT:
            choice, relayout = None, True
        if choice is None and dtype.name in REAL_OF:
            realified = _realified(device, dtype, shape, a, b, c_off)
            if realified is not None:
                return realified
    if choice is None:
        choice = choose(device, algorithm, dtype, M, N, K, batch, A[2:], B[2:])
    out = Plan(choice, dtype=dtype, relayout=relayout)

    def new_scratch(elements):
        out.scratch.append(max(1, elements) * size)
        return 2 + len(out.scratch)

    def add(kernel, params, flags, args, buffers, rows, cols, count, dynamic=0):
        glob, local = launch_geometry(kernel, params, rows, cols, count)
        launch = Launch(kernel, params, flags, args, buffers, glob, local, dynamic, dtype)
        out.launches.extend(_split_batch(launch, device.max_batch))

    def products(product, A, B, K, step):
        """C as ``product`` computes it (operands, C's slot and offset, batch count, depth); with
        split-K, slices of K (``step`` deep or a multiple) as a batch into scratch, then summed in
        order."""
        if choice.splits <= 1:
            product(A, B, 2, c_off, batch, K)
            return
        depth = _cdiv(_cdiv(K, choice.splits), step) * step
        full = K // depth
        rest = K - full * depth
        count = M * N
        parts = new_scratch((full + (rest > 0)) * count)
        product((A[0], A[1], depth * A[4], A[3], A[4]), (B[0], B[1], depth * B[3], B[3], B[4]), parts, 0, full, depth)
        if rest:
            product(
                (A[0], A[1] + full * depth * A[4], 0, A[3], A[4]),
                (B[0], B[1] + full * depth * B[3], 0, B[3], B[4]),
                parts,
                full * count,
                1,
                rest,
            )
        pos = abi.buffer_positions("sum-slices")
        args = abi.arguments("sum-slices", S=full + (rest > 0), count=count, c_off=c_off)
        add("sum-slices", None, {}, args, {pos["W"]: parts, pos["C"]: 2}, count, 1, 1)

    if choice.external is not None:  # a dialect-only kernel, with the launches its entry puts around it
        ext = choice.external
        out.scratch.extend(ext.get("scratch", ()))
        out.launches.extend(_extra_launch(x, dtype, c_off) for x in ext.get("before", ()))
        signature = ext.get("abi", "regblock")  # the products' list, or the one it carries
        ext_pos = abi.buffer_positions(signature)

        def external(A, B, c_slot, c_off, count, depth):
            args = abi.gemm_arguments(M, N, depth, A[1:], B[1:], c_off, signature, batch=count)
            grid = ext["grid"] if choice.splits <= 1 else (*ext["grid"][:2], count)
            glob = tuple(g * b for g, b in zip(grid, ext["block"]))
            buffers = {ext_pos["A"]: A[0], ext_pos["B"]: B[0], ext_pos["C"]: c_slot}
            launch = Launch(choice.kernel, None, {}, args, buffers, glob, tuple(ext["block"]), ext["smem"], dtype, ext)
            out.launches.extend(_split_batch(launch, device.max_batch))

        # what the kernel reads: the operands, or scratch made before
        products(external, *ext.get("operands", (A, B)), K, ext.get("k_step", 1))
        out.launches.extend(_extra_launch(x, dtype, c_off) for x in ext.get("after", ()))
        return out

    def pack(op, rows, cols, transpose, rp, ld):
        """Copy ``op`` (rows x cols per batch entry) to scratch as rp x ld rows
        (zero padding); ``transpose`` stores it as cols x rows.  Returns the new operand."""
        slot, off, sb, sr, sc = op
        copies = batch if sb else 1
        if transpose:
            rows, cols, sr, sc = cols, rows, sc, sr
        dst = new_scratch(copies * rp * ld)
        args = abi.arguments("pack", R=rows, NC=cols, RP=rp, LD=ld, s_off=off, s_sb=sb, s_sr=sr, s_sc=sc, d_off=0)
        pos = abi.buffer_positions("pack")
        # GPUs: an element per work-item, 64 side by side along the rows (coalesced;
        # tiles only past 65535 rows, CUDA's grid limit); CPUs: a 16 x 16 tile per
        # work-item, whose cache lines are used whole.
        tile = KernelParams(ts=16 if device.is_cpu else _cdiv(rp, 65535))
        add("pack", tile, {}, args, {pos["src"]: slot, pos["dst"]: dst}, rp, ld, copies)
        return (dst, 0, rp * ld if sb else 0, ld, 1)

    if choice.swap:  # C^T = B^T A^T, stored alike because M or N is 1
        A, B = (B[0], B[1], B[2], B[4], B[3]), (A[0], A[1], A[2], A[4], A[3])
        M, N = N, M
    g = choice.pad
    Kp = _cdiv(K, g) * g
    if choice.pack_a:
        A = pack(A, M, K, False, M, Kp)
    if choice.pack_b == "transposed":
        B = pack(B, K, N, True, N, K)
        B = (B[0], B[1], B[2], B[4], B[3])
    elif choice.pack_b:
        B = pack(B, K, N, False, Kp, _cdiv(N, g) * g)
    K = Kp if (choice.pack_a and choice.pack_b) else K
    kernel, params = choice.kernel, choice.params
    padded = choice.pack_b == "rows" and g > 1
    gemm_pos = abi.buffer_positions(kernel)

    def product(A, B, c_slot, c_off, count, depth):
        flags = {}
        if kernel in ("regblock", "matvec", "vecmat"):
            dialect = device.dialect
            flags = fast_path(
                dialect, dtype, params, M, N, depth, count, A[1], A[2:], B[1], B[2:], kernel=kernel, padded=padded
            )
        args = abi.gemm_arguments(M, N, depth, A[1:], B[1:], c_off)
        dynamic = local_mem_bytes(kernel, dtype, params) if kernel == "tiled-dynamic" else 0
        buffers = {gemm_pos["A"]: A[0], gemm_pos["B"]: B[0], gemm_pos["C"]: c_slot}
        add(kernel, params, flags, args, buffers, M, N, count, dynamic)

    products(product, A, B, K, max(params.kwg if params and params.use_local else 1, g))
    return out


def _entry_choice(device, dtype, shape, a, b) -> Choice | None:
    """The first dialect entry's claim on this product (:data:`ENTRIES`; :data:`RELAYOUT` is one), or None."""
    return next(filter(None, (entry(device, dtype, shape, a, b) for entry in ENTRIES.get(device.dialect, ()))), None)


#: Complex dtypes that may run as one real product (``kernels/realify.c``) on a dialect entry's
#: kernel (CUDA: complex128 on the FP64 tensor cores), from the database's ``realify.work``.
REAL_OF = {"complex128": "float64"}


def _realified(device, dtype, shape, a, b, c_off) -> Plan | None:
    """A complex product as one real product, when a dialect entry runs that: A read in place as
    M x 2K reals (its K axis must be contiguous), B written by ``realify`` as 2K x 2N reals
    (scratch slot 3), C written as M x 2N reals.  Offsets count from a base aligned to the
    complex item (as every complex kernel assumes)."""
    bt, M, N, K = shape
    (a_off, sa), (b_off, sb) = a, b
    settings = settings_for(device)
    if sa[2] != 1 or M * N * K < settings("realify", "work"):
        return None
    real = np.dtype(REAL_OF[dtype.name])
    copies = bt if sb[0] else 1
    if copies * 4 * K * N * real.itemsize > settings("realify", "most_bytes"):
        return None
    rshape = (bt, M, 2 * N, 2 * K)
    ra = (2 * a_off, (2 * sa[0], 2 * sa[1], 1))
    rb = (0, (4 * K * N if copies > 1 else 0, 2 * N, 1))
    choice = _entry_choice(device, real, rshape, ra, rb)
    if choice is None or choice.external is None or "tma" in choice.external:
        return None  # only the entries' kernels gain from it (tensor maps would name slot 1)
    inner = plan(device, real, rshape, ra, rb, 2 * c_off, choice=choice)
    moved = {1: 3}  # B is now realify's output; the inner plan's scratch moves up a slot
    for launch in inner.launches:
        launch.buffers = {pos: moved.get(s, s + 1 if s >= 3 else s) for pos, s in launch.buffers.items()}
    args = abi.arguments("realify", K=K, N=N, s_off=2 * b_off, s_sb=2 * sb[0], s_sk=2 * sb[1], s_sn=2 * sb[2], d_off=0)
    pos = abi.buffer_positions("realify")
    params = KernelParams(ts=_cdiv(K, 65535))
    glob, local = launch_geometry("realify", params, K, N, copies)
    expand = Launch("realify", params, {}, args, {pos["src"]: 1, pos["dst"]: 3}, glob, local, 0, real)
    why = f"{dtype.name} as one {real.name} product ({M} x {2 * K} @ {2 * K} x {2 * N}, B realified): "
    return Plan(
        choice.replace(reason=why + choice.reason),
        launches=[*_split_batch(expand, device.max_batch), *inner.launches],
        scratch=[copies * 4 * K * N * real.itemsize, *inner.scratch],
        dtype=real,
    )


def _extra_launch(desc: dict, dtype, c_off: int) -> Launch:
    """A launch an entry asks for before or after its kernel (e.g. operands split into parts):
    kernel, argument list (``abi``) and its ``values``, buffer name -> slot, grid, block, smem."""
    args = abi.arguments(desc["abi"], c_off=c_off, **desc["values"])
    pos = abi.buffer_positions(desc["abi"])
    glob = tuple(g * b for g, b in zip(desc["grid"], desc["block"]))
    buffers = {pos[name]: slot for name, slot in desc["buffers"].items()}
    return Launch(desc["kernel"], None, {}, args, buffers, glob, tuple(desc["block"]), desc["smem"], dtype, desc)


def _split_batch(launch: Launch, most: int):
    """``launch`` as launches of at most ``most`` batch entries (offsets advanced)."""
    count = launch.global_size[2]
    if count <= most or launch.kernel == "sum-slices":
        return [launch]
    local_z = launch.local_size[2]
    most -= most % local_z
    steps = abi.batch_step(launch.signature, launch.args)
    found = []
    for z0 in range(0, count, most):
        args = list(launch.args)
        for pos, step in steps.items():
            args[pos] += z0 * step
        glob = (*launch.global_size[:2], min(most, count - z0))
        found.append(dataclasses.replace(launch, args=args, global_size=glob))
    return found
