"""CUDA's own kernel families, registered with the shared planner (:mod:`polymm.kernels.families`).

Each answers a product with a candidate -- the kernel it would launch and the
:class:`~polymm.kernels.cost.Work` that costs -- or the rule the product breaks; the planner ranks
them against the shared SIMT candidate with the one cost model, once per plan:

- ``wgmma`` (Hopper): float16, bfloat16, int8, uint8 fed by the copy engine (:mod:`.wgmma`);
- ``mma-sync`` (Ampere on): the same dtypes in 128-row tiles (``kernels/tensorcore.cu``);
- ``relayout``: those kernels on operands copied first into the layout they read (:func:`.tensorcore.repack`);
- ``dmma``: float64 and complex128 (as one float64 product) on the FP64 tensor cores;
- ``tf32``: float32 in the ``"tf32"`` and ``"tf32x3"`` precision modes (Hopper, ``wgmma``);
- ``byte-planes``: 16-, 32- and 64-bit integers as sums of uint8 products of their bytes (Hopper,
  ``wgmma``: :mod:`.planes`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from polymm.kernels.cost import Work
from polymm.kernels.devices import settings_for
from polymm.kernels.families import Candidate, Choice, Family, Problem, Refusal, register

from . import planes
from . import tensorcore as tc
from . import wgmma

__all__ = ["FAMILIES"]


def _tiles(shape, bm: int, bn: int) -> int:
    bt, m, n, _ = shape
    return bt * -(-m // bm) * -(-n // bn)


def _work(rate: str, p: Problem, shape, bm: int, bn: int, external=None, splits: int = 1) -> Work:
    """A tensor-core kernel's work on ``shape`` (its own: swapped or real) in ``bm`` x ``bn``
    tiles: padded multiply-adds, the operands and C moved, its scratch written and read back, its
    launches."""
    bt, m, n, k = shape
    tiles = _tiles(shape, bm, bn)
    size = np.dtype(p.dtype).itemsize
    external = external or {}
    # split-K through the planner (dmma): its partial sums and their sum are not in ``external``
    planned = splits > 1 and "into" not in external
    launches = 1 + len(external.get("before", ())) + len(external.get("after", ())) + planned
    c_bytes = p.batch * p.M * p.N * size
    return Work(
        rate=rate,
        macs=tiles * bm * bn * k,
        groups=tiles * splits,
        tile=(bm, bn),
        bytes=(p.batch * p.M * p.K + p.batch * p.K * p.N) * size
        + c_bytes * (2 * splits + 1 if planned else 1)
        + 2 * sum(external.get("scratch", ())),
        launches=launches,
    )


def _mma_kinds(p: Problem, wgmma_rules: bool = False) -> Refusal | None:
    """The rules every ``mma.sync`` product of p's dtype and shape follows (``wgmma_rules``: those
    of ``wgmma``, which takes any K and cuts deep products into runs of K)."""
    why = tc.shape_rule(p.dtype, p.device, p.shape, wgmma_rules)
    return Refusal("tensor cores", why) if why is not None else None


def _pointers(p: Problem) -> tuple[int, int]:
    size = p.dtype.itemsize
    return p.a[0] * size, p.b[0] * size


def _wgmma(p: Problem) -> Candidate | Refusal:
    if p.device.cc != wgmma.CC:
        return Refusal("wgmma", f"compute capability {p.device.cc / 10:.1f}: wgmma runs on 9.0 only")
    refused = _mma_kinds(p, wgmma_rules=True)
    if refused is not None:
        return Refusal("wgmma", refused.reason)
    name, why = wgmma.choose(p.dtype, p.device.cc, p.shape, p.a_strides, p.b_strides, *_pointers(p))
    if name is None:
        return Refusal("wgmma", why)
    layout = name.rsplit("_", 1)[1]
    external = wgmma.external_launch(p.shape, p.a, p.b, layout, p.dtype.itemsize, p.device)
    swapped = layout == "kn" and p.dtype.itemsize == 1
    shape = (p.batch, p.N, p.M, p.K) if swapped else p.shape
    external, runs, why = _split_k(external, shape, p, why)
    bn, bm = wgmma.width(shape, p.device), external["tile_rows"]
    if bm != wgmma.BM:
        why += f"; {bm}-row tiles, one per consumer warp group (M = {shape[1]})"
    choice = Choice(name, None, f"tensor cores (wgmma, copy engine): {why}", external=external)
    work = _work(f"wgmma:{p.dtype.name}", p, shape, bm, bn, external=external, splits=runs)
    return Candidate("wgmma", choice, work)


def _split_k(external: dict, shape, p: Problem, why: str) -> tuple[dict, int, str]:
    """A ``wgmma`` launch on tiles of ``shape`` cut into runs of K where :func:`.wgmma.runs` says
    (deep K on few tiles), with the reason said; its runs."""
    runs = wgmma.runs(shape, p.device)
    if runs == 1:
        return external, 1, why
    tiles = _tiles(shape, wgmma.BM, wgmma.width(shape, p.device))
    external = wgmma.split_k(external, shape, runs, p.dtype.name, p.device)
    return external, runs, f"{why}; deep K = {p.K} on {tiles} tiles: {runs} runs of K, added in order"


def _mma_sync(p: Problem) -> Candidate | Refusal:
    refused = _mma_kinds(p)
    if refused is not None:
        return Refusal("mma-sync", refused.reason)
    name, why = tc.layout_choice(p.dtype, p.shape, p.a_strides, p.b_strides, *_pointers(p))
    if name is None:
        return Refusal("mma-sync", why)
    params = tc.mma_sync_params(p.device)
    external = tc.external_launch(params, p.shape)
    choice = Choice(name, None, f"tensor cores (mma.sync): {why}", external=external)
    return Candidate("mma-sync", choice, _work(f"mma:{p.dtype.name}", p, p.shape, tc.BM, params.bn))


def _relayout(p: Problem) -> Candidate | Refusal:
    """The tensor cores on copies of the operands (as :func:`.tensorcore.repack` makes them: A
    row-major, and B^T row-major for the 16- and 8-bit kernels, B row-major for the FP64 ones),
    where no kernel reads them as they lie (or, for FP64, reads them well) but one reads the
    copies; from ``relayout.work`` multiply-adds on."""
    if p.dtype.name in tc.FP64_DTYPES:
        return _relayout_fp64(p)
    refused = _mma_kinds(p)
    if refused is not None:
        return Refusal("relayout", refused.reason)
    pointers = _pointers(p)
    if wgmma.choose(p.dtype, p.device.cc, p.shape, p.a_strides, p.b_strides, *pointers)[0] is not None:
        return Refusal("relayout", "wgmma reads the operands, or copies those it cannot read, itself")
    if tc.layout_choice(p.dtype, p.shape, p.a_strides, p.b_strides, *pointers)[0] is not None:
        return Refusal("relayout", "mma.sync reads the operands as they lie")
    small = _too_small_to_copy(p)
    if small is not None:
        return small
    sa, sb = p.a_strides, p.b_strides
    a_copied, b_copied = sa[2] != 1, sb[1] != 1  # repack keeps an operand already K-contiguous
    if a_copied:
        sa, pointers = (p.M * p.K if sa[0] else 0, p.K, 1), (0, pointers[1])
    if b_copied:
        sb, pointers = (p.K * p.N if sb[0] else 0, 1, p.K), (pointers[0], 0)
    read = wgmma.choose(p.dtype, p.device.cc, p.shape, sa, sb, *pointers)
    if read[0] is None:
        read = tc.layout_choice(p.dtype, p.shape, sa, sb, *pointers)
    if read[0] is None:
        return Refusal("relayout", f"no kernel would read the copies either: {read[1]}")
    if p.device.cc == wgmma.CC:
        rate, bn = f"wgmma:{p.dtype.name}", wgmma.width(p.shape, p.device)
    else:
        rate, bn = f"mma:{p.dtype.name}", tc.mma_sync_params(p.device).bn
    work = _with_copies(p, _work(rate, p, p.shape, tc.BM, bn), a_copied, b_copied)
    choice = Choice("relayout", None, "tensor cores on operands copied into the layout their kernels read")
    return Candidate("relayout", choice, work, relayout=True)


def _relayout_fp64(p: Problem) -> Candidate | Refusal:
    """float64 and complex128 on the FP64 tensor cores, an operand with no unit stride on its two
    matrix axes (:func:`.tensorcore.scattered`, which :func:`_dmma` refuses) copied row-major first."""
    if not tc.dmma_in_auto(p.device):
        return Refusal("relayout", "the FP64 tensor cores are off on this device (dmma.in_auto, POLYMM_CUDA_DMMA)")
    sa, sb = p.a_strides, p.b_strides
    if not (tc.scattered(sa) or tc.scattered(sb)):
        return Refusal("relayout", "the FP64 tensor cores read these operands as they lie")
    small = _too_small_to_copy(p)
    if small is not None:
        return small
    a_copied, b_copied = sa[2] != 1, sb[2] != 1  # repack keeps an operand already row-major
    a = (0, (p.M * p.K if sa[0] else 0, p.K, 1)) if a_copied else p.a
    b = (0, (p.K * p.N if sb[0] else 0, p.N, 1)) if b_copied else p.b
    copied = _dmma(p.replace(a=a, b=b))
    if isinstance(copied, Refusal):
        return Refusal("relayout", f"the FP64 tensor cores would not take the copies either: {copied.reason}")
    work = _with_copies(p, copied.work, a_copied, b_copied)
    choice = Choice("relayout", None, "FP64 tensor cores on operands copied row-major (no unit stride as they lie)")
    return Candidate("relayout", choice, work, relayout=True)


def _too_small_to_copy(p: Problem) -> Refusal | None:
    """Why copying ``p``'s operands first does not pay: under ``relayout.work`` multiply-adds per matrix."""
    work = settings_for(p.device)("relayout", "work")
    if p.M * p.N * p.K < work:
        return Refusal("relayout", f"{p.M * p.N * p.K} multiply-adds per matrix < relayout.work = {work}")
    return None


def _with_copies(p: Problem, work: Work, a_copied: bool, b_copied: bool) -> Work:
    """``work`` on the copies, with the copies themselves: a launch each, their bytes read and written."""
    copies = p.dtype.itemsize * (p.batch * p.M * p.K * a_copied + p.batch * p.K * p.N * b_copied)
    return dataclasses.replace(work, launches=work.launches + a_copied + b_copied, bytes=work.bytes + 2 * copies)


def _dmma(p: Problem) -> Candidate | Refusal:
    """float64 and complex128 on the FP64 tensor cores (:func:`.tensorcore.choose_dmma`)."""
    if p.dtype.name not in tc.FP64_DTYPES:
        return Refusal("dmma", "the FP64 tensor cores serve float64 (and complex128 as float64)")
    if not tc.dmma_in_auto(p.device):
        return Refusal("dmma", "off on this device (dmma.in_auto, POLYMM_CUDA_DMMA)")
    if tc.scattered(p.a_strides) or tc.scattered(p.b_strides):
        return Refusal("dmma", tc.SCATTERED_WHY)
    real = tc.fp64_shape(p.dtype, p.shape)
    splits = tc.dmma_splits(real, p.device)
    name, why = tc.choose_dmma(p.dtype, p.device, p.shape, p.a_strides, p.b_strides, splits)
    if name is None:
        return Refusal("dmma", why)
    if p.dtype.name == "complex128":
        wide = tc.complex_wide_splits(p.device, p.shape, p.a_strides, p.b_strides, splits)
        if wide is not None:
            splits, name, why = wide
    bt, m, n, k = p.shape
    if splits > 1:
        why += f", K = {k} on few tiles: {splits} slices of K, added in order"
    external = tc.dmma_launch(name, p.device, (bt * splits, m, n, k), p.a, p.b)
    mma = tc.DMMA_SHAPE_NAMES[int(external["options"][0].split("=")[1])]
    copies = "16-byte" if {"-DDM_VA=2", "-DDM_VB=2"} <= set(external["options"]) else "8-byte where unaligned"
    wide = any(o.startswith("-DDM_WN=") for o in external["options"])
    bn = settings_for(p.device)("dmma", "wide_tile")["bn"] if wide else tc.DMMA_BN
    why = f"FP64 tensor cores (mma.sync {mma}, {tc.DMMA_BM} x {bn} tiles, {copies} copies): {why}"
    choice = Choice(name, None, why, external=external, splits=splits)
    work = _work("dmma:float64", p, real, tc.DMMA_BM, bn, external, splits)
    return Candidate("dmma", choice, work)


def _tf32(p: Problem) -> Candidate | Refusal:
    """float32 in the ``"tf32"``/``"tf32x3"`` precision modes (:func:`.wgmma.tf32_launch`)."""
    if p.dtype.name != "float32":
        return Refusal("tf32", "TF32 products take float32")
    mode = p.precision
    why = tc.tf32_rule(mode, p.device, p.shape)
    if why is not None:
        return Refusal("tf32", why)
    layout, external = wgmma.tf32_launch(mode, p.shape, p.a, p.b, p.device)
    if mode == "tf32x3":
        what = "split into hi and lo parts, three products"
    elif layout == "kn":
        what = "one product, C^T = B^T A^T with B^T from registers (B is N-contiguous)"
    else:
        what = "one product"
    if mode == "tf32":
        copied = [x for x, slot in (("A", 0), ("B", 1)) if any(h["buffers"]["X"] == slot for h in external["before"])]
        if copied:
            what += f"; {' and '.join(copied)} copied K-major, rounded to TF32, rows on tf32.row_align boundaries"
    shape = (p.batch, p.N, p.M, p.K) if layout == "kn" else p.shape
    external, runs, what = _split_k(external, shape, p, what)
    reason = f"TF32 tensor cores (wgmma), precision {mode!r}: {what}"
    choice = Choice(wgmma.kernel_name(mode, layout), None, reason, external=external)
    work = _work(f"wgmma:{mode}", p, shape, wgmma.BM, wgmma.width(shape, p.device), external=external, splits=runs)
    return Candidate("tf32", choice, work)


def _byte_planes(p: Problem) -> Candidate | Refusal:
    """16-, 32- and 64-bit integers on the uint8 ``wgmma`` product of their byte planes, summed
    by Horner's rule in the accumulators or in runs added after (:mod:`.planes`)."""
    why = planes.refusal(p.dtype, p.shape, p.device)
    if why is not None:
        return Refusal("byte-planes", why)
    plan = planes.geometry(p.dtype, p.shape, p.device)
    external = planes.launch(p.dtype, p.shape, p.a, p.b, p.device, plan)
    pairs, runs, bn = planes.segments(p.dtype), plan.runs, plan.bn
    if runs == 1:
        how = "by Horner's rule in the accumulators"
    else:
        each = f"{runs // pairs} runs of K" if runs > pairs else "a run of K"
        how = f"in {each} per pair, shifted and added after"
    why = (
        f"integer tensor cores (wgmma uint8): {p.dtype.itemsize} byte planes per operand, "
        f"{pairs} products of byte pairs, {how}"
    )
    choice = Choice(planes.kernel_name(p.dtype, runs), None, why, external=external)
    tiles = _tiles((p.batch, p.M, p.N, 0), wgmma.BM, bn)
    copies = sum(external["scratch"][:2])  # the planes: written by the splits, read by the product
    sums = sum(external["scratch"][2:])  # the runs' partial sums: written by it, read by the sum
    size = p.dtype.itemsize
    operands, c = size * p.batch * p.K * (p.M + p.N), size * p.batch * p.M * p.N
    work = Work(
        rate="wgmma:uint8",
        macs=tiles * wgmma.BM * bn * external["depth"],
        groups=tiles * runs,
        tile=(wgmma.BM, bn),
        bytes=copies + (sums if sums else c),
        serial=operands + copies + (sums + c if sums else 0),
        launches=3 + bool(sums),
    )
    return Candidate("byte-planes", choice, work)


def _cuda(name: str, about: str, propose) -> Family:
    return Family(name, about, propose, kinds=("gpu",), dialects=("cuda",), shared=False)


FAMILIES = (
    _cuda("wgmma", "float16, bfloat16, int8, uint8 on Hopper's wgmma, read by the copy engine", _wgmma),
    _cuda("mma-sync", "float16, bfloat16, int8, uint8 on mma.sync in 128-row tiles (sm_80 on)", _mma_sync),
    _cuda("relayout", "the tensor cores on operands copied into the layout they read", _relayout),
    _cuda("dmma", "float64 and complex128 (as float64) on the FP64 tensor cores", _dmma),
    _cuda("tf32", "float32 in precision 'tf32' and 'tf32x3' on wgmma", _tf32),
    _cuda("byte-planes", "int16 to uint64 as uint8 products of their bytes on wgmma", _byte_planes),
)
for _family in FAMILIES:
    register(_family)
