"""Hopper's path for float16, bfloat16, int8, uint8 and TF32: ``kernels/wgmma.cu`` (``wgmma`` fed by
the copy engine).

What this module decides and builds, and nothing else:

- :func:`choose`: whether the kernel reads a call's operands as they lie (the copy engine needs
  16-byte aligned bases and row strides, and unit stride along K for A, along N or K for B; an
  8-bit B contiguous along N whose rows are not 16-byte aligned is copied K-major first, by
  :func:`external_launch`'s plan);
- :func:`tf32_launch`: float32 products in the ``"tf32"`` and ``"tf32x3"`` precision modes:
  the operands split into TF32 parts where needed (``kernels/tf32_split.cu``), one product
  (three for ``tf32x3``), and the repair of rows and columns that hold Inf or NaN;
- :func:`source`: the kernel text, after the ``wgmma.mma_async`` wrappers it calls (128
  accumulator registers each: rendered from a template rather than written by hand);
- :func:`tensor_maps`: the ``CUtensorMap`` a launch takes by value, encoded by the driver's
  ``cuTensorMapEncodeTiled`` (through ``ctypes``: the one driver call CuPy does not wrap).

It runs only on compute capability 9.0 (``sm_90a`` code runs on no other chip); elsewhere
:mod:`polymm_cuda.tensorcore` serves (``mma.sync``).
"""

from __future__ import annotations

import ctypes
from functools import lru_cache
from string import Template

import numpy as np

from polymm.kernels import GRID_ROWS
from polymm.kernels.devices import settings_for

from .abi import RESTRIDE, TF32_FIXUP, TF32_SPLIT, TRANSPOSE, WGMMA, WGMMA_SUM
from .sources import KERNELS
from .sources import source as _file_source
from .transpose import transpose_grid

__all__ = [
    "CC",
    "TF32_PRODUCTS",
    "choose",
    "stages_for",
    "width",
    "tile_rows",
    "runs",
    "split_k",
    "external_launch",
    "tf32_launch",
    "source",
    "options",
    "tensor_maps",
    "operand_map",
    "helper_launch",
]

#: The only compute capability the ``sm_90a`` instructions run on.
CC = 90
# kernels/wgmma.cu's WG_BM, bytes of K per pipeline slice, and block (three warp groups). The tile
# widths (-DWG_BN) and stages (-DWG_STAGES) are tuning: the device database's ``wgmma`` family.
BM, ROW, THREADS = 128, 128, 384
#: The tiles' rows (``-DWG_BM``) of products with at most this many: :func:`tile_rows`.
SHORT_BM = 64
#: Dynamic shared memory a block of compute capability 9.0 may opt into.
MOST_SMEM = 232448


def stages_for(device, bn: int, bm: int = BM) -> int:
    """Pipeline stages of the ``bn``-wide tiles on ``device`` (``wgmma.stages``); for 64-row
    tiles, whose two rings (one per consumer warp group) each want that depth, twice as many
    where they fit in shared memory (an even count: the rings share it)."""
    stages = settings_for(device)("wgmma", "stages")[str(bn)]
    if bm == BM:
        return stages
    fit = (MOST_SMEM - 1024) // ((bm + bn) * ROW + 16)
    return max(2, min(2 * stages, fit) // 2 * 2)


def smem_bytes(bn: int, stages: int, bm: int = BM) -> int:
    """Dynamic shared memory: the ring of stages, 1024 bytes to align it, its barriers."""
    return stages * (bm + bn) * ROW + 1024 + 16 * stages


def tile_rows(shape, device, bn: int) -> int:
    """The rows of the ``bn``-wide tiles of a product of ``shape`` (the kernel's own: B, M, N, K):
    64 where M is at most 64, K is not cut into runs and each consumer warp group's ring holds
    ``wgmma.short_ring`` stages, so that each consumer computes tiles of its own (a batch of 64 x 64
    products: two tiles at a time on an SM, not one whose second 64 rows lie outside the matrix);
    else 128. 256-wide tiles leave each ring two stages: 128 rows."""
    if shape[1] > SHORT_BM or runs(shape, device) > 1:
        return BM
    deep = stages_for(device, bn, SHORT_BM) // 2 >= settings_for(device)("wgmma", "short_ring")
    return SHORT_BM if deep else BM


#: dtype -> the PTX type of its ``wgmma``; only the 16-bit ones have the transpose bit (B N-major).
_TYPES = {"float16": "f16", "bfloat16": "bf16", "int8": "s8", "uint8": "u8"}
_N_MAJOR = ("float16", "bfloat16")
#: precision mode -> products of TF32 parts per output (``kernels/wgmma.cu``'s SEGMENTS).
TF32_PRODUCTS = {"tf32": 1, "tf32x3": 3}
_ALIGN = 16  # bytes: the copy engine's base address and stride granularity


def kernel_name(dtype_name: str, layout: str) -> str:
    return f"polymm_wgmma_{dtype_name}_{layout}"


def choose(dtype: np.dtype, cc: int, shape, sa, sb, a_ptr: int, b_ptr: int) -> tuple[str | None, str]:
    """``(kernel name, why)`` for this call, or None and the rule it breaks (the caller has
    already checked :func:`polymm_cuda.tensorcore.shape_rule`). Every layout is served: an operand
    the copy engine cannot read where it lies is copied K-major first (:func:`external_launch`)."""
    if dtype.name not in _TYPES:
        return None, f"wgmma serves {', '.join(_TYPES)}"
    if cc != CC:
        return None, f"sm_90a code runs on compute capability 9.0 only (this is {cc / 10:.1f})"
    if shape[0] > GRID_ROWS:
        return None, "a batch beyond one grid"
    if min(sa[0], sb[0]) < 0:
        return None, "a negative batch stride"
    isz = dtype.itemsize
    a_how = "" if _in_place(sa[1], sa[2], sa[0], a_ptr, isz) else "; A copied K-major first"
    if dtype.name in _N_MAJOR and _in_place(sb[1], sb[2], sb[0], b_ptr, isz):
        return kernel_name(dtype.name, "kn"), "B is N-contiguous" + a_how
    if _in_place(sb[2], sb[1], sb[0], b_ptr, isz):
        return kernel_name(dtype.name, "nk"), "B is K-contiguous (B^T row-major)" + a_how
    if _in_place(sb[1], sb[2], sb[0], b_ptr, isz):  # the 8-bit types: read as stored, through registers
        return kernel_name(dtype.name, "kn"), "B is N-contiguous: read through registers, as C^T = B^T A^T" + a_how
    if dtype.name in _N_MAJOR and abs(sb[2]) <= abs(sb[1]):  # N the nearer axis: copy along it
        return kernel_name(dtype.name, "kn"), "B copied N-major first" + a_how
    return kernel_name(dtype.name, "nk"), "B copied K-major first" + a_how


@lru_cache(maxsize=1)
def _template() -> dict[str, Template]:
    """The sections of ``kernels/wgmma_mma.cuh.in`` (the wrappers' CUDA text), by name."""
    sections: dict[str, str] = {}
    name = None
    for line in (KERNELS / "wgmma_mma.cuh.in").read_text().splitlines(keepends=True):
        if line.startswith("//@ "):
            name = line[4:].strip()
            sections[name] = ""
        else:
            sections[name] += line
    return {name: Template(text) for name, text in sections.items()}


def _wrapper(form: str, ptx_type: str, bn: int, tnsp_b: int = 0) -> str:
    """d += A B for one 64 x bn x (32 bytes of K) step, A read from shared memory (``form``
    "shared": ``wg_mma_<type>_<tnsp_b>``) or from four registers per thread ("registers":
    ``wg_mma_<type>_rs``): k16 for the 2-byte types; k8 for TF32 and k32 for the 8-bit integers
    (int32 accumulators), which have no transpose (nor, for integers, scale) operands."""
    sections = _template()

    def joined(piece: str, sep: str, values) -> str:
        return sep.join(sections[piece].substitute(**v).rstrip("\n") for v in values)

    integer = ptx_type in ("s8", "u8")
    count = bn // 2  # accumulators, operands %0 .. %count-1; then A, B and the scale-d flag
    a, b = count, count + (4 if form == "registers" else 1)
    immediates = () if integer else (1, 1) if ptx_type == "tf32" else (1, 1, 0, tnsp_b)
    return sections[form].substitute(
        ptx=ptx_type,
        tnsp_b=tnsp_b,
        acc_type="int" if integer else "float",
        count=count,
        bn=bn,
        k=32 if integer else 8 if ptx_type == "tf32" else 16,
        acc="s32" if integer else "f32",
        regs=joined("register", ", ", ({"i": i} for i in range(count))),
        a=a,
        a1=a + 1,
        a2=a + 2,
        a3=a + 3,
        b=b,
        one=b + 1,
        imms=joined("immediate", "", ({"value": x} for x in immediates)),
        outs=joined("accumulator", ", ", ({"constraint": "r" if integer else "f", "i": i} for i in range(count))),
    )


@lru_cache(maxsize=None)
def source(bn: int) -> str:
    """The kernel text for tiles ``bn`` wide: the ``wgmma.mma_async`` wrappers rendered from
    ``kernels/wgmma_mma.cuh.in``, then the PTX helpers and ``kernels/wgmma.cu``."""
    wrappers = "".join(_wrapper("shared", _TYPES[t], bn, tn) for t in _N_MAJOR for tn in (0, 1))
    wrappers += "".join(_wrapper("shared", t, bn) + _wrapper("registers", t, bn) for t in ("tf32", "s8", "u8"))
    return wrappers + _file_source("wgmma")


def options(bn: int, stages: int, bm: int = BM) -> tuple[str, ...]:
    return ("-arch=sm_90a", f"-DWG_BN={bn}", f"-DWG_STAGES={stages}") + ((f"-DWG_BM={bm}",) if bm != BM else ())


def width(shape, device) -> int:
    """The tile width for a product on ``device``: the widest of ``wgmma.widths``, unless a
    narrower one cuts the columns its busiest SM computes (tiles per SM, rounded up, times the
    width) below ``wgmma.narrower_below`` of the wider's (a narrower tile reads more per
    multiply-add). Not :func:`polymm.kernels.planner.wave_is_full` (does one wave fill the SMs):
    this compares two tilings. With 0.9 on 132 SMs: 2048 squares: 128 tiles of 256 or 256 of 128,
    a tie: 256; 8192 squares: 63 tiles of 64 per SM against 16 of 256, 2% fewer columns: 256;
    1024 squares: 64; a 256-wide skinny product of 8192 rows: 64 tiles of 256 leave half the SMs
    idle: 128. A product split along K (:func:`runs`) takes the widest: its runs fill the SMs."""
    settings = settings_for(device)
    sms, narrower_below = device.compute_units, settings("wgmma", "narrower_below")
    bt, m, n, _ = shape

    def busiest(bn: int) -> int:
        return -(-(bt * -(-m // BM) * -(-n // bn)) // sms) * bn

    widths = settings("wgmma", "widths")
    best = widths[0]
    if runs(shape, device) > 1:
        return best
    for bn in widths[1:]:
        if busiest(bn) < narrower_below * busiest(best):
            best = bn
    return best


def runs(shape, device) -> int:
    """Runs of K for split-K on ``device`` (1: none): a deep product (K at least
    ``split-k.deep_k`` x max(M, N)) whose widest tiles fill less than one wave of SMs is cut along
    K into as many runs as fill it, each at least ``wgmma.run_min`` deep, their partial sums at
    most ``split-k.slices_bytes``. The runs take the widest tile (the narrower ones exist to fill
    the SMs, which the runs do)."""
    settings = settings_for(device)
    bt, m, n, k = shape
    tiles = bt * -(-m // BM) * -(-n // settings("wgmma", "widths")[0])
    if k < settings("split-k", "deep_k") * max(m, n) or tiles >= device.compute_units:
        return 1
    most = min(device.compute_units // tiles, k // settings("wgmma", "run_min"))
    most = min(most, settings("split-k", "slices_bytes") // (4 * bt * m * n))
    return most if most >= 2 else 1


def split_k(external: dict, shape, count: int, dtype_name: str, device) -> dict:
    """``external`` (a launch of :func:`external_launch` or :func:`tf32_launch` on tiles of
    ``shape``, the kernel's own: swapped where it swaps) cut into ``count`` runs of K: the kernel
    built with ``WG_SPLIT`` writes the runs' partial sums (float32, int32 for the 8-bit types)
    into a workspace (the next scratch slot, ``into``), and ``kernels/wgmma_sum.cu`` adds them in
    run order into C before any other ``after`` launch (the ``"tf32x3"`` repair of Inf and NaN)."""
    bt, m, n, _ = shape
    scratch = list(external.get("scratch", ()))
    into = 3 + len(scratch)
    elements = bt * m * n
    scratch.append(count * elements * 4)
    values = dict(count=elements, S=count)
    total = -(-elements // 256)
    summed = helper_launch(
        f"polymm_wgmma_sum_{dtype_name}",
        WGMMA_SUM,
        values,
        {"W": into, "C": 2},
        (min(total, 4 * device.compute_units * 8), 1, 1),
        (256, 1, 1),
        source="wgmma_sum",
    )
    tiles = bt * -(-m // BM) * -(-n // width(shape, device))
    return {
        **external,
        "options": (*external["options"], "-DWG_SPLIT=1"),
        "grid": (min(tiles * count, device.compute_units), 1, 1),
        "values": {"splits": count},
        "scratch": scratch,
        "into": into,
        "after": [summed, *external.get("after", ())],
    }


def _map(dims, strides, box, isz: int):
    """One tensor map's geometry, innermost first: dims in elements, the byte strides of the two
    outer dims, the box in elements and the element size."""
    return tuple(dims), tuple(strides), tuple(box), isz


def operand_map(inner, outer, s_outer, s_batch, isz, box, batch):
    """The map of an operand read in place: ``inner`` (K, or N) contiguous, ``outer`` rows
    ``s_outer`` elements apart, ``batch`` matrices ``s_batch`` apart (one matrix when 1; its
    third stride is then any legal value)."""
    stride_batch = s_batch * isz if batch > 1 else -(-outer * s_outer * isz // _ALIGN) * _ALIGN
    return _map((inner, outer, batch), (s_outer * isz, max(stride_batch, _ALIGN)), box, isz)


def _geometry(shape, bn: int, device, bm: int = BM) -> dict:
    """Launch geometry: persistent blocks, at most one per SM, over the tiles of every batch entry
    (the kernel takes the batch count as its last argument: :data:`polymm_cuda.abi.WGMMA`), in
    tiles of ``bm`` rows (``tile_rows``)."""
    bt, m, n, _ = shape
    ring = stages_for(device, bn, bm)
    return {
        "source": f"wgmma-{bn}",
        "options": options(bn, ring, bm),
        "grid": (min(bt * -(-m // bm) * -(-n // bn), device.compute_units), 1, 1),
        "block": (THREADS, 1, 1),
        "smem": smem_bytes(bn, ring, bm),
        "abi": WGMMA,
        "values": {"splits": 1},
        "tile_rows": bm,
    }


def external_launch(shape, a, b, layout: str, isz: int, device) -> dict:
    """The planner's description of one launch on ``device``: a persistent grid (at most one block
    per SM), block, shared memory, and the two tensor maps (``tma``: per map, the buffer slot it
    describes and its geometry, see :func:`_map`), which the backend encodes per call with the
    buffers' addresses (``a``/``b``: element offset from a 16-byte aligned base, strides).

    An operand the copy engine cannot read where it lies (:func:`_in_place`: rows not 16-byte
    aligned, as in any product whose K or N is not a multiple of 16 bytes; contiguous along the
    wrong axis; no unit stride at all) is first copied into scratch, rows padded to 16 bytes (the
    padding is never read: the map's K ends at K), by ``kernels/transpose.cu`` (a ``before``
    launch): A K-major; B K-major for ``"nk"`` and, for the 16-bit types, N-major for ``"kn"``,
    which :func:`choose` picks where N is B's nearer axis (its rows reversed or stepped: copied
    along N, the reads run along the rows instead of one element per lane N apart). The copy is
    the tiled transpose where the source's rows run across the copy's (A along M, B along the
    other axis), K forwards or backwards; the strided copy otherwise, in 16-byte words where the
    rows have unit stride and whole words. An N-contiguous B of an 8-bit type is read as stored
    by the kernel's swapped form (tiles of C^T = B^T A^T: B^T's fragments transposed in
    registers, A as the shared operand)."""
    bt, m, n, k = shape
    (a_off, sa), (b_off, sb) = a, b
    ea, eb = (bt if bt > 1 and s[0] != 0 else 1 for s in (sa, sb))  # matrices per operand
    scratch, before = [], []

    def copied(src, rows, cols, off, strides, e):
        """The next scratch slot := ``rows`` rows of ``cols`` elements of operand ``src``
        (``strides``: batch, row, column), rows padded to 16 bytes; returns the slot, its batch
        stride and its row stride."""
        ld = -(-cols * isz // _ALIGN) * _ALIGN // isz
        slot = 3 + len(scratch)
        scratch.append(e * rows * ld * isz)
        s_batch, s_row, s_col = strides
        s_batch = s_batch if e > 1 else 0
        word = _ALIGN // isz  # elements per 16-byte word
        if s_row == 1 and s_col != 0:  # the source's rows run along ours (forwards or backwards): the tiled transpose
            kernel, abi, block = f"polymm_transpose_{isz}", TRANSPOSE, (32, 8, 1)
            values = dict(s_off=off, s_b=s_batch, s_r=s_col, ld=ld, R=cols, C=rows)
            grid = transpose_grid(isz, cols, rows, e)
        elif s_col == 1 and all(x % word == 0 for x in (off, s_batch, s_row, cols)):  # whole words
            kernel, abi, block = f"polymm_restride_{_ALIGN}", RESTRIDE, (256, 1, 1)
            values = dict(s_off=off // word, s_b=s_batch // word, s_r=s_row // word, s_c=1, ld=ld // word)
            values.update(R=rows, C=cols // word)
            grid = (-(-values["C"] // 256), min(rows, GRID_ROWS), e)
        else:
            kernel, abi, block = f"polymm_restride_{isz}", RESTRIDE, (256, 1, 1)
            values = dict(s_off=off, s_b=s_batch, s_r=s_row, s_c=s_col, ld=ld, R=rows, C=cols)
            grid = (-(-cols // 256), min(rows, GRID_ROWS), e)
        before.append(helper_launch(kernel, abi, values, {"src": src, "dst": slot}, grid, block, source="transpose"))
        return slot, rows * ld if e > 1 else 0, ld

    a_op = (0, a_off, *sa)
    if not _in_place(sa[1], sa[2], sa[0], a_off * isz, isz):  # rows of K
        slot, s_batch, ld = copied(0, m, k, a_off, sa, ea)
        a_op = (slot, 0, s_batch, ld, 1)
    b_op = (1, b_off, *sb)
    if layout == "nk" and not _in_place(sb[2], sb[1], sb[0], b_off * isz, isz):  # rows of K, one per column
        slot, s_batch, ld = copied(1, n, k, b_off, (sb[0], sb[2], sb[1]), eb)
        b_op = (slot, 0, s_batch, 1, ld)  # as B: (batch, K, N) strides
    elif layout == "kn" and not _in_place(sb[1], sb[2], sb[0], b_off * isz, isz):  # rows of N
        slot, s_batch, ld = copied(1, k, n, b_off, sb, eb)
        b_op = (slot, 0, s_batch, ld, 1)
    (a_slot, _, a_sb, a_sm, _), (b_slot, _, b_sb, b_sk, b_sn) = a_op, b_op
    if layout == "kn" and isz == 1:  # tiles of C^T: B in boxes of 128 x 128 as stored, A's rows K-major
        swapped = (bt, n, m, k)
        bn = width(swapped, device)
        a_map = operand_map(k, m, a_sm, a_sb, isz, (ROW, bn, 1), ea)
        b_map = operand_map(n, k, b_sk, b_sb, isz, (ROW, ROW, 1), eb)
        geometry = _geometry(swapped, bn, device)
    else:
        bn = width(shape, device)
        bm = tile_rows(shape, device, bn)
        geometry = _geometry(shape, bn, device, bm)
        a_map = operand_map(k, m, a_sm, a_sb, isz, (ROW // isz, bm, 1), ea)
        if layout == "kn":  # 64 x 64 chunks of B as stored
            b_map = operand_map(n, k, b_sk, b_sb, isz, (64, 64, 1), eb)
        else:  # B^T row-major, as it lies or as copied
            b_map = operand_map(k, n, b_sn, b_sb, isz, (ROW // isz, bn, 1), eb)
    return {
        **geometry,
        "tma": ((a_slot, a_map), (b_slot, b_map)),
        "operands": (a_op, b_op),
        "scratch": scratch,
        "before": before,
    }


#: K per block of ``polymm_tf32_split`` (``SP_KC``): the Inf/NaN flags have one entry per row
#: and such chunk of K.
SPLIT_KC = 512


def _in_place(s_row: int, s_inner: int, s_batch: int, ptr: int, isz: int = 4) -> bool:
    """Whether the copy engine reads an operand where it lies as rows contiguous along their inner
    axis (K, or N for B): positive row strides and a base (``ptr``, bytes from a 16-byte aligned
    address) on 16-byte boundaries; a batch stride of 0 (a broadcast operand) is one matrix."""
    return (
        s_inner == 1
        and s_row > 0
        and (s_row * isz) % _ALIGN == 0
        and s_batch >= 0
        and (s_batch * isz) % _ALIGN == 0
        and ptr % _ALIGN == 0
    )


def tf32_launch(mode: str, shape, a, b, device) -> tuple[str, dict]:
    """The layout of B the kernel reads (``"nk"``: K-major; ``"kn"``: N-major) and the launches of
    a float32 product in precision ``mode`` (``"tf32"``, ``"tf32x3"``) on ``wgmma``, as a planner
    entry's ``external`` (``a``/``b``: element offset from a 16-byte aligned base, strides).

    TF32 ``wgmma`` reads shared memory K-major only. ``"tf32"`` reads A where it lies when it is
    K-major (the tensor cores take the top 19 bits of each float32), and B where it lies when it is
    K-major or N-major (``polymm_wgmma_tf32_kn`` computes C^T = B^T A^T, B^T's fragments loaded
    into registers); an operand laid out otherwise, and an A whose rows do not start on
    ``tf32.row_align`` boundaries, is copied into scratch, rounded to TF32 and K-major
    (``polymm_tf32_split``, one part; its rows padded to that alignment). ``"tf32x3"`` always splits both
    operands into hi and lo parts, multiplies three times (``polymm_wgmma_tf32x3_nk``), then
    repairs the rows and columns whose inputs held Inf or NaN (``polymm_tf32_fixup``). Scratch
    slots: 3 and on, in the order A's parts, B's parts, the flags.
    """
    bt, m, n, k = shape
    products = TF32_PRODUCTS[mode]
    parts = 2 if products == 3 else 1
    align = settings_for(device)("tf32", "row_align") // 4  # floats
    ldk = -(-k // align) * align  # split rows padded to whole tf32.row_align (the padding is never read)
    nkc = -(-k // SPLIT_KC)
    (a_off, sa), (b_off, sb) = a, b
    ea, eb = (bt if bt > 1 and s[0] != 0 else 1 for s in (sa, sb))  # matrices per operand
    split_a = products == 3 or not _in_place(sa[1], sa[2], sa[0], a_off * 4) or sa[1] % align != 0
    b_k_major = _in_place(sb[2], sb[1], sb[0], b_off * 4)
    swap = products == 1 and not b_k_major and _in_place(sb[1], sb[2], sb[0], b_off * 4)
    split_b = products == 3 or not (b_k_major or swap)
    # the swapped kernel's tiles are 128 columns by bn rows of C
    bn = width((bt, n, m, k) if swap else shape, device)
    flags = 3 + split_a + split_b  # the Inf/NaN flags' slot ("tf32x3"): A's rows, then B's columns
    fb_off = ea * m * nkc
    scratch, before, after = [], [], []

    def split(src, rows, off, strides, e, f_off, box_rows):
        """The next scratch slot := operand ``src``'s parts as ``rows`` K-major rows (``strides``:
        batch, row, K); returns (slot, batch stride, its map)."""
        slot = 3 + len(scratch)
        scratch.append(parts * e * rows * ldk * 4)
        s_batch, s_row, s_k = strides
        values = dict(R=rows, KK=k, parts=parts, nkc=nkc, x_off=off, x_sb=s_batch if e > 1 else 0, x_sr=s_row)
        values.update(x_sk=s_k, ld=ldk, part_stride=e * rows * ldk, f_off=f_off)
        buffers = {"X": src, "P": slot, "F": flags if products == 3 else slot}  # F unused with one part
        before.append(
            helper_launch("polymm_tf32_split", TF32_SPLIT, values, buffers, (-(-rows // 32), nkc, e), (32, 8, 1))
        )
        tma = _map((k, rows, parts * e), (ldk * 4, rows * ldk * 4), (ROW // 4, box_rows, 1), 4)
        return slot, rows * ldk if e > 1 else 0, tma

    a_rows = bn if swap else BM
    if split_a:
        slot, s_batch, a_map = split(0, m, a_off, sa, ea, 0, a_rows)
        a_op = (slot, 0, s_batch, ldk, 1)
    else:
        a_op, a_map = (0, a_off, *sa), operand_map(k, m, sa[1], sa[0], 4, (ROW // 4, a_rows, 1), ea)
    if swap:  # B as stored, in 32 x 32 chunks
        b_op, b_map = (1, b_off, *sb), operand_map(n, k, sb[1], sb[0], 4, (32, 32, 1), eb)
    elif split_b:
        slot, s_batch, b_map = split(1, n, b_off, (sb[0], sb[2], sb[1]), eb, fb_off, bn)
        b_op = (slot, 0, s_batch, 1, ldk)
    else:
        b_op, b_map = (1, b_off, *sb), operand_map(k, n, sb[2], sb[0], 4, (ROW // 4, bn, 1), eb)
    if products == 3:
        scratch.append((fb_off + eb * n * nkc) * 4)
        values = dict(M=m, N=n, K=k, a_off=a_off, a_sb=sa[0], a_sm=sa[1], a_sk=sa[2], b_off=b_off, b_sb=sb[0])
        values.update(b_sk=sb[1], b_sn=sb[2], fb_off=fb_off, nkc=nkc)  # c_off: the planner's
        grid = (min(m + n, 2 * device.compute_units), 1, bt)
        after.append(
            helper_launch(
                "polymm_tf32_fixup", TF32_FIXUP, values, {"A": 0, "B": 1, "C": 2, "F": flags}, grid, (256, 1, 1)
            )
        )
    return "kn" if swap else "nk", {
        **_geometry((bt, n, m, k) if swap else shape, bn, device),
        "tma": ((a_op[0], a_map), (b_op[0], b_map)),
        "operands": (a_op, b_op),
        "scratch": scratch,
        "before": before,
        "after": after,
    }


def helper_launch(
    kernel: str, abi: tuple, values: dict, buffers: dict, grid, block, source: str = "tf32_split"
) -> dict:
    """A launch of a helper kernel (``kernels/tf32_split.cu``, ``kernels/transpose.cu``), as the
    planner's ``before``/``after`` entries."""
    return {
        "kernel": kernel,
        "abi": abi,
        "values": values,
        "buffers": buffers,
        "source": source,
        "options": (),
        "grid": grid,
        "block": block,
        "smem": 0,
    }


# ---- tensor maps ----------------------------------------------------------------
_SWIZZLE_128B, _L2_256B = 3, 3  # CUtensorMapSwizzle / CUtensorMapL2promotion values
#: element size -> CUtensorMapDataType: raw 8-, 16- and 32-bit words (the kernels interpret them)
_DATA_TYPE = {1: 0, 2: 1, 4: 2}


class _TensorMap(ctypes.Structure):
    _fields_ = [("words", ctypes.c_uint64 * 16)]


@lru_cache(maxsize=1)
def _encoder():
    """The driver's ``cuTensorMapEncodeTiled`` (CUDA 12 and later: every driver CuPy's CUDA 12
    and 13 builds run on)."""
    for name in ("libcuda.so.1", "nvcuda.dll"):
        try:
            fn = ctypes.CDLL(name).cuTensorMapEncodeTiled
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        return fn
    raise RuntimeError("polymm cuda: the CUDA driver's cuTensorMapEncodeTiled could not be loaded (CUDA 12 or later)")


#: NumPy type CuPy passes by value (128 bytes) for a CUtensorMap argument.
TMAP_DTYPE = np.dtype([("words", "<u8", (16,))], align=True)


def _encode(address: int, geometry) -> np.void:
    dims, strides, box, isz = geometry
    tmap = _TensorMap()
    rc = _encoder()(
        ctypes.byref(tmap),
        _DATA_TYPE[isz],
        3,
        ctypes.c_void_p(address),
        (ctypes.c_uint64 * 3)(*dims),
        (ctypes.c_uint64 * 2)(*strides),
        (ctypes.c_uint32 * 3)(*box),
        (ctypes.c_uint32 * 3)(1, 1, 1),
        0,  # no interleave
        _SWIZZLE_128B,
        _L2_256B,
        0,  # out-of-bounds elements read as zero
    )
    if rc != 0:
        raise RuntimeError(
            f"polymm cuda: cuTensorMapEncodeTiled failed (CUresult {rc}) for dims {dims}, byte strides "
            f"{strides}, box {box} at address {address:#x}"
        )
    return np.frombuffer(bytes(tmap), dtype=TMAP_DTYPE)[0]


def tensor_maps(addresses, tma) -> tuple:
    """The encoded maps of a launch (``tma``: their slots and geometry) for buffers at these addresses."""
    return tuple(_encode(address, geometry) for address, (_, geometry) in zip(addresses, tma))
