"""The shared kernel families: the SIMT paths every dialect renders (``kernels/*.c``).

On GPUs they are tried in order, the first that takes a product being the shared candidate (the
database's switch points -- ``matvec.most_columns``, ``row-strip.most_rows``, ``split-k.deep_k``
-- divide the shapes between them, as a routine switch does): ``matvec`` (work-group per row
block, lanes along K) for few columns; ``vecmat`` (lanes along N, teams along K, one pass over
B) for M = 1; a split row strip for few rows; split-K with a deterministic reduction
(``sum-slices``, slices added in order) for deep K; small tiles for batches of small matrices;
the table's large tiles, or smaller ones that fill the device, otherwise.  Column-major operands
are read in place with vectors along M (A) or K (B); operands the vector path still cannot read
(odd K or N, other strides) get narrower vectors in small products and are packed first into
zero-padded scratch in large ones (:func:`_gpu_packing`).  CPU devices (PoCL) have one family of
their own shapes (:func:`_cpu_choice`).  Each candidate's :class:`~polymm.kernels.cost.Work` is
what the planner weighs against a backend's own families (CUDA's tensor cores).
"""

from __future__ import annotations

import numpy as np

from . import KernelParams, fast_path, launch_geometry, local_mem_bytes, value_itemsize
from .cost import Work, real_macs
from .devices import settings_for
from .families import Candidate, Choice, Family, Problem, Refusal, register
from .params import regblock_params

__all__ = ["gpu_tile", "shared_work", "wave_is_full"]

_VECTOR = ("float32", "float64")
# Every tile and threshold below is read from the device database (``devices.json``, through
# :func:`~polymm.kernels.devices.settings_for`): this module keeps the formulas only.


def wave_is_full(groups: int, device) -> bool:
    """Whether ``groups`` work-groups fill the device's compute units: a wave within the
    database's ``tiles.full_wave`` share of them counts as full (compared in hundredths)."""
    full = settings_for(device)("tiles", "full_wave")
    return 100 * groups >= round(100 * full) * max(1, device.compute_units)


def _cdiv(a, b):
    return -(-a // b)


def shared_work(problem: Problem, choice: Choice) -> Work:
    """What a shared kernel's ``choice`` does on ``problem``, for the cost model: its work-groups
    (from the launch geometry), multiply-adds with its tile's padding, the operands, C and any
    split-K partial sums moved, its launches and packed copies."""
    batch, M, N, K = problem.shape
    if choice.swap:
        M, N = N, M
    dtype, p = problem.dtype, choice.params
    size = np.dtype(dtype).itemsize
    splits = max(1, choice.splits)
    glob, local = launch_geometry(choice.kernel, p, M, N, batch * splits)
    groups = 1
    for extent, group in zip(glob, local):
        groups *= _cdiv(extent, group)
    padded, tile = M * N, None
    if choice.kernel == "regblock" and p is not None and p.mwg and p.nwg:
        padded, tile = _cdiv(M, p.mwg) * p.mwg * _cdiv(N, p.nwg) * p.nwg, (p.mwg, p.nwg)
    a_bytes, b_bytes, c_bytes = batch * M * K * size, batch * K * N * size, batch * M * N * size
    copied = (a_bytes if choice.pack_a else 0) + (b_bytes if choice.pack_b else 0)
    return Work(
        rate=f"simt:{np.dtype(dtype).name}",
        macs=real_macs(dtype, batch * padded * K),
        groups=groups,
        tile=tile,
        bytes=a_bytes + b_bytes + c_bytes + (2 * splits * c_bytes if splits > 1 else 0),
        launches=1 + (splits > 1) + bool(choice.pack_a) + bool(choice.pack_b),
        copied=copied,
    )


def _offer(family: str, problem: Problem, choice: Choice) -> Candidate:
    return Candidate(family, choice, shared_work(problem, choice))


# ---- GPU ----------------------------------------------------------------------------------


def gpu_tile(device, dtype, mwg, nwg, kwg, mdimc, ndimc, kteams=1) -> KernelParams:
    """A local-memory tile of this shape with the table's vector widths (narrowed to fit), padding
    and work-group order; ``kteams`` teams splitting K, fewer while they exceed the device's
    work-group size or local memory, then the K step halved until the tiles fit (wide dtypes)."""
    base = regblock_params(device, dtype)

    def local(kwg, kteams):
        shape = base.replace(mwg=mwg, nwg=nwg, kwg=kwg, mdimc=mdimc, ndimc=ndimc, kteams=kteams)
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


def _matvec(p: Problem) -> Candidate | Refusal:
    """Few columns, memory-bound (each element of A used N times at most): lanes of a work-group
    walk K side by side, coalesced along a row of A."""
    device, dtype, M, N, K = p.device, p.dtype, p.M, p.N, p.K
    settings = settings_for(device)
    few = settings("matvec", "most_columns")
    if not (N <= few and K >= 32):
        return Refusal("matvec", f"N={N} > matvec.most_columns={few} or K={K} < 32")
    lanes = min(256, device.max_work_group, max(64, K // settings("matvec", "k_per_lane")))
    lanes = 1 << (lanes.bit_length() - 1)
    run = max(1, settings("matvec", "run_bytes") // np.dtype(dtype).itemsize)  # elements per load of a row of A
    mv = KernelParams(
        mr=max(settings("matvec", "rows_per_group"), few // N), nwg=N, mdimc=lanes, vw=1, gvw=run, use_local=True
    )
    while mv.mdimc > 32 and local_mem_bytes("matvec", dtype, mv) > device.local_mem:
        mv = mv.replace(mdimc=mv.mdimc // 2)
    if p.a_strides[2] == 1 or M == 1:
        why = f"N={N} <= {few}: a work-group of {lanes} per {mv.mr} rows, lanes along K"
        flags = fast_path(
            device.dialect, dtype, mv, M, N, K, p.batch, p.a[0], p.a_strides, p.b[0], p.b[1], kernel="matvec"
        )
        if flags["vec_a"]:
            why += f" in runs of {run} (matvec.run_bytes)"
        return _offer("matvec", p, Choice("matvec", mv, why))
    return _offer(
        "matvec", p, Choice("matvec", mv, f"N={N} <= {few}, A not row-major: packed to rows first", pack_a=True)
    )


def _vecmat(p: Problem) -> Candidate | Refusal:
    """A row vector times a matrix: ``vecmat`` streams B once, each work-item reading as many
    columns of a row as make ``vecmat.item_bytes`` (``vecmat.wide_item_bytes`` for a B of at
    least ``vecmat.wide_from_bytes``), in one vector load where the row allows; in one launch
    unless N gives too few work-groups, then K is split too (slices added in order), each slice
    deep enough for every team to fill its rows in flight once."""
    device, dtype, N, K, batch = p.device, p.dtype, p.N, p.K, p.batch
    if not (p.M == 1 and K >= 32):
        return Refusal("vecmat", f"M={p.M} > 1 or K={K} < 32")
    settings = settings_for(device)
    ndimc, mdimc, kwg, gvw = settings("vecmat", "geometry")
    wide = K * N * batch * dtype.itemsize >= settings("vecmat", "wide_from_bytes")  # a large B: 16-byte runs
    item = settings("vecmat", "wide_item_bytes" if wide else "item_bytes")
    gvw = max(gvw, item // dtype.itemsize)
    params = KernelParams(mr=1, nwg=ndimc * gvw, ndimc=ndimc, mdimc=mdimc, kwg=kwg, gvw=gvw, use_local=False)
    while params.mdimc > 1 and local_mem_bytes("vecmat", dtype, params) > device.local_mem:
        params = params.replace(mdimc=params.mdimc // 2)
    cus = device.compute_units
    groups = _cdiv(N, params.nwg) * batch
    splits = 1
    if batch == 1 and groups < settings("vecmat", "split_below") * cus:
        splits = max(1, min(_cdiv(cus, 2 * groups), K // (params.mdimc * kwg), 32))
    slices = f", {splits} slices of K added in order" if splits > 1 else ""
    why = f"M=1: B streamed once, {params.nwg} columns per work-group{slices}"
    return _offer("vecmat", p, Choice("vecmat", params, why, splits=splits))


def _row_strip(p: Problem) -> Candidate | Refusal:
    """A few rows: one pass over B in wide column panels, K split when the panels are too few to
    keep B's reads in flight: about 4 small work-groups per compute unit (1 x 4096 @ 4096 x 4096
    on the H100, kernels alone: 64.6 us in 4 slices, 38.4 in 8, 30.3 in 16, 36.0 in 32; cuBLAS
    25.2).  4 KiB of each operand's rows per K step (32 float32, 16 float64 values: float64 4 x
    4096 @ 4096 x 4096 on the H100, probe20: 122.6 -> 83.7 us with 16 instead of 32, cuBLAS 76.6)."""
    device, dtype, M, N, K = p.device, p.dtype, p.M, p.N, p.K
    strip_rows = settings_for(device)("row-strip", "most_rows")
    if not (M <= strip_rows and K >= 32 and p.batch == 1):
        return Refusal("row-strip", f"M={M} > row-strip.most_rows={strip_rows}, K={K} < 32 or a batch")
    strip = gpu_tile(device, dtype, 8, 128, max(8, min(32, 128 // value_itemsize(dtype))), 2, 32)
    groups = _cdiv(N, strip.nwg)
    splits = max(1, min(_cdiv(4 * device.compute_units, groups), K // 128, 32))
    why = f"M={M} <= {strip_rows}: row strip, B streamed in {strip.nwg}-column panels"
    return _packed_offer("row-strip", p, Choice("regblock", strip, why, splits=splits))


def _split_k(p: Problem) -> Candidate | Refusal:
    """Deep K on few tiles: two waves of work-groups over the compute units, slices at least 256
    deep, and at most ``split-k.slices_bytes`` of partial sums for the reduction to read back."""
    device, dtype, M, N, K = p.device, p.dtype, p.M, p.N, p.K
    settings = settings_for(device)
    deep_k = settings("split-k", "deep_k")
    if not (p.batch == 1 and K >= deep_k * max(M, N) and K >= settings("split-k", "min_k")):
        return Refusal("split-k", f"K={K} < split-k.deep_k={deep_k} x max(M, N), below split-k.min_k, or a batch")
    table = regblock_params(device, dtype)
    if min(M, N) >= min(table.mwg, table.nwg):
        tile = table
    elif max(M, N) > 32:
        tile = gpu_tile(device, dtype, 64, 64, 16, 8, 16)
    else:
        tile = gpu_tile(device, dtype, 16, 16, 16, 8, 8)
    groups = _cdiv(M, tile.mwg) * _cdiv(N, tile.nwg)
    most = max(2, settings("split-k", "slices_bytes") // (M * N * dtype.itemsize))
    splits = max(2, min(_cdiv(2 * device.compute_units, groups), K // 256, most, 256))
    splits = 1 << (splits.bit_length() - 1)  # a power of two, rounded down
    why = f"deep K={K} >= {deep_k} x max(M, N): {splits} slices of K, added in order"
    return _packed_offer("split-k", p, Choice("regblock", tile, why, splits=splits))


def _small_batched(p: Problem) -> Candidate | Refusal:
    """A batch of small matrices: one small work-group per matrix."""
    M, N, batch = p.M, p.N, p.batch
    if not (batch > 1 and max(M, N) <= 64):
        return Refusal("small-batched", f"batch {batch} of {M}x{N}: not a batch of matrices of 64 or fewer")
    edge = 16 if max(M, N) <= 16 else 32 if max(M, N) <= 32 else 64
    threads = 8 if edge <= 32 else 16
    tile = gpu_tile(p.device, p.dtype, edge, edge, 16, threads, threads)
    why = f"batch of {batch} small {M}x{N}: one {edge}x{edge} work-group per matrix"
    return _packed_offer("small-batched", p, Choice("regblock", tile, why))


def _tiles(p: Problem) -> Candidate:
    """The table's (large) tiles, or smaller ones while they leave compute units idle (a wave
    within ``tiles.full_wave`` of the device counts as full)."""
    device, dtype, M, N, K, batch = p.device, p.dtype, p.M, p.N, p.K, p.batch
    settings = settings_for(device)
    table = regblock_params(device, dtype)
    smaller = settings("tiles", "smaller")
    if value_itemsize(dtype) > 8:
        smaller = [*smaller[:-1], settings("tiles", "smallest_wide")]
    tiles = [table] + [
        gpu_tile(device, dtype, *shape) for shape in smaller if shape[0] * shape[1] < table.mwg * table.nwg
    ]
    for tile in tiles:
        groups = batch * _cdiv(M, tile.mwg) * _cdiv(N, tile.nwg)
        if wave_is_full(groups, device) or tile is tiles[-1]:
            break
    what = (
        "large tiles" if tile is table else f"{tile.mwg}x{tile.nwg} tiles to fill {device.compute_units} compute units"
    )
    what += f", {tile.kteams} teams splitting K" if tile.kteams > 1 else ""
    if K < tile.kwg:  # outer products: no K step of zeros (float64 2048 x 1 @ 1 x 2048: 15.7 -> 12.1 us)
        try:
            shape = (tile.mwg, tile.nwg, 1 << (K - 1).bit_length(), tile.mdimc, tile.ndimc, tile.kteams)
            tile = gpu_tile(device, dtype, *shape)
            what += f", K steps of {tile.kwg}"
        except AssertionError:  # no vector width fits so shallow a tile: keep the K step
            pass
    return _packed_offer("tiles", p, Choice("regblock", tile, f"{M}x{N}x{K}: {what} ({groups} work-groups)"))


def _packed_offer(family: str, p: Problem, choice: Choice) -> Candidate:
    narrowed = _gpu_packing(p.device, choice, p.dtype, p.M, p.N, p.K, p.batch, p.a_strides, p.b_strides)
    return _offer(family, p, narrowed)


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
    # Deep K: not enough blocks of C to share out; split K and add the slices in order. The
    # register block is the device database's (tuned for this CPU's vectors): the 4 x 8 block of
    # 256-bit vectors this path had made a 128 x 128 x 65536 float64 product 64 ms on the 2-core
    # AVX-512 Xeon's PoCL where the table's 8 x 16 of 512-bit vectors takes 29 (NumPy 26). Where
    # that block would compute a quarter or more of padding (M = N = 16 and its 12 x 32 float32
    # block: 3.6 ms against 0.6 for NumPy), the small block of 256-bit vectors serves.
    if batch == 1 and K >= settings("split-k", "deep_k") * max(M, N) and K >= settings("split-k", "min_k"):
        mr, nr, vw = params.mr, params.nr or 2 * params.vw, params.vw
        if M * N < 0.75 * (-(-M // mr) * mr) * (-(-N // nr) * nr):
            mr, nr, vw = (4 if M % 6 else 6), 2 * width, width
        deep = KernelParams(
            mwg=min(8 * mr, _bucket(M, mr)),
            nwg=min(8 * nr, _bucket(N, nr)),
            kwg=256,
            mdimc=1,
            ndimc=1,
            vw=vw,
            mr=mr,
            nr=nr,
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


def _cpu_blocks(p: Problem) -> Candidate:
    """The OpenCL CPU (PoCL) shapes: float32/float64 by shape (:func:`_cpu_choice`), scalar register
    blocks for the other dtypes."""
    params = regblock_params(p.device, p.dtype)
    if p.dtype.name not in _VECTOR:
        return _offer("cpu-blocks", p, Choice("regblock", params, f"CPU, {p.dtype.name}: scalar register blocks"))
    choice = _cpu_choice(p.device, p.dtype, p.M, p.N, p.K, p.batch, p.a_strides, p.b_strides, params)
    return _offer("cpu-blocks", p, choice)


# The order is the routine switch: on GPUs the first shared family that takes a product is the
# shared candidate (see the module's docstring).
for _family in (
    Family("matvec", "N at most matvec.most_columns: lanes along K, memory-bound", _matvec),
    Family("vecmat", "M = 1: B streamed once, K split when N gives few work-groups", _vecmat),
    Family("row-strip", "M at most row-strip.most_rows: B streamed in wide panels, K split", _row_strip),
    Family("split-k", "deep K (split-k.deep_k x max(M, N)): slices of K added in order", _split_k),
    Family("small-batched", "batches of matrices of 64 or fewer: a work-group per matrix", _small_batched),
    Family("tiles", "register-blocked tiles from the table, smaller ones to fill the device", _tiles),
    Family(
        "cpu-blocks", "CPU devices through OpenCL: blocks shaped for caches and wide vectors", _cpu_blocks, ("cpu",)
    ),
):
    register(_family)
