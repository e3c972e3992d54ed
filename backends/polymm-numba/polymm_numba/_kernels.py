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
their own name (hence their own on-disk cache entries).
"""

from __future__ import annotations

import types as _pytypes

import numba
import numpy as np
from numba import prange, types
from numba.core import compiler
from numba.extending import overload

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

@numba.njit(**JIT)
def _tile(a, b, out, bi, i0, mb, j0, nb, tk):
    K = a.shape[2]
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


def tiled_parallel(a, b, out, tm, tn, tk):
    """Output tiles of every batch shared among threads."""
    M = a.shape[1]
    N = b.shape[2]
    nbm = (M + tm - 1) // tm
    nbn = (N + tn - 1) // tn
    per = nbm * nbn
    for t in prange(a.shape[0] * per):
        bi = t // per
        r = t - bi * per
        i0 = (r // nbn) * tm
        j0 = (r - (r // nbn) * nbn) * tn
        _tile(a, b, out, bi, i0, min(tm, M - i0), j0, min(tn, N - j0), tk)


# --------------------------------------------------------------------------
# auto: packed panels + register-blocked micro-kernel (GotoBLAS/BLIS shape)

class _NoAliasCompiler(compiler.Compiler):
    """Compile with ``noalias`` on array arguments.

    The micro-kernel's operands never overlap (two packed buffers and a
    private accumulator); telling LLVM so lets it keep the accumulator tile
    in vector registers' reach instead of re-checking memory dependences.
    """

    def __init__(self, typingctx, targetctx, library, args, return_type,
                 flags, locals):
        flags.noalias = True
        super().__init__(typingctx, targetctx, library, args, return_type,
                         flags, locals)


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


def _pack_a(a, bi, i0, mb, p0, kb, ap):
    """Rows i0..i0+mb of A (columns p0..p0+kb) as MR-tall k-major panels, zero-padded."""
    z = _zero(a[0, 0, 0])
    for ip in range(0, mb, MR):
        base = ip * kb
        rows = min(MR, mb - ip)
        for p in range(kb):
            o = base + p * MR
            for r in range(rows):
                ap[o + r] = a[bi, i0 + ip + r, p0 + p]
            for r in range(rows, MR):
                ap[o + r] = z


def _pack_b(b, bi, p0, kb, j0, cols, bp):
    """One NR-wide k-major panel of B (columns j0..j0+cols), zero-padded."""
    z = _zero(b[0, 0, 0])
    for p in range(kb):
        o = p * NR
        for c in range(cols):
            bp[o + c] = b[bi, p0 + p, j0 + c]
        for c in range(cols, NR):
            bp[o + c] = z


def _block(a, out, bi, i0, mb, j0, nb, jp_lo, jp_hi, p0, kb, bp):
    """out[i0:i0+mb, panels jp_lo..jp_hi of the j0 block] (+)= A-block @ packed B."""
    ap = np.empty(((mb + MR - 1) // MR) * MR * kb, a.dtype)
    _pack_a(a, bi, i0, mb, p0, kb, ap)
    acc = np.empty((MR, NR), out.dtype)
    z = _zero(a[0, 0, 0])
    for jp in range(jp_lo, jp_hi):
        jj = jp * NR
        cols = min(NR, nb - jj)
        bpan = bp[jj * kb:(jj + NR) * kb]
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
                _micro(ap[ip * kb:(ip + MR) * kb], bpan, acc, kb)
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
                _micro(ap[ip * kb:(ip + MR) * kb], bpan, acc, kb)
                for r in range(rows):
                    for c in range(cols):
                        out[bi, r0 + r, c0 + c] = acc[r, c]


def _one_serial(a, b, out, bi, mc, nc, kc):
    M = a.shape[1]
    K = a.shape[2]
    N = b.shape[2]
    for j0 in range(0, N, nc):
        nb = min(nc, N - j0)
        npan = (nb + NR - 1) // NR
        for p0 in range(0, K, kc):
            kb = min(kc, K - p0)
            bp = np.empty(npan * NR * kb, b.dtype)
            for jp in range(npan):
                jj = jp * NR
                _pack_b(b, bi, p0, kb, j0 + jj, min(NR, nb - jj),
                        bp[jj * kb:(jj + NR) * kb])
            for i0 in range(0, M, mc):
                _block(a, out, bi, i0, min(mc, M - i0), j0, nb, 0, npan,
                       p0, kb, bp)


def auto_serial(a, b, out, mc, nc, kc, nth):
    """Packed kernel on one thread (small products: no launch cost)."""
    for bi in range(a.shape[0]):
        _one_serial(a, b, out, bi, mc, nc, kc)


def auto_batch(a, b, out, mc, nc, kc, nth):
    """Packed kernel, whole products shared among threads (many small products)."""
    for bi in prange(a.shape[0]):
        _one_serial(a, b, out, bi, mc, nc, kc)


def auto_parallel(a, b, out, mc, nc, kc, nth):
    """Packed kernel, each product split into (row block x column slab) tasks.

    ``nth`` (thread count) comes from the caller: reading it in here would
    make the function uncacheable (Numba embeds a pointer for it).
    """
    M = a.shape[1]
    K = a.shape[2]
    N = b.shape[2]
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
                    _pack_b(b, bi, p0, kb, j0 + jj, min(NR, nb - jj),
                            bp[jj * kb:(jj + NR) * kb])
                for t in prange(nmb * nsl):
                    ib = t // nsl
                    s = t - ib * nsl
                    i0 = ib * mc
                    _block(a, out, bi, i0, min(mc, M - i0), j0, nb,
                           s * per, min(npan, (s + 1) * per), p0, kb, bp)


_AUTO_HELPERS = ("_pack_a", "_pack_b", "_block", "_one_serial")
AUTO_DRIVERS = ("auto_serial", "auto_batch", "auto_parallel")


def specialise(mr: int, nr: int) -> dict:
    """Copies of the ``"auto"`` functions with MR, NR frozen to ``mr``, ``nr``.

    Each copy gets its own globals (so Numba sees the constants) and its own
    qualified name (so on-disk cache entries of different tiles never mix).
    Returns the plain Python driver functions, ready to be jitted.
    """
    g = dict(globals())
    g["MR"] = mr
    g["NR"] = nr
    suffix = f"_mr{mr}_nr{nr}"

    def copy(name):
        f = globals()[name]
        fn = _pytypes.FunctionType(f.__code__, g, name, f.__defaults__,
                                   f.__closure__)
        fn.__qualname__ = name + suffix
        fn.__module__ = f.__module__
        fn.__doc__ = f.__doc__
        return fn

    g["_micro"] = numba.njit(pipeline_class=_NoAliasCompiler, **JIT)(copy("_micro"))
    for name in _AUTO_HELPERS:
        g[name] = numba.njit(**JIT)(copy(name))
    return {name: copy(name) for name in AUTO_DRIVERS}
