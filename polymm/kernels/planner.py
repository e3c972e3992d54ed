"""The one planner of the GPU (and OpenCL CPU) backends: which kernels a product runs, and why.

:func:`rank` asks every kernel family that serves the device (:mod:`polymm.kernels.families`:
the shared SIMT families of :mod:`polymm.kernels.simt`, a backend's own such as CUDA's tensor
cores) for a candidate, and orders the candidates by the one cost model
(:mod:`polymm.kernels.cost`); :func:`plan` turns the best into launches -- kernel, parameters
(the ``#define``s), fast-path flags, arguments packed by :mod:`polymm.kernels.abi`, NDRange,
local memory -- that a backend only has to compile, cache and enqueue, and keeps the ranking
(:attr:`Plan.ranking`) for ``polymm explain``.  Both the CUDA and the OpenCL backend call it
with their own :class:`DeviceInfo`.  complex128 may run as one float64 product on a backend
family's kernel, B realified (the ``realify`` family below).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import numpy as np

from ..precision import current as current_precision
from . import KernelParams, abi, fast_path, launch_geometry, local_mem_bytes, pack_params, realify_params
from .devices import recording, settings_for
from .families import Candidate, Choice, Family, Problem, Refusal, families_for, register
from .params import DeviceInfo, tiled_params
from .simt import wave_is_full

__all__ = ["Choice", "Launch", "Plan", "Ranking", "choose", "plan", "rank", "DeviceInfo", "wave_is_full"]


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
    #: The best candidate's kernels would run these operands once copied (:attr:`Candidate.relayout
    #: <polymm.kernels.families.Candidate.relayout>`): the launches are the shared kernels' for the
    #: operands as they lie; the backend may copy them and plan the copies instead.
    relayout: bool = False
    #: The families' candidates and refusals behind an ``auto`` plan (:class:`Ranking`), else None.
    ranking: object = None

    @property
    def product(self) -> Launch:
        """The (first) launch of the product kernel itself."""
        return next(x for x in self.launches if x.kernel == self.choice.kernel)

    @property
    def reason(self) -> str:
        return self.choice.reason


@dataclass(frozen=True)
class Ranking:
    """The families' answers for one product: ``candidates`` best first by the cost model's
    estimate, ``refusals`` with the rule each family's product broke; ``shared``: the candidate of
    the shared kernels (what runs the operands as they lie)."""

    problem: Problem
    candidates: tuple
    refusals: tuple
    shared: Candidate | None = None

    @property
    def best(self) -> Candidate:
        return self.candidates[0]


def preferred() -> tuple[str, ...]:
    """The families named in ``POLYMM_PREFER`` (comma-separated): wherever one offers a candidate
    it ranks first, whatever the estimates say.  The proof runs use it to send products the cost
    model would keep elsewhere (small ones) through a family's kernels."""
    return tuple(name.strip() for name in os.environ.get("POLYMM_PREFER", "").split(",") if name.strip())


def rank(problem: Problem) -> Ranking:
    """Every family's answer for ``problem``, the candidates ordered by estimated time (ties:
    the family registered first; :func:`preferred` families before all).  Of the shared families
    only the first that takes the product answers: the database's switch points divide the
    shapes between them."""
    offers, refusals = [], []
    shared = None
    for family in families_for(problem.device):
        if family.shared and shared is not None:
            continue
        offer = family.propose(problem)
        if isinstance(offer, Refusal):
            refusals.append(offer)
            continue
        offers.append(offer)
        if family.shared:
            shared = offer
    device, prefer = problem.device, preferred()
    if not offers:
        why = "; ".join(f"{r.family}: {r.reason}" for r in refusals) or "no family is registered for it"
        raise ValueError(f"no kernel family serves {device.name} ({device.kind}, {device.dialect}): {why}")
    ranked = sorted(offers, key=lambda c: (c.family not in prefer, c.work.seconds(device)))
    return Ranking(problem, tuple(ranked), tuple(refusals), shared)


def choose(device: DeviceInfo, algorithm: str, dtype, M, N, K, batch=1, a_strides=None, b_strides=None) -> Choice:
    """The shared kernels' :class:`Choice` for ``algorithm`` (``auto``, ``naive``, ``tiled``...) on
    ``device`` (:func:`plan` also weighs the backend's own families).

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
    problem = Problem(device, dtype, (batch, M, N, K), (0, a_strides), (0, b_strides), current_precision())
    return rank(problem).shared.choice


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
    made.settings = tuple(read.values())
    return made


def _plan(device, dtype, shape, a, b, c_off, algorithm, choice) -> Plan:
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    batch, M, N, K = shape
    A = (0, a[0], *a[1])
    B = (1, b[0], *b[1])
    ranking = None
    if choice is None and algorithm == "auto":
        ranking = rank(Problem(device, dtype, shape, a, b, current_precision()))
        best = ranking.best
        if best.build is not None:
            made = best.build(c_off)
            made.ranking = ranking
            return made
        choice = (ranking.shared if best.relayout else best).choice
    elif choice is None:
        choice = choose(device, algorithm, dtype, M, N, K, batch, A[2:], B[2:])
    out = Plan(choice, dtype=dtype, relayout=ranking is not None and ranking.best.relayout, ranking=ranking)

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
        into = ext.get("into")  # a workspace the kernel writes, which its ``after`` launches turn into C

        def external(A, B, c_slot, c_off, count, depth):
            if into is not None:
                c_slot, c_off = into, 0
            more = {"batch": count, **ext.get("values", {})}
            args = abi.gemm_arguments(M, N, depth, A[1:], B[1:], c_off, signature, **more)
            grid = ext["grid"] if choice.splits <= 1 else (*ext["grid"][:2], count)
            glob = tuple(g * b for g, b in zip(grid, ext["block"]))
            buffers = {ext_pos["A"]: A[0], ext_pos["B"]: B[0], ext_pos["C"]: c_slot}
            launch = Launch(choice.kernel, None, {}, args, buffers, glob, tuple(ext["block"]), ext["smem"], dtype, ext)
            out.launches.extend(_split_batch(launch, device.max_batch))

        # what the kernel reads: the operands, or scratch made before (``depth``: its own K there)
        products(external, *ext.get("operands", (A, B)), ext.get("depth", K), ext.get("k_step", 1))
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
        tile = pack_params(device.is_cpu, rp)
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
                dialect, dtype, params, M, N, depth, count, A[1], A[2:], B[1], B[2:], kernel=kernel, padded=padded,
                real_b=choice.real_b,
            )  # fmt: skip
            if choice.real_b:
                flags["real_b"] = True
        args = abi.gemm_arguments(M, N, depth, A[1:], B[1:], c_off)
        dynamic = local_mem_bytes(kernel, dtype, params) if kernel == "tiled-dynamic" else 0
        buffers = {gemm_pos["A"]: A[0], gemm_pos["B"]: B[0], gemm_pos["C"]: c_slot}
        add(kernel, params, flags, args, buffers, M, N, count, dynamic)

    products(product, A, B, K, max(params.kwg if params and params.use_local else 1, g))
    return out


#: Complex dtypes that may run as one real product (``kernels/realify.c``) on a backend family's
#: kernel (CUDA: complex128 on the FP64 tensor cores), or on the shared SIMT kernels where the
#: database's ``realify.simt`` lists the dtype (NVIDIA GPUs: complex64 as float32, whose tiles run
#: faster than the complex ones; Intel's CPU OpenCL runtime: both, on the table's vector tiles
#: instead of scalar complex blocks), from ``realify.work`` multiply-adds on.
REAL_OF = {"complex128": "float64", "complex64": "float32"}


def _realify(p: Problem) -> Candidate | Refusal:
    """A complex product as one real product, when a backend family (or, for the dtypes of
    ``realify.simt``, the shared SIMT kernels) runs that: A read in place as M x 2K reals where
    its K axis is contiguous, else first packed so by ``pack`` (scratch slot 4: a transposed view
    would otherwise leave the product on the complex kernels at a fraction of their speed), B
    written by ``realify`` as 2K x 2N reals (scratch slot 3), C written as M x 2N reals.  Offsets
    count from a base aligned to the complex item (as every complex kernel assumes)."""
    device, dtype = p.device, p.dtype
    if dtype.name not in REAL_OF:
        return Refusal("realify", f"{dtype.name} is not complex")
    bt, M, N, K = p.shape
    (a_off, sa), (b_off, sb) = p.a, p.b
    settings = settings_for(device)
    work = settings("realify", "work")
    if M * N * K < work:
        return Refusal("realify", f"fewer than realify.work = {work} multiply-adds")
    real = np.dtype(REAL_OF[dtype.name])
    copies = bt if sb[0] else 1
    a_copies = (bt if sa[0] else 1) if sa[2] != 1 else 0  # A packed K-contiguous first
    most = settings("realify", "most_bytes")
    if copies * 4 * K * N * real.itemsize > most:
        return Refusal("realify", f"B realified would take more than realify.most_bytes = {most}")
    rshape = (bt, M, 2 * N, 2 * K)
    ra = (2 * a_off, (2 * sa[0], 2 * sa[1], 1)) if not a_copies else (0, (2 * M * K if a_copies > 1 else 0, 2 * K, 1))
    rb = (0, (4 * K * N if copies > 1 else 0, 2 * N, 1))
    rp = p.replace(dtype=real, shape=rshape, a=ra, b=rb)
    offers = [family.propose(rp) for family in families_for(device) if not family.shared]
    shared = rank(rp).shared if dtype.name in settings("realify", "simt") else None
    if shared is not None:
        offers.append(shared)
    inner = [
        offer
        for offer in offers
        if isinstance(offer, Candidate)
        and offer.build is None
        and not offer.relayout
        and (offer.choice.external is None or "tma" not in offer.choice.external)  # maps would name slot 1
    ]
    if not inner:
        return Refusal("realify", f"no backend family runs the {real.name} product")
    best = min(inner, key=lambda c: c.work.seconds(device))
    # The shared GPU tiles read a B whose rows are contiguous in place, as reals (no realify)
    c = best.choice
    rb_in_place = (2 * b_off, (2 * sb[0], sb[1], 1))  # B's reals, its K stride in complex items (regblock.c)
    in_place = settings("realify", "in_place") and best is shared and c.kernel == "regblock"
    in_place = in_place and c.params.use_local and c.params.kwg % 2 == 0
    in_place = in_place and sb[2] == 1 and not (c.pack_a or c.pack_b or c.swap or c.external)
    if in_place:  # where both read B with vectors, as the product of the realified B would
        vectors = [
            fast_path(device.dialect, real, c.params, M, 2 * N, 2 * K, bt, *ra, *b, real_b=real_b)
            for b, real_b in ((rb, False), (rb_in_place, True))
        ]
        in_place = vectors[0] == vectors[1] and vectors[0]["vec_b"]
    scratch = 0 if in_place else copies * 4 * K * N * real.itemsize
    packed = a_copies * M * K * dtype.itemsize
    how = "B read as reals in place" if in_place else "B realified"
    how = f"A packed K-contiguous, {how}" if a_copies else how
    why = f"{dtype.name} as one {real.name} product ({M} x {2 * K} @ {2 * K} x {2 * N}, {how}): "
    choice = best.choice.replace(reason=why + best.choice.reason)

    def build(c_off: int) -> Plan:
        if in_place:
            made = plan(device, real, rshape, ra, rb_in_place, 2 * c_off, choice=c.replace(real_b=True))
        else:
            made = plan(device, real, rshape, ra, rb, 2 * c_off, choice=c)
        # B is now realify's output, unless read in place (and A pack's, where packed); the inner
        # plan's scratch moves up past theirs
        moved = {} if in_place else {1: 3}
        moved.update({0: 3 + (not in_place)} if a_copies else {})
        up = (not in_place) + bool(a_copies)
        for launch in made.launches:
            launch.buffers = {pos: moved.get(s, s + up if s >= 3 else s) for pos, s in launch.buffers.items()}
        before = []
        if a_copies:
            args = abi.arguments(
                "pack", R=M, NC=K, RP=M, LD=K, s_off=a_off, s_sb=sa[0], s_sr=sa[1], s_sc=sa[2], d_off=0
            )
            pos = abi.buffer_positions("pack")
            tile = pack_params(device.is_cpu, M)
            glob, local = launch_geometry("pack", tile, M, K, a_copies)
            pack_a = Launch("pack", tile, {}, args, {pos["src"]: 0, pos["dst"]: moved[0]}, glob, local, 0, dtype)
            before = _split_batch(pack_a, device.max_batch)
        if in_place:
            return Plan(choice, [*before, *made.launches], [*([packed] if a_copies else []), *made.scratch], dtype=real)
        args = abi.arguments(
            "realify", K=K, N=N, s_off=2 * b_off, s_sb=2 * sb[0], s_sk=2 * sb[1], s_sn=2 * sb[2], d_off=0
        )
        pos = abi.buffer_positions("realify")
        params = realify_params(K)
        glob, local = launch_geometry("realify", params, K, N, copies)
        expand = Launch("realify", params, {}, args, {pos["src"]: 1, pos["dst"]: 3}, glob, local, 0, real)
        return Plan(
            choice,
            launches=[*before, *_split_batch(expand, device.max_batch), *made.launches],
            scratch=[scratch, *([packed] if a_copies else []), *made.scratch],
            dtype=real,
        )

    work = dataclasses.replace(
        best.work,
        launches=best.work.launches + (not in_place) + bool(a_copies),
        bytes=best.work.bytes + scratch * 3 / 2 + 2 * packed,
    )
    return Candidate("realify", choice, work, build=build)


register(
    Family(
        "realify", "a complex product as one real product (B realified first)", _realify, ("gpu", "cpu"), shared=False
    )
)


def _cdiv(a, b):
    return -(-a // b)


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
