"""Numba kernels of the CPU backend.

Every kernel computes ``out[b] = a[b] @ b[b]`` for 3-D operands: ``a`` and
``b`` may have any strides (0 and negative included), ``out`` is
C-contiguous.  All kernels share two tiny dtype-generic helpers,
:func:`_zero` and :func:`_mac`, so one source serves every dtype:

* integers accumulate in int64/uint64 (same signedness, so Numba never mixes
  them into float64) and are cast on store, which wraps exactly like NumPy;
* bool accumulates ``acc | (x & y)`` (NumPy's bool matmul is an any-of-ands);
* floats and complex accumulate in their own type, with FMA contraction the
  only fast-math liberty (no reassociation, NaN/Inf propagate, no zero
  skipping).

The ``"auto"`` kernel is specialised per register micro-tile (MR x NR): the
functions below read ``MR``/``NR`` as globals, which Numba freezes at compile
time, and :func:`specialise` makes copies of them with their own globals and
their own name (hence their own on-disk cache entries).  Its micro-kernel for
real, integer and bool dtypes is :func:`_micro_regs`, written as LLVM IR with
explicit vectors (accumulators in registers); complex uses :func:`_micro`.
"""

from __future__ import annotations

import types as _pytypes

import numba
import numpy as np
from numba import prange, types
from llvmlite import ir
from numba.core import compiler
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload

from .native_call import call_native

FASTMATH = {"contract"}
JIT = dict(cache=True, fastmath=FASTMATH, nogil=True)

# Placeholders: replaced in each specialised copy (see ``specialise``).
MR = 8
NR = 32


# --------------------------------------------------------------------------
# dtype-generic helpers


def _zero(x):
    """Typed additive identity of the accumulator for values like ``x``."""


def _mac(acc, x, y):
    """``acc + x*y`` in the accumulator type (``acc | (x & y)`` for bool)."""


@overload(_zero)
def _ol_zero(x):
    if isinstance(x, types.Boolean):
        return lambda x: False
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.int64(0)
        return lambda x: np.uint64(0)
    if isinstance(x, types.Float):
        if x.bitwidth == 32:
            return lambda x: np.float32(0.0)
        return lambda x: np.float64(0.0)
    if isinstance(x, types.Complex):
        if x.bitwidth == 64:
            return lambda x: np.complex64(0.0)
        return lambda x: np.complex128(0.0)
    return None


@overload(_mac)
def _ol_mac(acc, x, y):
    if isinstance(x, types.Boolean):
        return lambda acc, x, y: acc | (x & y)
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda acc, x, y: np.int64(acc) + np.int64(x) * np.int64(y)
        return lambda acc, x, y: np.uint64(acc) + np.uint64(x) * np.uint64(y)
    return lambda acc, x, y: acc + x * y


# --------------------------------------------------------------------------
# naive: the textbook triple loop, one output element at a time


@numba.njit(**JIT)
def _naive_row(a, b, out, bi, i):
    K = a.shape[2]
    N = b.shape[2]
    for j in range(N):
        acc = _zero(a[0, 0, 0])
        for p in range(K):
            acc = _mac(acc, a[bi, i, p], b[bi, p, j])
        out[bi, i, j] = acc


def naive_serial(a, b, out):
    """Textbook loop on one thread: the path for tiny products (no launch cost)."""
    for bi in range(a.shape[0]):
        for i in range(a.shape[1]):
            _naive_row(a, b, out, bi, i)


def naive_parallel(a, b, out):
    """Textbook loop, rows of every batch shared among threads."""
    M = a.shape[1]
    for t in prange(a.shape[0] * M):
        _naive_row(a, b, out, t // M, t % M)


# --------------------------------------------------------------------------
# tiled: blocks of A and B copied into small contiguous tiles (the CPU
# counterpart of the GPU kernel's shared-memory tiles), reused from cache


def _tile(a, b, out, t, tm, tn, tk, _unused1, _unused2, _unused3, _unused4):
    """Output tile ``t`` (``tm`` x ``tn``; each product's tiles in row-major order, the products one
    after another): slices of A and B (``tk`` deep) copied into small local arrays, the tile's
    sums in a third. A task of :func:`tasks_parallel` (its body, called by
    address: compiled inside the parallel loop's body it was built twice more, 1.1 s of a cold
    start); the last four parameters are the driver's and unused here."""
    M = a.shape[1]
    N = b.shape[2]
    K = a.shape[2]
    nbn = (N + tn - 1) // tn
    per = ((M + tm - 1) // tm) * nbn
    bi = t // per
    r = t - bi * per
    i0 = (r // nbn) * tm
    j0 = (r - (r // nbn) * nbn) * tn
    mb = min(tm, M - i0)
    nb = min(tn, N - j0)
    at = np.empty((mb, tk), a.dtype)
    bt = np.empty((tk, nb), b.dtype)
    acc = np.empty((mb, nb), out.dtype)
    z = _zero(a[0, 0, 0])
    for ii in range(mb):
        for jj in range(nb):
            acc[ii, jj] = z
    for p0 in range(0, K, tk):
        kb = min(tk, K - p0)
        for ii in range(mb):
            for pp in range(kb):
                at[ii, pp] = a[bi, i0 + ii, p0 + pp]
        for pp in range(kb):
            for jj in range(nb):
                bt[pp, jj] = b[bi, p0 + pp, j0 + jj]
        for ii in range(mb):
            for pp in range(kb):
                av = at[ii, pp]
                for jj in range(nb):
                    acc[ii, jj] = _mac(acc[ii, jj], av, bt[pp, jj])
    for ii in range(mb):
        for jj in range(nb):
            out[bi, i0 + ii, j0 + jj] = acc[ii, jj]


def tasks_parallel(a, b, out, ntasks, p1, p2, p3, p4, p5, p6, p7, body):
    """``body(a, b, out, t, p1, ..., p7)`` for every task ``t < ntasks``, shared among threads: the
    one parallel driver (compiled once per dtype) of the bodies that take a task number, called
    by address: the packed kernel's batch entries (``auto_batch``) and the tiled kernel's tiles.
    A parallel loop costs a third of a second to compile; one driver for both spares the second."""
    for t in prange(ntasks):
        call_native(body, (a, b, out, np.int64(t), p1, p2, p3, p4, p5, p6, p7))


# --------------------------------------------------------------------------
# auto: packed panels + register-blocked micro-kernel (GotoBLAS/BLIS shape)


class _NoAliasCompiler(compiler.Compiler):
    """Compile with ``noalias`` on array arguments.

    The micro-kernel's operands never overlap (two packed buffers and a
    private accumulator); telling LLVM so lets it keep the accumulator tile
    in vector registers' reach instead of re-checking memory dependences.
    """

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        flags.noalias = True
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)


def _micro(ap, bp, acc, kc):
    # ap: kc x MR (k-major), bp: kc x NR (k-major), acc: MR x NR.  Constant
    # MR/NR: LLVM unrolls i and j and vectorises j (vfmadd...ps zmm).
    # A plain ``+=`` (not _mac) keeps the body visible to the vectoriser; it
    # is exact for every dtype here: integer sums are truncated on store
    # (wrap-around), and bool is re-normalised on store (acc+x*y != 0).
    for p in range(kc):
        for i in range(MR):
            ai = ap[p * MR + i]
            for j in range(NR):
                acc[i, j] += ai * bp[p * NR + j]


def _column_into_panels(col, ap, p, kb, z):
    """Column ``p`` of an A block (``col``, its ``mb`` rows) into the MR-tall k-major panels of
    ``ap``, the last panel's missing rows zero."""
    mb = col.shape[0]
    full = mb - mb % MR
    for ip in range(0, full, MR):
        for r in range(MR):
            ap[ip * kb + p * MR + r] = col[ip + r]
    if full < mb:
        for r in range(MR):
            ap[full * kb + p * MR + r] = col[full + r] if full + r < mb else z


def _pack_a(a, bi, i0, mb, p0, kb, ap):
    """Rows i0..i0+mb of A (columns p0..p0+kb) as MR-tall k-major panels, zero-padded."""
    z = _zero(a[0, 0, 0])
    along_k = abs(a.strides[2]) <= abs(a.strides[1])  # read A in memory order
    if not along_k:
        # A runs down its columns: each K step reads the block's whole column, one run, into
        # every panel (panel by panel, a K step read MR values of a cache line and the block's
        # kb lines did not stay in L1 until the next panel needed the rest of them)
        for p in range(kb):
            if a.strides[1] == a.itemsize:  # typed so: the column's loads vectorise
                _column_into_panels(_unit(a[bi, i0 : i0 + mb, p0 + p]), ap, p, kb, z)
            else:
                _column_into_panels(a[bi, i0 : i0 + mb, p0 + p], ap, p, kb, z)
        return
    for ip in range(0, mb, MR):
        base = ip * kb
        rows = min(MR, mb - ip)
        if a.strides[2] == a.itemsize:
            # unit stride along K: each row a contiguous run, typed so
            if rows == MR:
                # MR rows side by side: one contiguous store of MR per K step
                for p in range(kb):
                    for r in range(MR):
                        ap[base + p * MR + r] = a[bi, i0 + ip + r, p0 + p]
            else:
                for r in range(rows):
                    src = _unit(a[bi, i0 + ip + r, p0 : p0 + kb])
                    for p in range(kb):
                        ap[base + p * MR + r] = src[p]
        else:
            for r in range(rows):
                for p in range(kb):
                    ap[base + p * MR + r] = a[bi, i0 + ip + r, p0 + p]
        for p in range(kb):
            for r in range(rows, MR):
                ap[base + p * MR + r] = z


def _column_into_panel(col, bp, q, c):
    """K steps ``q..`` of column ``c`` of a B panel (``col``) into the k-major panel ``bp``."""
    for p in range(col.shape[0]):
        bp[(q + p) * NR + c] = col[p]


def _pack_b(b, bi, p0, kb, j0, cols, bp):
    """One NR-wide k-major panel of B (columns j0..j0+cols), zero-padded."""
    z = _zero(b[0, 0, 0])
    if b.strides[2] == b.itemsize and abs(b.strides[1]) >= abs(b.strides[2]):
        # rows of B unit-stride: each K step one contiguous run of the panel
        if cols == NR:
            for p in range(kb):
                src = _unit(b[bi, p0 + p, j0 : j0 + NR])
                for c in range(NR):
                    bp[p * NR + c] = src[c]
        else:
            for p in range(kb):
                src = _unit(b[bi, p0 + p, j0 : j0 + cols])
                for c in range(cols):
                    bp[p * NR + c] = src[c]
    elif abs(b.strides[1]) < abs(b.strides[2]):
        # B runs down its columns: read in memory order, 16 K steps at a time, so that the
        # panel's rows being written stay in L1 while every column passes through them
        for q in range(0, kb, 16):
            qe = min(kb, q + 16)
            for c in range(cols):
                if b.strides[1] == b.itemsize:  # typed so: the column's loads vectorise
                    _column_into_panel(_unit(b[bi, p0 + q : p0 + qe, j0 + c]), bp, q, c)
                else:
                    _column_into_panel(b[bi, p0 + q : p0 + qe, j0 + c], bp, q, c)
    else:
        for p in range(kb):
            for c in range(cols):
                bp[p * NR + c] = b[bi, p0 + p, j0 + c]
    for p in range(kb):
        for c in range(cols, NR):
            bp[p * NR + c] = z


def _block(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp, direct):
    """out[i0:i0+mb, panels jp_lo..jp_hi of the j0 block] (+)= A-block @ packed B (``direct``:
    see :func:`_block_regs`; this portable version always packs A)."""
    ap = np.empty(((mb + MR - 1) // MR) * MR * kb, a.dtype)
    _pack_a(a, bi, i0, mb, p0, kb, ap)
    acc = np.empty((MR, NR), out.dtype)
    z = _zero(a[0, 0, 0])
    for jp in range(jp_lo, jp_hi):
        jj = jp * NR
        cols = min(NR, nb - jj)
        bpan = bp[jj * kb : (jj + NR) * kb]
        for ip in range(0, mb, MR):
            rows = min(MR, mb - ip)
            r0 = i0 + ip
            c0 = j0 + jj
            if rows == MR and cols == NR:
                # full tile: constant bounds, so the copies vectorise too
                if p0 == 0:
                    for r in range(MR):
                        for c in range(NR):
                            acc[r, c] = z
                else:
                    # continue the running sums: same rounding as one K loop
                    for r in range(MR):
                        for c in range(NR):
                            acc[r, c] = out[bi, r0 + r, c0 + c]
                _micro(ap[ip * kb : (ip + MR) * kb], bpan, acc, kb)
                for r in range(MR):
                    for c in range(NR):
                        out[bi, r0 + r, c0 + c] = acc[r, c]
            else:
                for r in range(MR):
                    for c in range(NR):
                        acc[r, c] = z
                if p0 != 0:
                    for r in range(rows):
                        for c in range(cols):
                            acc[r, c] = out[bi, r0 + r, c0 + c]
                _micro(ap[ip * kb : (ip + MR) * kb], bpan, acc, kb)
                for r in range(rows):
                    for c in range(cols):
                        out[bi, r0 + r, c0 + c] = acc[r, c]


def _ir_mac(builder, dt):
    """``acc + x*y`` on LLVM vectors of ``dt`` (FMA contraction allowed), ``acc | (x & y)`` for bool."""
    if isinstance(dt, types.Float):
        return lambda acc, x, y: builder.fadd(acc, builder.fmul(x, y, flags=("contract",)), flags=("contract",))
    if isinstance(dt, types.Integer):
        return lambda acc, x, y: builder.add(acc, builder.mul(x, y))
    return lambda acc, x, y: builder.or_(acc, builder.and_(x, y))


def _ir_vectors(context, dt, nr, vbytes):
    """``(vw, nv, vty)``: a row of ``nr`` elements of ``dt`` as ``nv`` LLVM vectors of ``vw``
    (at most ``vbytes`` bytes each, ``vw`` dividing ``nr``)."""
    ety = context.get_data_type(dt)
    vw = max(1, min(nr, vbytes // context.get_abi_sizeof(ety)))
    while nr % vw:
        vw //= 2
    return vw, nr // vw, ir.VectorType(ety, vw)


def _ir_k_loop(builder, dt, vty, nmr, init, kc, a_ptr, aoff, sai, sap, b_ptr, b_row, name, masks=None):
    """The register tile's loop over K, shared by the intrinsics below: for p in [0, kc), row p
    of B (from element ``b_row(p)`` of ``b_ptr``, unaligned) as vectors, and for each of the
    ``nmr`` rows one element of A (``aoff + i * sai + p * sap``) broadcast and multiplied into
    that row's accumulators (``_ir_mac``: sums in K order). ``init``: the ``nmr * nv``
    accumulators before the loop, row by row; returns them after it (``init`` where kc <= 0),
    with the builder positioned after the loop. ``masks``: per vector of the row, the lanes of
    B to read (``_ir_lanes``; the others read as 0 and are never touched), or None for all."""
    nv = len(init) // nmr
    vw = vty.count
    i64, i32 = ir.IntType(64), ir.IntType(32)
    mac = _ir_mac(builder, dt)
    pre = builder.block
    loop = builder.append_basic_block(f"{name}.loop")
    done = builder.append_basic_block(f"{name}.done")
    builder.cbranch(builder.icmp_signed(">", kc, ir.Constant(i64, 0)), loop, done)

    builder.position_at_end(loop)
    p = builder.phi(i64)
    p.add_incoming(ir.Constant(i64, 0), pre)
    phis = []
    for x in init:
        ph = builder.phi(vty)
        ph.add_incoming(x, pre)
        phis.append(ph)
    row = b_row(p)
    bptrs = [
        builder.bitcast(builder.gep(b_ptr, [builder.add(row, ir.Constant(i64, v * vw))]), vty.as_pointer())
        for v in range(nv)
    ]
    if masks is None:
        bvec = [builder.load(ptr, align=1) for ptr in bptrs]
    else:
        bvec = [_ir_masked_load(builder, ptr, mask) for ptr, mask in zip(bptrs, masks)]
    undef = ir.Constant(vty, ir.Undefined)
    bcast = ir.Constant(ir.VectorType(i32, vw), [0] * vw)
    a_col = builder.add(aoff, builder.mul(p, sap))
    new = []
    for i in range(nmr):
        x = builder.load(builder.gep(a_ptr, [builder.add(a_col, builder.mul(ir.Constant(i64, i), sai))]))
        xv = builder.shuffle_vector(builder.insert_element(undef, x, ir.Constant(i32, 0)), undef, bcast)
        for v in range(nv):
            new.append(mac(phis[i * nv + v], xv, bvec[v]))
    pn = builder.add(p, ir.Constant(i64, 1))
    last = builder.block
    p.add_incoming(pn, last)
    for ph, x in zip(phis, new):
        ph.add_incoming(x, last)
    builder.cbranch(builder.icmp_signed("<", pn, kc), loop, done)

    builder.position_at_end(done)
    res = []
    for x0, x in zip(init, new):
        ph = builder.phi(vty)
        ph.add_incoming(x0, pre)
        ph.add_incoming(x, last)
        res.append(ph)
    return res


def _ir_lanes(builder, vty, count, first):
    """The mask of lanes ``first + lane < count`` of a vector of type ``vty`` (``count`` an i64)."""
    i64 = ir.IntType(64)
    vw = vty.count
    lanes = ir.Constant(ir.VectorType(i64, vw), [first + q for q in range(vw)])
    undef = ir.Constant(ir.VectorType(i64, vw), ir.Undefined)
    splat = builder.shuffle_vector(
        builder.insert_element(undef, count, ir.Constant(ir.IntType(32), 0)),
        undef,
        ir.Constant(ir.VectorType(ir.IntType(32), vw), [0] * vw),
    )
    return builder.icmp_signed("<", lanes, splat)


def _ir_masked(builder, vty, op):
    """LLVM's ``llvm.masked.load`` / ``llvm.masked.store`` for vectors of ``vty`` (float32 and
    float64: AVX-512 masks them natively, AVX2 with ``vmaskmov``; lanes masked off are not
    accessed, so a tile may end where the array does)."""
    suffix = f"v{vty.count}{'f32' if isinstance(vty.element, ir.FloatType) else 'f64'}.p0"
    name = f"llvm.masked.{op}.{suffix}"
    module = builder.module
    if name in module.globals:
        return module.globals[name]
    i32, mty = ir.IntType(32), ir.VectorType(ir.IntType(1), vty.count)
    if op == "load":
        fnty = ir.FunctionType(vty, [vty.as_pointer(), i32, mty, vty])
    else:
        fnty = ir.FunctionType(ir.VoidType(), [vty, vty.as_pointer(), i32, mty])
    return ir.Function(module, fnty, name=name)


def _ir_masked_load(builder, ptr, mask):
    vty = ptr.type.pointee
    return builder.call(
        _ir_masked(builder, vty, "load"), [ptr, ir.Constant(ir.IntType(32), 1), mask, ir.Constant(vty, None)]
    )


def _ir_masked_store(builder, value, ptr, mask):
    builder.call(_ir_masked(builder, value.type, "store"), [value, ptr, ir.Constant(ir.IntType(32), 1), mask])


@intrinsic
def _micro_regs(typingctx, ap, aoff, sai, sap, bp, c, coff, ldc, kc, load, mr, nr):
    """``C[0:mr, 0:nr] (+)= A @ Bp`` with the accumulators in vector registers.

    Element ``(i, p)`` of A is element ``aoff + i * sai + p * sap`` of ``ap``'s buffer: a packed
    panel (0, 1, ``mr``) or rows of the operand itself (its strides in elements).

    ``C`` starts at element ``coff`` of ``c``'s buffer with row stride ``ldc``
    (elements); it is read first when ``load`` is true, else taken as zero.
    Generated as LLVM IR with explicit vector types (one 512-bit vector per
    ``64 // itemsize`` columns; LLVM splits them on AVX2): Numba's own
    pipeline would keep the accumulator tile in memory.  Floats use
    ``fmul``/``fadd`` with only the ``contract`` flag (FMA, no reassociation);
    integers use wrapping ``mul``/``add`` in their own width (exact modulo
    2**bits, as NumPy); bool uses ``and``/``or``.  Not for complex.
    """
    if not (isinstance(mr, types.IntegerLiteral) and isinstance(nr, types.IntegerLiteral)):
        return None
    dt = ap.dtype
    if not isinstance(dt, (types.Float, types.Integer, types.Boolean)):
        return None
    nmr, nnr = mr.literal_value, nr.literal_value
    sig = types.void(ap, aoff, sai, sap, bp, c, coff, ldc, kc, load, mr, nr)

    def codegen(context, builder, signature, args):
        apv, bpv, cv = args[0], args[4], args[5]
        vw, nv, vty = _ir_vectors(context, dt, nnr, 64)  # 512-bit vectors: LLVM splits them on AVX2
        i64 = ir.IntType(64)

        def k64(x):
            return ir.Constant(i64, x)

        a_ptr = context.make_array(ap)(context, builder, apv).data
        b_ptr = context.make_array(bp)(context, builder, bpv).data
        c_ptr = context.make_array(c)(context, builder, cv).data
        aoffv, saiv, sapv = (context.cast(builder, v, t, types.int64) for v, t in zip(args[1:4], signature.args[1:4]))
        coffv, ldcv, kcv = (context.cast(builder, args[n], signature.args[n], types.int64) for n in (6, 7, 8))
        loadv = context.cast(builder, args[9], signature.args[9], types.boolean)

        def cptr(i, v):
            idx = builder.add(coffv, builder.add(builder.mul(k64(i), ldcv), k64(v * vw)))
            return builder.bitcast(builder.gep(c_ptr, [idx]), vty.as_pointer())

        zero = ir.Constant(vty, None)
        init = [builder.select(loadv, builder.load(cptr(i, v), align=1), zero) for i in range(nmr) for v in range(nv)]
        res = _ir_k_loop(
            builder,
            dt,
            vty,
            nmr,
            init,
            kcv,
            a_ptr,
            aoffv,
            saiv,
            sapv,
            b_ptr,
            lambda p: builder.mul(p, k64(nnr)),
            "micro",
        )
        for k, x in enumerate(res):
            builder.store(x, cptr(*divmod(k, nv)), align=1)
        return context.get_dummy_value()

    return sig, codegen


def _block_regs(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp, direct):
    """As :func:`_block`, with the register micro-kernel working on ``out`` in place.

    ``direct``: read A's rows where they lie, one MR-row panel against every packed panel of B
    in turn (B's block stays in L2, the panel's rows in L1), instead of packing the A block
    first: for few columns and a long K (split-K chunks) packing A costs as much as a quarter
    of the multiply-adds. Needs A unit-stride along K; a last panel of fewer rows is packed.
    Rows a multiple of 4 KiB apart all fall in one set of the L1 cache (indexed by the low 12
    bits of the address on x86), which holds 8 to 12 lines: taller panels are then packed.
    Callers that never read A in place pass ``None``, which Numba resolves at compile time."""
    M = out.shape[1]
    N = out.shape[2]
    isz = a.itemsize
    if direct is not None:  # None: Numba prunes this branch, and with it _block_direct's compile (seconds)
        apart = MR <= 8 or a.strides[1] % 4096 != 0  # the panel's rows in distinct L1 sets
        if direct and apart and a.strides[2] == isz and a.strides[1] % isz == 0 and a.strides[0] % isz == 0:
            _block_direct(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp)
            return
    ap = np.empty(((mb + MR - 1) // MR) * MR * kb, a.dtype)
    _pack_a(a, bi, i0, mb, p0, kb, ap)
    acc = np.zeros((MR, NR), out.dtype)
    load = p0 != 0  # continue the running sums: same rounding as one K loop
    for jp in range(jp_lo, jp_hi):
        jj = jp * NR
        cols = min(NR, nb - jj)
        bpan = bp[jj * kb : (jj + NR) * kb]
        for ip in range(0, mb, MR):
            rows = min(MR, mb - ip)
            r0 = i0 + ip
            c0 = j0 + jj
            apan = ap[ip * kb : (ip + MR) * kb]
            if rows == MR and cols == NR:
                _micro_regs(apan, 0, 1, MR, bpan, out, (bi * M + r0) * N + c0, N, kb, load, MR, NR)
            else:  # edge tile: through a private MR x NR buffer
                if load:
                    for r in range(rows):
                        for c in range(cols):
                            acc[r, c] = out[bi, r0 + r, c0 + c]
                _micro_regs(apan, 0, 1, MR, bpan, acc, 0, NR, kb, load, MR, NR)
                for r in range(rows):
                    for c in range(cols):
                        out[bi, r0 + r, c0 + c] = acc[r, c]


def _block_direct(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp):
    """:func:`_block_regs` with A read in place (row panel outer, B panels inner)."""
    isz = a.itemsize
    sai = a.strides[1] // isz
    acc = np.zeros((MR, NR), out.dtype)
    for ip in range(0, mb, MR):
        rows = min(MR, mb - ip)
        r0 = i0 + ip
        if rows == MR:  # element (r0, p0) of product bi, counted from A's first element
            aoff = bi * (a.strides[0] // isz) + r0 * sai + p0
            _panel_direct(a, aoff, sai, 1, rows, out, bi, r0, j0, nb, jp_lo, jp_hi, p0, kb, bp, acc)
        else:
            edge = np.empty(MR * kb, a.dtype)
            _pack_a(a, bi, r0, rows, p0, kb, edge)
            _panel_direct(edge, 0, 1, MR, rows, out, bi, r0, j0, nb, jp_lo, jp_hi, p0, kb, bp, acc)


def _panel_direct(src, aoff, sai, sap, rows, out, bi, r0, j0, nb, jp_lo, jp_hi, p0, kb, bp, acc):
    """One MR-row panel of A (element (i, p) at ``src[aoff + i*sai + p*sap]``) against packed
    panels ``jp_lo..jp_hi`` of B."""
    M = out.shape[1]
    N = out.shape[2]
    load = p0 != 0
    for jp in range(jp_lo, jp_hi):
        jj = jp * NR
        cols = min(NR, nb - jj)
        c0 = j0 + jj
        bpan = bp[jj * kb : (jj + NR) * kb]
        if rows == MR and cols == NR:
            _micro_regs(src, aoff, sai, sap, bpan, out, (bi * M + r0) * N + c0, N, kb, load, MR, NR)
        else:
            if load:
                for r in range(rows):
                    for c in range(cols):
                        acc[r, c] = out[bi, r0 + r, c0 + c]
            _micro_regs(src, aoff, sai, sap, bpan, acc, 0, NR, kb, load, MR, NR)
            for r in range(rows):
                for c in range(cols):
                    out[bi, r0 + r, c0 + c] = acc[r, c]


def _columns(a, b, out, bi, i_lo, i_hi, j_lo, j_hi, mc, nc, kc):
    """Rows ``i_lo:i_hi`` by columns ``j_lo:j_hi`` of product ``bi`` on one thread: GotoBLAS's
    loops (B panels packed per ``nc`` x ``kc`` block, then row blocks of ``mc`` against them). The packed drivers' body
    (:data:`BODIES`), compiled on its own and called by address; a template whose copies set
    ``_DIRECT`` (:func:`_block_regs`'s ``direct``): ``_columns_packed`` packs A,
    ``_columns_direct`` reads it in place where it can (:data:`DIRECT_A`)."""
    K = a.shape[2]
    for j0 in range(j_lo, j_hi, nc):
        nb = min(nc, j_hi - j0)
        npan = (nb + NR - 1) // NR
        for p0 in range(0, K, kc):
            kb = min(kc, K - p0)
            bp = np.empty(npan * NR * kb, b.dtype)
            for jp in range(npan):
                jj = jp * NR
                _pack_b(b, bi, p0, kb, j0 + jj, min(NR, nb - jj), bp[jj * kb : (jj + NR) * kb])
            for i0 in range(i_lo, i_hi, mc):
                _block(a, out, bi, i0, min(mc, i_hi - i0), j0, nb, 0, npan, p0, kb, bp, _DIRECT)


#: Placeholder: set in each copy of :func:`_columns` (see ``specialise``).
_DIRECT = None


#: Whether the column-slab and split-K drivers read A's rows in place (:func:`_block_regs`'s
#: ``direct``). 2-core Zen 2, 2026-11-23, best of 300 calls against NumPy in one process:
#: square-256 float32 0.81-0.82x -> 0.89-0.93x, square-128 float64 0.79-0.82x -> 0.91x,
#: deep-k-128 float32 (18.0 ms) 0.81x -> (16.2-16.9 ms) 0.87-0.90x.
DIRECT_A = True


def _block_packed(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp):
    """:func:`_block` packing A: :func:`auto_parallel`'s task, called by address."""
    _block(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp, None)


#: The body each packed driver calls by address (``body``, its last argument; inside the
#: ``params`` of split-K): compiled on its own, once, instead of inside every driver.
BODIES = {
    "auto_serial": "_columns_packed",
    "auto_batch": "_columns_packed",
    "auto_slabs": "_columns_direct",
    "auto_splitk": "_columns_direct",
    "auto_parallel": "_block_packed",
}


def auto_serial(a, b, out, mc, nc, kc, nth, body):
    """Packed kernel on one thread (small products: no launch cost)."""
    for bi in range(a.shape[0]):
        call_native(body, (a, b, out, bi, 0, a.shape[1], 0, b.shape[2], mc, nc, kc))


def auto_parallel(a, b, out, mc, nc, kc, nth, body):
    """Packed kernel, each product split into (row block x column slab) tasks.

    ``nth`` (thread count) comes from the caller: reading it in here would
    make the function uncacheable (Numba embeds a pointer for it).
    """
    M = a.shape[1]
    K = a.shape[2]
    N = b.shape[2]
    # row blocks of at most mc rows, as many as a multiple of the thread
    # count and as even as whole MR-row panels allow: 1024 rows in blocks of
    # 144 were 7 x 144 + 16, so one thread ran 576 rows and the other 448
    nmb = (M + mc - 1) // mc
    nmb = ((nmb + nth - 1) // nth) * nth
    npm = (M + MR - 1) // MR
    mc = ((npm + nmb - 1) // nmb) * MR
    nmb = (M + mc - 1) // mc
    for bi in range(a.shape[0]):
        for j0 in range(0, N, nc):
            nb = min(nc, N - j0)
            npan = (nb + NR - 1) // NR
            # enough tasks for every thread: split the column panels too when
            # there are few row blocks (A is re-packed per slab: cheap)
            nsl = min(npan, max(1, (2 * nth + nmb - 1) // nmb))
            per = (npan + nsl - 1) // nsl
            nsl = (npan + per - 1) // per
            for p0 in range(0, K, kc):
                kb = min(kc, K - p0)
                bp = np.empty(npan * NR * kb, b.dtype)
                for jp in prange(npan):
                    jj = jp * NR
                    _pack_b(b, bi, p0, kb, j0 + jj, min(NR, nb - jj), bp[jj * kb : (jj + NR) * kb])
                for t in prange(nmb * nsl):
                    ib = t // nsl
                    s = t - ib * nsl
                    i0 = ib * mc
                    jp_lo, jp_hi = s * per, min(npan, (s + 1) * per)
                    call_native(body, (a, out, bi, i0, min(mc, M - i0), j0, nb, jp_lo, jp_hi, p0, kb, bp))


def auto_slabs(a, b, out, mc, slabs, kc, groups, body):
    """Packed kernel for mid-sized products: a grid of ``slabs`` column slabs by ``groups`` row
    groups (more than one where the columns are too few for every thread), one task per cell,
    in one parallel launch. Each task packs its own panels of B (no barrier between packing and
    computing; a panel is packed once per row group) and walks its row blocks itself, reading A
    where it lies (:data:`DIRECT_A`). :func:`auto_parallel`'s two launches per K block cost more
    than they save below a few hundred cubed (square-256 float32: 246 us on 2 threads, 395 on
    one), and on 16 threads up to 512 cubed (0.72 ms against NumPy's 0.26)."""
    M = a.shape[1]
    N = b.shape[2]
    panels = (N + NR - 1) // NR
    per = (panels + slabs - 1) // slabs
    slabs = (panels + per - 1) // per
    row_panels = (M + MR - 1) // MR
    rper = (row_panels + groups - 1) // groups
    groups = (row_panels + rper - 1) // rper
    for bi in range(a.shape[0]):
        for t in prange(slabs * groups):
            g = t // slabs
            s = t - g * slabs
            i0 = g * rper * MR
            j0 = s * per * NR
            j1 = min(N, j0 + per * NR)
            call_native(body, (a, b, out, bi, i0, min(M, i0 + rper * MR), j0, j1, mc, j1 - j0, kc))


def _auto_chunk(a, b, out, mc, nc, kc, body):
    """Every product of one chunk of K on one thread, A read in place (:data:`DIRECT_A`): the
    packed kernel's part of :func:`split_k_driver` (``body``: :func:`_columns_direct`'s address)."""
    for bi in range(a.shape[0]):
        call_native(body, (a, b, out, bi, 0, a.shape[1], 0, b.shape[2], mc, nc, kc))


#: The packed kernel's drivers of each register tile (``auto_batch``, whole products shared among
#: threads, is :func:`tasks_parallel` over :func:`_columns`).
AUTO_DRIVERS = ("auto_serial", "auto_parallel", "auto_slabs", "auto_splitk")


def specialise(mr: int, nr: int, regs: bool) -> dict:
    """Copies of the ``"auto"`` functions with MR, NR frozen to ``mr``, ``nr``.

    ``regs`` picks the register micro-kernel (real and integer dtypes) or the
    portable loop one (complex).  Each copy gets its own globals (so Numba
    sees the constants) and its own qualified name (so on-disk cache entries
    of different tiles never mix).  Returns the plain Python functions, ready
    to be jitted: the drivers (``auto_splitk`` is :func:`split_k_driver` over
    :func:`_auto_chunk`, its sum in parallel) and the bodies of :data:`BODIES`,
    which the drivers call by address.
    """
    g = dict(globals())
    g["MR"] = mr
    g["NR"] = nr
    suffix = f"_mr{mr}_nr{nr}" + ("_regs" if regs else "")
    g["_micro"] = numba.njit(pipeline_class=_NoAliasCompiler, **JIT)(_copy("_micro", g, suffix))
    # The packing loops are inlined into their callers (Numba's IR): compiled as functions of
    # their own, each was optimised and emitted again in every caller that links it, 0.4 s of
    # the README snippet's 2.2 s packed-body compile (2-core Xeon, 2026-11-28); run time the same.
    for name in ("_column_into_panels", "_column_into_panel", "_pack_a", "_pack_b"):
        g[name] = numba.njit(inline="always", **JIT)(_copy(name, g, suffix))
    for name in ("_panel_direct", "_block_direct", "_block_regs", "_block"):
        g[name] = numba.njit(**JIT)(_copy(name, g, suffix))
    if regs:
        g["_block"] = g["_block_regs"]
    g["_auto_chunk"] = numba.njit(**JIT)(_copy("_auto_chunk", g, suffix))
    functions = {name: _copy(name, g, suffix) for name in AUTO_DRIVERS if name != "auto_splitk"}
    functions["auto_splitk"] = split_k_driver("auto_splitk", g["_auto_chunk"], True, g, suffix)
    # The bodies hold their loops themselves: each level of jitted calls re-optimises and
    # re-emits every kernel below it, so a wrapper around _columns cost half a second more.
    functions["_columns_packed"] = _copy("_columns", g | {"_DIRECT": None}, suffix, "_columns_packed")
    functions["_columns_direct"] = _copy("_columns", g | {"_DIRECT": DIRECT_A}, suffix, "_columns_direct")
    functions["_block_packed"] = _copy("_block_packed", g, suffix)
    return functions


def _copy(name: str, g: dict, suffix: str, as_name: str | None = None):
    """The function ``name`` of this module with globals ``g``, named ``as_name`` (default ``name``)
    plus ``suffix``: a copy of its own for Numba, with its own on-disk cache entries."""
    f = globals()[name]
    as_name = as_name or name
    fn = _pytypes.FunctionType(f.__code__, g, as_name, f.__defaults__, f.__closure__)
    fn.__qualname__ = as_name + suffix
    fn.__module__ = f.__module__
    fn.__doc__ = f.__doc__
    return fn


# --------------------------------------------------------------------------
# shape-specific paths: small products, matrix-vector, split-K


def _add(x, y):
    """``x + y`` in the result type (``x | y`` for bool): sums of partial products."""


@overload(_add)
def _ol_add(x, y):
    if isinstance(x, types.Boolean):
        return lambda x, y: x | y
    return lambda x, y: x + y


@intrinsic
def _unit(typingctx, arr):
    """A 1-D array of any layout seen as contiguous (the caller knows its
    stride is one element).  Numba cannot vectorise loops over "A"-layout
    arrays (their stride is a runtime value); the same memory typed "C" can.
    """
    if not (isinstance(arr, types.Array) and arr.ndim == 1):
        return None
    ret = arr.copy(layout="C")

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, ret, args[0])

    return ret(arr), codegen


@numba.njit(**JIT)
def _slab(a, b, out, bi, j0, j1, acc):
    """out[bi, :, j0:j1] = a[bi] @ b[bi, :, j0:j1], walking K outermost.

    Each row of B (one K step) is read once and used for every row of the
    slab, accumulated in ``acc`` (M x slab width, private): the inner loop
    runs along N over two unit-stride rows and vectorises.  ``b`` must be
    unit-stride along N.  Every element is summed in K order, one
    multiply-add at a time (same rounding as the packed kernel).
    """
    M = a.shape[1]
    K = a.shape[2]
    w = j1 - j0
    z = _zero(a[0, 0, 0])
    for i in range(M):
        for jj in range(w):
            acc[i, jj] = z
    # four rows of B a step: one load and store of the accumulator row per
    # four multiply-adds (still summed in K order); the vector-matrix path is
    # memory-bound and this is its inner loop (gevm-4096 float32, one
    # thread: 3.9 -> 2.6 ms, NumPy 2.5 ms; float64 7.5 -> 4.8, NumPy 5.4)
    K4 = K - K % 4
    for p in range(0, K4, 4):
        b0 = _unit(b[bi, p, j0:j1])
        b1 = _unit(b[bi, p + 1, j0:j1])
        b2 = _unit(b[bi, p + 2, j0:j1])
        b3 = _unit(b[bi, p + 3, j0:j1])
        for i in range(M):
            a0 = a[bi, i, p]
            a1 = a[bi, i, p + 1]
            a2 = a[bi, i, p + 2]
            a3 = a[bi, i, p + 3]
            arow = acc[i]
            for jj in range(w):
                arow[jj] = _mac(_mac(_mac(_mac(arow[jj], a0, b0[jj]), a1, b1[jj]), a2, b2[jj]), a3, b3[jj])
    for p in range(K4, K):
        brow = _unit(b[bi, p, j0:j1])
        for i in range(M):
            av = a[bi, i, p]
            arow = acc[i]
            for jj in range(w):
                arow[jj] = _mac(arow[jj], av, brow[jj])
    for i in range(M):
        for jj in range(w):
            out[bi, i, j0 + jj] = acc[i, jj]


def slab_serial(a, b, out, js, bs=0):
    """Whole products one after another on one thread, slab by slab of ``js`` columns: the
    low-latency path (``bs`` unused), and, jitted as :data:`_slabs`, the slab kernel's part of
    :func:`split_k_driver`."""
    N = b.shape[2]
    acc = np.empty((a.shape[1], min(js, N)), out.dtype)
    for bi in range(a.shape[0]):
        for j0 in range(0, N, js):
            _slab(a, b, out, bi, j0, min(N, j0 + js), acc)


_slabs = numba.njit(**JIT)(slab_serial)


def slab_parallel(a, b, out, js, bs):
    """Tasks of ``bs`` (product x column slab) pieces shared among threads.

    With ``js >= N`` that is batches of small products, many per task; with
    a few rows and many columns it is the vector-matrix path (each task
    streams its columns of B once).
    """
    N = b.shape[2]
    nsl = (N + js - 1) // js
    total = a.shape[0] * nsl
    for t in prange((total + bs - 1) // bs):
        acc = np.empty((a.shape[1], min(js, N)), out.dtype)
        for u in range(t * bs, min(total, (t + 1) * bs)):
            bi = u // nsl
            j0 = (u - bi * nsl) * js
            _slab(a, b, out, bi, j0, min(N, j0 + js), acc)


#: Elements of a bool dot product between its checks for a true term: NumPy's bool matmul stops
#: at the first one, and random operands have one within a few elements (n4-2048 bool, Zen 5,
#: 2 threads: 117 us summing every term, 60 us so, NumPy 11; all-false operands 132 us, NumPy
#: 4.4 ms). A scalar check of the first 8 terms first made both slower (72 us; 4.6 ms: the
#: chunks no longer vectorised).
_ANY_CHUNK = 64


def _dot(x, y):
    """sum(x * y) with vector partial sums (the loop is reassociated into
    lanes by LLVM, like any BLAS dot: fixed order for a given length); for
    bool, any(x & y), ended at the first chunk of :data:`_ANY_CHUNK` that holds a true term."""


@overload(_dot, jit_options={"fastmath": {"contract", "reassoc"}})
def _ol_dot(x, y):
    if isinstance(x.dtype, types.Boolean):

        def any_and(x, y):
            # whole chunks of a fixed length vectorise (a bound of min(K, ...) did not: 4x slower)
            K = x.shape[0]
            p0 = 0
            while p0 + _ANY_CHUNK <= K:
                s = False
                for k in range(_ANY_CHUNK):
                    s = s | (x[p0 + k] & y[p0 + k])
                if s:
                    return True
                p0 += _ANY_CHUNK
            s = False
            for k in range(p0, K):
                s = s | (x[k] & y[k])
            return s

        return any_and

    def dot(x, y):
        s = _zero(x[0])
        for k in range(x.shape[0]):
            s = _mac(s, x[k], y[k])
        return s

    return dot


def _dot4(x0, x1, x2, x3, y):
    """Four dot products with one ``y`` (each of its loads feeds four rows); bool: four of
    :func:`_dot`'s, each ending at its own first true term."""


@overload(_dot4, jit_options={"fastmath": {"contract", "reassoc"}})
def _ol_dot4(x0, x1, x2, x3, y):
    if isinstance(y.dtype, types.Boolean):
        return lambda x0, x1, x2, x3, y: (_dot(x0, y), _dot(x1, y), _dot(x2, y), _dot(x3, y))
    return _dot4_sums


def _dot4_sums(x0, x1, x2, x3, y):
    s0 = _zero(x0[0])
    s1 = _zero(x0[0])
    s2 = _zero(x0[0])
    s3 = _zero(x0[0])
    for k in range(y.shape[0]):
        yk = y[k]
        s0 = _mac(s0, x0[k], yk)
        s1 = _mac(s1, x1[k], yk)
        s2 = _mac(s2, x2[k], yk)
        s3 = _mac(s3, x3[k], yk)
    return s0, s1, s2, s3


@numba.njit(**JIT)
def _dot_rows(a, bt, out, bi, i0, i1):
    """out[bi, i0:i1, :] by dot products of A's rows with the columns of B
    (``bt``: B transposed, contiguous), four rows at a time (four streams
    of A, one load of B for four multiply-adds: gemv-4096 one thread,
    float32 4.1 -> 2.9 ms, NumPy 2.7; float64 7.6 -> 5.2 ms, NumPy 5.3)."""
    i4 = i0 + (i1 - i0) // 4 * 4
    for i in range(i0, i4, 4):
        r0 = _unit(a[bi, i])
        r1 = _unit(a[bi, i + 1])
        r2 = _unit(a[bi, i + 2])
        r3 = _unit(a[bi, i + 3])
        for c in range(bt.shape[1]):
            s0, s1, s2, s3 = _dot4(r0, r1, r2, r3, bt[bi, c])
            out[bi, i, c] = s0
            out[bi, i + 1, c] = s1
            out[bi, i + 2, c] = s2
            out[bi, i + 3, c] = s3
    for i in range(i4, i1):
        row = _unit(a[bi, i])
        for c in range(bt.shape[1]):
            out[bi, i, c] = _dot(row, bt[bi, c])


def dot_parallel(a, b, out, rs):
    """Matrix-vector path (a few columns in B): blocks of ``rs`` rows of A
    shared among threads, each row streamed from memory once.  A must be
    unit-stride along K for the dot products to vectorise."""
    nb = a.shape[0]
    M = a.shape[1]
    K = a.shape[2]
    N = b.shape[2]
    bt = np.empty((nb, N, K), b.dtype)
    for bi in range(nb):
        for c in range(N):
            for p in range(K):
                bt[bi, c, p] = b[bi, p, c]
    nrb = (M + rs - 1) // rs
    for t in prange(nb * nrb):
        bi = t // nrb
        i0 = (t - bi * nrb) * rs
        _dot_rows(a, bt, out, bi, i0, min(M, i0 + rs))


def tiny_2d(a, b, out):
    """out = a @ b for one small 2-D product: the lowest-latency path (no
    batch axis, no scratch buffer; every element summed in K order)."""
    M = a.shape[0]
    K = a.shape[1]
    N = b.shape[1]
    z = _zero(a[0, 0])
    for i in range(M):
        for j in range(N):
            out[i, j] = z
        for p in range(K):
            av = a[i, p]
            for j in range(N):
                out[i, j] = _mac(out[i, j], av, b[p, j])


# --------------------------------------------------------------------------
# small products with N (and the row tile) as compile-time constants: batches
# of tiny matrices, broadcast batches, single small products

#: Bytes of one native vector register (AVX-512: 64, AVX2: 32); set by the
#: backend from params before anything here compiles.
VBYTES = 32


@intrinsic
def _small_regs(typingctx, a, aoff, sai, sap, b, boff, ldb, c, coff, ldc, kc, ncols, mr, nr, masked):
    """``c[mr x ncols tile] = a[mr x kc] @ b[kc x ncols]`` with the tile in vector registers.

    Any element strides for A (``sai`` rows, ``sap`` along K, 0 and negative
    included), B unit-stride along N (rows ``ldb`` apart), C rows ``ldc``
    apart; offsets in elements from each array's data pointer.  ``mr`` and
    ``nr`` are literals: the loop over K is the only loop, the tile's
    ``mr * nr / vw`` accumulators are SSA vectors (registers), each K step
    loads the row of B as ``nr / vw`` vectors and broadcasts one A value per
    row.  With ``masked`` (a literal 1) only the first ``ncols`` (<= ``nr``)
    columns of B are read and of C written, by masked vector loads and stores
    (float32 and float64); otherwise ``ncols`` is ``nr``.  Floats use
    ``contract`` only (FMA; sums in K order, no reassociation).
    """
    literal = (types.IntegerLiteral, types.BooleanLiteral)
    if not all(isinstance(x, literal) for x in (mr, nr, masked)):
        return None
    dt = a.dtype
    if not isinstance(dt, types.Float):
        return None
    nmr, nnr, with_mask = mr.literal_value, nr.literal_value, bool(masked.literal_value)
    sig = types.void(a, aoff, sai, sap, b, boff, ldb, c, coff, ldc, kc, ncols, mr, nr, masked)

    def codegen(context, builder, signature, args):
        vw, nv, vty = _ir_vectors(context, dt, nnr, VBYTES)
        i64 = ir.IntType(64)

        def k64(x):
            return ir.Constant(i64, x)

        def i(n):
            return context.cast(builder, args[n], signature.args[n], types.int64)

        a_ptr = context.make_array(signature.args[0])(context, builder, args[0]).data
        b_ptr = context.make_array(signature.args[4])(context, builder, args[4]).data
        c_ptr = context.make_array(signature.args[7])(context, builder, args[7]).data
        aoffv, saiv, sapv, boffv, ldbv, coffv, ldcv, kcv, ncolsv = (i(n) for n in (1, 2, 3, 5, 6, 8, 9, 10, 11))
        masks = [_ir_lanes(builder, vty, ncolsv, v * vw) for v in range(nv)] if with_mask else None
        zero = ir.Constant(vty, None)
        res = _ir_k_loop(
            builder, dt, vty, nmr, [zero] * (nmr * nv), kcv, a_ptr, aoffv, saiv, sapv, b_ptr,
            lambda p: builder.add(boffv, builder.mul(p, ldbv)), "small", masks,
        )  # fmt: skip
        for k, x in enumerate(res):
            r, v = divmod(k, nv)
            idx = builder.add(coffv, builder.add(builder.mul(k64(r), ldcv), k64(v * vw)))
            ptr = builder.bitcast(builder.gep(c_ptr, [idx]), vty.as_pointer())
            if with_mask:
                _ir_masked_store(builder, x, ptr, masks[v])
            else:
                builder.store(x, ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


# Placeholders of the small-product kernels (see ``specialise_small``): SMR0 rows per tile
# (as many as the vector registers hold), SNR columns per tile (two vectors), SNRH one
# vector.  Columns come in tiles of SNR, the rest in one masked tile of SNR or SNRH (masked
# loads and stores: nothing outside the product is read or written); rows in tiles of SMR0,
# the last one overlapping the one before (its outputs computed again in the same order, so
# stored with the same values), or one tile of exactly M rows where M < SMR0.  So one
# compiled kernel per dtype serves every shape: a kernel compiled per N (as before) grew
# memory with every new shape a process met.
SMR0 = 8
SNR, SNRH = 32, 16


def _small_cols(a, aoff, sai, sap, b, boff, ldb, out, coff, ldc, K, N, mr):
    """One row tile (``mr`` rows, a literal) across all N columns; inlined into its caller
    (Numba IR), so ``mr`` stays a literal and no call is paid per tile."""
    j0 = 0
    while N - j0 >= SNR:
        _small_regs(a, aoff, sai, sap, b, boff + j0, ldb, out, coff + j0, ldc, K, SNR, mr, SNR, 0)
        j0 += SNR
    left = N - j0
    if left > SNRH:
        _small_regs(a, aoff, sai, sap, b, boff + j0, ldb, out, coff + j0, ldc, K, left, mr, SNR, 1)
    elif left > 0:
        _small_regs(a, aoff, sai, sap, b, boff + j0, ldb, out, coff + j0, ldc, K, left, mr, SNRH, 1)


def _small_one(a, b, out, ao, bo, co, sa1, sa2, sb1, sc1):
    """One small product, its A, B and C ``ao``, ``bo``, ``co`` elements past the arrays' data."""
    M = a.shape[1]
    K = a.shape[2]
    N = b.shape[2]
    if M >= SMR0:
        i0 = 0
        while True:
            if i0 > M - SMR0:
                i0 = M - SMR0
            _small_cols(a, ao + i0 * sa1, sa1, sa2, b, bo, sb1, out, co + i0 * sc1, sc1, K, N, SMR0)
            if i0 == M - SMR0:
                break
            i0 += SMR0
    elif SMR0 > 7 and M == 7:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 7)
    elif SMR0 > 6 and M == 6:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 6)
    elif M == 5:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 5)
    elif M == 4:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 4)
    elif M == 3:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 3)
    elif M == 2:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 2)
    elif M == 1:
        _small_cols(a, ao, sa1, sa2, b, bo, sb1, out, co, sc1, K, N, 1)


def _small_products(a, b, out, bs=0):
    """Small products one after another on one thread (``bs`` unused): ``small_serial``, which
    split-K calls by address for the products of each chunk of K (:func:`_small_chunk`)."""
    sz = a.itemsize
    sa0, sa1, sa2 = a.strides[0] // sz, a.strides[1] // sz, a.strides[2] // sz
    sb0, sb1 = b.strides[0] // sz, b.strides[1] // sz
    sc0, sc1 = out.strides[0] // sz, out.strides[1] // sz
    for bi in range(a.shape[0]):
        _small_one(a, b, out, bi * sa0, bi * sb0, bi * sc0, sa1, sa2, sb1, sc1)


def small_parallel(a, b, out, bs):
    """Tasks of ``bs`` whole small products shared among threads."""
    sz = a.itemsize
    sa0, sa1, sa2 = a.strides[0] // sz, a.strides[1] // sz, a.strides[2] // sz
    sb0, sb1 = b.strides[0] // sz, b.strides[1] // sz
    sc0, sc1 = out.strides[0] // sz, out.strides[1] // sz
    nb = a.shape[0]
    for t in prange((nb + bs - 1) // bs):
        for bi in range(t * bs, min(nb, (t + 1) * bs)):
            _small_one(a, b, out, bi * sa0, bi * sb0, bi * sc0, sa1, sa2, sb1, sc1)


def small_groups(a, b, out, bs, ng, sag, sbg, scg):
    """The batch ``(a, b, out)`` and ``ng - 1`` more laid out alike, the ``g``-th ``g * sag``,
    ``g * sbg``, ``g * scg`` elements further on (a broadcast batch's outer indices, which no
    one batch stride reaches), in tasks of ``bs`` whole products shared among threads: one
    launch for them all (compiled serial too: ``small_groups_serial``)."""
    sz = a.itemsize
    sa0, sa1, sa2 = a.strides[0] // sz, a.strides[1] // sz, a.strides[2] // sz
    sb0, sb1 = b.strides[0] // sz, b.strides[1] // sz
    sc0, sc1 = out.strides[0] // sz, out.strides[1] // sz
    nb = a.shape[0]
    tasks = (nb + bs - 1) // bs
    for t in prange(ng * tasks):
        g = t // tasks
        first = (t - g * tasks) * bs
        for bi in range(first, min(nb, first + bs)):
            _small_one(a, b, out, g * sag + bi * sa0, g * sbg + bi * sb0, g * scg + bi * sc0, sa1, sa2, sb1, sc1)


def specialise_small(mr0: int, nr: int) -> dict:
    """Copies of the small-product drivers with ``mr0`` rows and ``nr`` columns (two vectors)
    per tile frozen: one set per dtype and vector width. ``small_splitk`` is :func:`split_k_driver`
    over :func:`_small_chunk`, ``small_serial`` called by address (chunks of K whose ``ks x N``
    rows of B stay in L2 while every row tile reuses them), its sum serial: a second parallel
    launch cost more than it saves on a few small partial products, and on a busy machine far
    more."""
    g = dict(globals())
    g.update(SMR0=mr0, SNR=nr, SNRH=nr // 2)
    suffix = f"_mr{mr0}_nr{nr}_v{VBYTES}"
    g["_small_cols"] = numba.njit(inline="always", **JIT)(_copy("_small_cols", g, suffix))
    g["_small_one"] = numba.njit(**JIT)(_copy("_small_one", g, suffix))
    drivers = {"small_serial": _copy("_small_products", g, suffix, "small_serial")}
    drivers["small_parallel"] = _copy("small_parallel", g, suffix)
    drivers["small_groups"] = _copy("small_groups", g, suffix)
    g["_small_chunk"] = numba.njit(**JIT)(_copy("_small_chunk", g, suffix))
    drivers["small_splitk"] = split_k_driver("small_splitk", g["_small_chunk"], False, g, suffix)
    return drivers


def _small_chunk(a, b, out, body):
    """The products of one chunk of K: ``small_serial`` called by its address ``body``
    (:mod:`.native_call`), so split-K does not compile the small kernel once more (float32 on the
    2-core Xeon: 4.3 -> 2.5 s)."""
    call_native(body, (a, b, out, 0))


# --------------------------------------------------------------------------
# split-K: K cut into chunks computed in parallel, summed in chunk order


# Placeholders: replaced in each copy of the template (see ``split_k_driver``).
_chunk_product = None
_sum_range = range


def _split_k(a, b, out, ks, params):
    """``out = a @ b`` with K cut into chunks of ``ks``: each chunk's partial product goes to
    a scratch buffer of its own (``_chunk_product(a_chunk, b_chunk, buffer, *params)``, one task
    per chunk), then the buffers are added in chunk order (:func:`_sum_chunks`). The chunks are
    a shape rule, so the result depends on the shape only, never on the thread count or timing.
    A template: :func:`split_k_driver` sets ``_chunk_product`` and ``_sum_range`` per kernel family."""
    nb, M, K = a.shape
    nch = (K + ks - 1) // ks
    part = np.empty((nch, nb, M, b.shape[2]), out.dtype)
    for c in prange(nch):
        k0 = c * ks
        k1 = min(K, k0 + ks)
        _chunk_product(a[:, :, k0:k1], b[:, k0:k1, :], part[c], *params)
    for t in _sum_range(nb * M):
        _sum_chunks(part, out, t // M, t % M)


@numba.njit(**JIT)
def _sum_chunks(part, out, bi, i):
    """``out[bi, i]`` = the chunks' rows ``part[:, bi, i]`` added in chunk order, element by
    element (vectorised along the row; the order of each element's sum is fixed)."""
    orow = _unit(out[bi, i])
    orow[:] = part[0, bi, i]
    for c in range(1, part.shape[0]):
        prow = part[c, bi, i]
        for j in range(orow.shape[0]):
            orow[j] = _add(orow[j], prow[j])


def split_k_driver(name: str, chunk_product, parallel_sum: bool, g: dict | None = None, suffix: str = ""):
    """The split-K driver ``name(a, b, out, ks, params)`` of one kernel family, not yet jitted:
    :func:`_split_k` over ``chunk_product`` (a jitted serial kernel of the family: ``a``, ``b``,
    ``out`` of one chunk of K, then ``*params``), summing in parallel or on one thread (where a
    second parallel launch costs more than the sum). ``g``: the family's globals."""
    g = dict(globals() if g is None else g)
    g["_chunk_product"] = chunk_product
    g["_sum_range"] = prange if parallel_sum else range
    return _copy("_split_k", g, suffix, name)


#: Vector-matrix products with long K: chunks of ``ks`` rows of B, one task each, so every thread
#: streams whole rows of B (one contiguous range of memory) instead of column slabs of every row,
#: each chunk's partial product in ``js``-wide slabs (L1/L2; ``params = (js,)``); summed on one
#: thread (M <= 8 rows: tens of microseconds; a second parallel launch costs about as much).
slab_splitk = split_k_driver("slab_splitk", _slabs, False)


# --------------------------------------------------------------------------
# batches of dot products: N = 1 (vecdot, a batch of 1 x K by K x 1, batched matrix-vector)


def _dots(a, b, out, u0, u1):
    """``out[bi, i, 0] = a[bi, i, :] . b[bi, :, 0]`` for the (product, row) pairs ``u0 <= u < u1``
    (``u = bi * M + i``): one dot product each, vectorised along K where that operand's K stride
    is one element (:func:`_dot`'s lanes), a strided loop where not (the transposed operand of a
    batched trace: consecutive rows then reuse its cache lines)."""
    M = a.shape[1]
    size = a.itemsize
    ua = a.strides[2] == size
    ub = b.strides[1] == size
    if M == 1 and not ub and b.strides[0] == size:
        _dots_across(a[:, 0, :], b[:, :, 0], out, u0, u1)
        return
    if M == 1 and not ua and a.strides[0] == size:
        _dots_across(b[:, :, 0], a[:, 0, :], out, u0, u1)
        return
    for u in range(u0, u1):
        bi = u // M
        i = u - bi * M
        x = a[bi, i]
        y = b[bi, :, 0]
        if ua and ub:
            s = _dot(_unit(x), _unit(y))
        elif ua:
            s = _dot(_unit(x), y)
        elif ub:
            s = _dot(x, _unit(y))
        else:
            s = _dot(x, y)
        out[bi, i, 0] = s


#: Dot products computed side by side by :func:`_dots_across`.
_ACROSS = 16


@numba.njit(**JIT)
def _dots_across(x, y, out, u0, u1):
    """``out[u, 0, 0] = x[u, :] . y[u, :]`` where ``y`` runs along the batch (``y[u + 1, p]``
    next to ``y[u, p]``; a batched trace's transposed operand): ``_ACROSS`` products side by
    side, so each line of ``y`` is read once and used whole, vectorised across the products
    (one product at a time walked ``y``'s column 1 KiB a step, 16 times over each line: a
    batched trace ``bij,bji->b`` of 64 x 256 x 256 took 5.9 ms on one thread, 2.6 ms so)."""
    K = x.shape[1]
    acc = np.full(_ACROSS, _zero(x[0, 0]))
    u = u0
    while u + _ACROSS <= u1:
        acc[:] = _zero(x[0, 0])
        for p in range(K):
            yv = _unit(y[u : u + _ACROSS, p])
            xv = x[u : u + _ACROSS, p]
            for t in range(_ACROSS):
                acc[t] = _mac(acc[t], xv[t], yv[t])
        for t in range(_ACROSS):
            out[u + t, 0, 0] = acc[t]
        u += _ACROSS
    for v in range(u, u1):
        s = _zero(x[0, 0])
        for p in range(K):
            s = _mac(s, x[v, p], y[v, p])
        out[v, 0, 0] = s


def dot_batch(body, a, b, out, bs):
    """Batches of dot products (``N = 1``): tasks of ``bs`` consecutive (product, row) pairs
    shared among threads, each streaming its rows of A and columns of B once; no copy, no
    packing (a slab of one column cannot vectorise: 8192 dots of 512 took 7.6 ms, NumPy's
    ``vecdot`` 1.1 ms). ``body``: :func:`_dots`'s address (compiled once for both drivers), first
    so that the backend binds it with ``functools.partial`` (a lambda cost 0.1 us of a 4.5 us call)."""
    total = a.shape[0] * a.shape[1]
    for t in prange((total + bs - 1) // bs):
        call_native(body, (a, b, out, t * bs, min(total, (t + 1) * bs)))


def dot_batch_serial(body, a, b, out, bs):
    """:func:`dot_batch` on one thread (``bs`` unused): too little work for a parallel launch."""
    call_native(body, (a, b, out, 0, a.shape[0] * a.shape[1]))
