"""16-, 32- and 64-bit integer products on Hopper's 8-bit tensor cores, by byte planes
(``kernels/byte_planes.cu``).

NumPy's integer products wrap modulo 2^w. Modulo 2^w, ``A @ B`` is the sum over byte pairs
``(i, j)`` with ``i + j`` below the element's bytes of ``256^(i+j) * (A_i @ B_j)``, where ``A_i``
is A's byte plane i read as uint8: 3 uint8 products for 16-bit types, 10 for 32-bit, 36 for
64-bit. The tensor cores run a uint8 product at about 1250 TFLOP/s on an H100 against some 15 for
the SIMT cores' integer multiply-adds, so even 36 of them win on large products.

The planes of A and of B are copied side by side along K first (``polymm_byte_planes_<bytes>``,
a ``before`` launch each; any strides are read, the planes being copies); then one uint8
``wgmma`` product over all of them, in one of two ways (:func:`geometry`: one run, or several):

- 16- and 32-bit results: by Horner's rule (``polymm_wgmma_planes<bits>_nk``, ``WG_PLANES``):
  the highest shift's pairs first, the int32 accumulators shifted a byte left where each shift's
  pairs end, C stored from them: no workspace, no second pass. The pairs of one shift lie side by
  side, each K deep (rounded up to 32), and only the shift is padded to whole slices of 128: an
  outer product of K = 32 int32s multiplies 4 slices, not the 10 of a slice per pair;
- 64-bit results (int32 accumulators would lose the high half), and deep products on few tiles
  (whose K is cut into runs that fill the SMs): in runs of K that keep each pair's int32 sums
  apart (``WG_SPLIT``), which ``polymm_planes_sum_<bytes>`` shifts and adds into C; the cost
  model counts that workspace and :func:`refusal` bounds it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from polymm.kernels import GRID_ROWS
from polymm.kernels.devices import settings_for

from . import wgmma
from .abi import BYTE_PLANES, PLANES_SUM, WGMMA

__all__ = [
    "DTYPES",
    "KERNEL",
    "pairs",
    "segments",
    "runs_per_segment",
    "Geometry",
    "geometry",
    "starts",
    "kernel_name",
    "min_work",
    "refusal",
    "launch",
]

#: The dtypes served: every integer type wider than a byte.
DTYPES = ("int16", "uint16", "int32", "uint32", "int64", "uint64")
#: K per block of the split kernel (``BP_TK``) and per ``wgmma`` slice of uint8 (``WG_ROW``): a
#: segment's K is padded to a multiple of this times its runs, so runs never straddle two segments.
_K_STEP = wgmma.ROW
#: Bytes to which a segment of Horner's layout is rounded: a sector of memory, so that the split's
#: stores stay whole sectors (segments 4 bytes apart made 2043-square uint32 products 210 -> 243 us).
_SECTOR = 32
#: Deepest run whose uint8 sums stay exact in 32 bits (255^2 x 66051 < 2^32): what a 64-bit
#: result needs of every pair's sum (narrower results need only its residue modulo 2^32).
_EXACT_DEPTH = 65536
#: The product kernel of the runs (``WG_SPLIT``); :func:`kernel_name` names each plan's.
KERNEL = wgmma.kernel_name("uint8", "nk")
_SOURCE = "byte_planes"


def pairs(nbytes: int) -> list[tuple[int, int]]:
    """The byte pairs ``(i, j)`` a product of ``nbytes``-byte integers sums, in the kernels' order
    (their shift ``i + j`` falling, Horner's order; within one, ``i`` rising):
    ``kernels/byte_planes.cu``'s ``bp_pair`` computes the same from a pair's index."""
    return [(i, t - i) for t in range(nbytes - 1, -1, -1) for i in range(t + 1)]


def segments(dtype) -> int:
    """How many byte pairs a product of ``dtype`` sums (``n (n + 1) / 2`` for ``n`` bytes)."""
    return len(pairs(np.dtype(dtype).itemsize))


def runs_per_segment(dtype, shape, device) -> int:
    """Runs of K each pair's product is cut into: as :func:`.wgmma.runs` would cut the pairs'
    products taken as a batch (deep K on few tiles), and for 64-bit results enough that no run is
    deeper than :data:`_EXACT_DEPTH`."""
    bt, m, n, k = shape
    per = wgmma.runs((bt * segments(dtype), m, n, k), device)
    if np.dtype(dtype).itemsize == 8:
        per = max(per, -(-k // _EXACT_DEPTH))
    return per


class Geometry(NamedTuple):
    """How a product runs: ``runs`` of K in all (1: by Horner's rule in the accumulators, no
    workspace), the bytes of K per byte pair (``seg``: in runs, padded to whole runs), a row of
    planes (``ld``: :func:`starts`), the tile width (``bn``)."""

    runs: int
    seg: int
    ld: int
    bn: int


def _whole(x: int, step: int) -> int:
    return -(-x // step) * step


def starts(nbytes: int, seg: int) -> tuple[list[int], int]:
    """Where each byte pair's segment starts in a row of planes (in :func:`pairs` order) and the
    row's length: the shifts' segments side by side, each shift padded to whole slices of K
    (``kernels/byte_planes.cu``'s split writes the same)."""
    at, out = 0, []
    for t in range(nbytes - 1, -1, -1):
        out += [at + i * seg for i in range(t + 1)]
        at += _whole((t + 1) * seg, _K_STEP)
    return out, at


def geometry(dtype, shape, device) -> Geometry:
    """The :class:`Geometry` of a product of ``dtype`` and ``shape`` on ``device``: by Horner's rule
    for 16- and 32-bit results whose K is not cut into runs; else in runs, one per pair or
    :func:`runs_per_segment` of them."""
    bt, m, n, k = shape
    nbytes = np.dtype(dtype).itemsize
    per = runs_per_segment(dtype, shape, device)
    if nbytes <= 4 and per == 1:
        seg = _whole(k, _SECTOR)  # each segment starts on a 32-byte sector for the split's stores
        return Geometry(1, seg, starts(nbytes, seg)[1], wgmma.width(shape, device))
    seg = _whole(k, _K_STEP * per)  # runs never straddle two segments
    runs = segments(dtype) * per
    return Geometry(runs, seg, segments(dtype) * seg, wgmma.width((bt * runs, m, n, seg // per), device))


def kernel_name(dtype, runs: int) -> str:
    """The ``wgmma`` kernel of a product of ``dtype`` cut into ``runs`` runs of K (1: by Horner's rule)."""
    return f"polymm_wgmma_planes{8 * np.dtype(dtype).itemsize}_nk" if runs == 1 else KERNEL


def min_work(dtype, device) -> int:
    """Multiply-adds per call (batch x M x N x K) from which byte planes serve a product of
    ``dtype`` on ``device``: ``byte-planes.min_work``, unless ``POLYMM_CUDA_PLANES_MIN_WORK=N``
    sets it (the proof runs take 0 with ``POLYMM_PREFER=byte-planes``: the suite's small products
    then run them too). Per call, not per matrix: what the planes add is launches and copies,
    which a batch shares (a batch of tiny matrices the cost model leaves to the SIMT kernels)."""
    forced = os.environ.get("POLYMM_CUDA_PLANES_MIN_WORK")
    return int(forced) if forced else settings_for(device)("byte-planes", "min_work")[np.dtype(dtype).name]


def refusal(dtype, shape, device) -> str | None:
    """Why byte planes should not serve this product, or None."""
    if np.dtype(dtype).name not in DTYPES:
        return f"byte planes serve {', '.join(DTYPES)}"
    if device.cc != wgmma.CC:
        return f"compute capability {device.cc / 10:.1f}: the uint8 wgmma product runs on 9.0 only"
    bt, m, n, k = shape
    if bt > GRID_ROWS:
        return "a batch beyond one grid"
    least = min_work(dtype, device)
    if bt * m * n * k < least:
        return f"{bt * m * n * k} multiply-adds < byte-planes.min_work = {least}"
    few = settings_for(device)("tensor-cores", "few_columns")
    if min(m, n) <= few:
        return f"min(M, N) = {min(m, n)} <= {few}: memory-bound, the SIMT matrix-vector paths"
    runs, seg, ld, _ = geometry(dtype, shape, device)
    if -(-seg // _K_STEP) > GRID_ROWS:
        return f"K = {k} beyond the split kernel's grid ({GRID_ROWS} blocks of {_K_STEP} along K)"
    most = settings_for(device)("byte-planes", "workspace_bytes")
    need = runs * bt * m * n * 4 if runs > 1 else 0  # the runs' int32 partial sums
    if need > most:
        return f"{need} bytes of partial sums > byte-planes.workspace_bytes = {most}"
    most = settings_for(device)("byte-planes", "scratch_bytes")
    need += (bt * m + bt * n) * ld  # the planes (at most; a broadcast operand has one matrix)
    if need > most:
        return f"{need} bytes of planes and partial sums > byte-planes.scratch_bytes = {most}"
    return None


def launch(dtype, shape, a, b, device, plan: Geometry) -> dict:
    """The planner's description of the product in ``plan``'s geometry (``a``/``b``: element
    offset and strides of each operand): scratch slots 3 (A's planes) and 4 (B's planes, B^T rows), the two splits before,
    the uint8 ``wgmma`` product over K' = a row of planes (``depth``: ``plan.ld``); in runs, also slot 5 (the
    partial sums, ``into``) and the sum after."""
    bt, m, n, k = shape
    nbytes = np.dtype(dtype).itemsize
    count = segments(dtype)
    runs, seg, ld, bn = plan
    (a_off, sa), (b_off, sb) = a, b
    ea, eb = (bt if bt > 1 and s[0] != 0 else 1 for s in (sa, sb))  # matrices per operand
    elements = bt * m * n
    scratch = [ea * m * ld, eb * n * ld]

    def split(src, rows, off, strides, e, side):
        s_batch, s_row, s_k = strides
        values = dict(R=rows, KK=k, side=side, x_off=off, x_sb=s_batch if e > 1 else 0, x_sr=s_row)
        values.update(x_sk=s_k, ld=ld, seg=seg)
        grid = (-(-rows // 32), -(-seg // _K_STEP), e)
        buffers = {"X": src, "P": 3 + side}
        return wgmma.helper_launch(
            f"polymm_byte_planes_{nbytes}", BYTE_PLANES, values, buffers, grid, (32, 8, 1), _SOURCE
        )

    before = [split(0, m, a_off, sa, ea, 0), split(1, n, b_off, (sb[0], sb[2], sb[1]), eb, 1)]
    a_op = (3, 0, m * ld if ea > 1 else 0, ld, 1)
    b_op = (4, 0, n * ld if eb > 1 else 0, 1, ld)  # as B: (batch, K, N) strides
    a_map = wgmma.operand_map(ld, m, ld, a_op[2], 1, (wgmma.ROW, wgmma.BM, 1), ea)
    b_map = wgmma.operand_map(ld, n, ld, b_op[2], 1, (wgmma.ROW, bn, 1), eb)
    ring = wgmma.stages_for(device, bn)
    tiles = bt * -(-m // wgmma.BM) * -(-n // bn)
    product = {
        "source": f"wgmma-{bn}",
        "options": (*wgmma.options(bn, ring), "-DWG_PLANES=1"),
        "grid": (min(tiles, device.compute_units), 1, 1),
        "block": (wgmma.THREADS, 1, 1),
        "smem": wgmma.smem_bytes(bn, ring),
        "abi": WGMMA,
        "values": {"splits": seg},  # Horner's rule: the bytes of K per byte pair
        "tma": ((3, a_map), (4, b_map)),
        "operands": (a_op, b_op),
        "depth": ld,
        "scratch": scratch,
        "before": before,
    }
    if runs == 1:  # Horner's rule: C straight from the accumulators
        return product
    values = dict(count=elements, S=count, per=runs // count)
    groups = min(-(-elements // (4 * 256)), 4 * device.compute_units * 8)  # four elements per thread
    summed = f"polymm_planes_sum_{nbytes}"
    after = [wgmma.helper_launch(summed, PLANES_SUM, values, {"W": 5, "C": 2}, (groups, 1, 1), (256, 1, 1), _SOURCE)]
    return product | {
        "options": (*wgmma.options(bn, ring), "-DWG_SPLIT=1"),
        "grid": (min(tiles * runs, device.compute_units), 1, 1),
        "values": {"splits": runs},
        "scratch": [*scratch, runs * elements * 4],
        "into": 5,
        "after": after,
    }
