"""Hopper's path for float16 and bfloat16: ``kernels/wgmma.cu`` (``wgmma`` fed by the copy engine).

What this module decides and builds, and nothing else:

- :func:`choose`: whether the kernel reads a call's operands as they lie (the copy engine needs
  16-byte aligned bases and row strides, and unit stride along K for A, along N or K for B);
- :func:`source`: the kernel text, after the ``wgmma.mma_async`` wrappers it calls (128
  accumulator registers each: written here rather than by hand);
- :func:`tensor_maps`: the two ``CUtensorMap`` a launch takes by value, encoded by the driver's
  ``cuTensorMapEncodeTiled`` (through ``ctypes``: the one driver call CuPy does not wrap).

It runs only on compute capability 9.0 (``sm_90a`` code runs on no other chip); elsewhere
:mod:`polymm_cuda.tensorcore` serves (``mma.sync``).
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from .tensorcore import source as _file_source

__all__ = ["CC", "WIDTHS", "choose", "width", "external_launch", "source", "options", "tensor_maps"]

#: The only compute capability the ``sm_90a`` instructions run on.
CC = 90
BM, BK, STAGES, THREADS = 128, 64, 4, 384
#: Tile widths compiled (``-DWG_BN``): 256 for large products, 128 where 256 leaves SMs idle.
WIDTHS = (256, 128)
BN = WIDTHS[0]


def smem_bytes(bn: int) -> int:
    """Dynamic shared memory: the ring of stages, 1024 bytes to align it, its barriers."""
    return STAGES * (BM + bn) * BK * 2 + 1024 + 16 * STAGES


_TYPES = {"float16": "f16", "bfloat16": "bf16"}
_ALIGN = 16  # bytes: the copy engine's base address and stride granularity


def kernel_name(dtype_name: str, layout: str) -> str:
    return f"polymm_wgmma_{dtype_name}_{layout}"


def choose(dtype: np.dtype, cc: int, shape, sa, sb, a_ptr: int, b_ptr: int) -> tuple[str | None, str]:
    """``(kernel name, why)`` for this call, or None and the rule it breaks (the caller has
    already checked :func:`polymm_cuda.tensorcore.shape_rule`)."""
    if dtype.name not in _TYPES:
        return None, f"wgmma serves {', '.join(_TYPES)}"
    if cc != CC:
        return None, f"sm_90a code runs on compute capability 9.0 only (this is {cc / 10:.1f})"
    bt = shape[0]
    if bt > 65535:
        return None, "a batch beyond one grid"
    isz = dtype.itemsize

    def aligned(batch, row):
        # the copy engine takes positive strides that are multiples of 16 bytes (a batch stride
        # of 0, a broadcast operand, is described as one matrix)
        return (batch * isz) % _ALIGN == 0 and batch >= 0 and (row * isz) % _ALIGN == 0 and row > 0

    if sa[2] != 1 or not aligned(sa[0], sa[1]) or a_ptr % _ALIGN:
        return None, "A must be K-contiguous with 16-byte aligned base and strides"
    if b_ptr % _ALIGN:
        return None, "B must start 16-byte aligned"
    if sb[2] == 1 and aligned(sb[0], sb[1]):
        return kernel_name(dtype.name, "kn"), "B is N-contiguous"
    if sb[1] == 1 and aligned(sb[0], sb[2]):
        return kernel_name(dtype.name, "nk"), "B is K-contiguous (B^T row-major)"
    return None, "B must be contiguous along N or K with 16-byte aligned strides"


def _mma_wrapper(ptx_type: str, tnsp_b: int, bn: int) -> str:
    """``wg_mma_<type>_<tnsp_b>(d, desc_a, desc_b)``: d += A B for one 64 x bn x 16 step."""
    regs = ", ".join(f"%{i}" for i in range(bn // 2))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(bn // 2))
    a, b, one = bn // 2, bn // 2 + 1, bn // 2 + 2
    return (
        f"__device__ __forceinline__ void wg_mma_{ptx_type}_{tnsp_b}(float (&d)[{bn // 2}], "
        "unsigned long long da, unsigned long long db) {\n"
        f'    asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{one}, 0;\\n"\n'
        f'                 "wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{ptx_type}.{ptx_type} '
        f'{{{regs}}}, %{a}, %{b}, p, 1, 1, 0, {tnsp_b};\\n}}\\n"\n'
        f'                 : {outs}\n                 : "l"(da), "l"(db), "r"(1));\n}}\n'
    )


@lru_cache(maxsize=None)
def source(bn: int = BN) -> str:
    """The kernel text for tiles ``bn`` wide: the ``wgmma.mma_async`` wrappers, then the
    asynchronous-copy helpers and ``kernels/wgmma.cu``."""
    wrappers = "".join(_mma_wrapper(t, tn, bn) for t in _TYPES.values() for tn in (0, 1))
    return wrappers + _file_source("wgmma")


def options(bn: int = BN) -> tuple[str, ...]:
    return ("-arch=sm_90a", f"-DWG_BN={bn}", f"-DWG_STAGES={STAGES}")


def width(shape, sms: int) -> int:
    """The tile width for a product: the one whose busiest SM computes the fewest columns
    (tiles per SM, rounded up, times the width), the wider on a tie (fewer, larger tiles waste
    less bandwidth). 2048 squares: 128 tiles of 256 or 256 of 128 on 132 SMs, a tie: 256; a
    256-wide skinny product of 8192 rows: 64 tiles of 256 leave half the SMs idle: 128."""
    bt, m, n, _ = shape
    return min(WIDTHS, key=lambda bn: (-(-(bt * -(-m // BM) * -(-n // bn)) // sms) * bn, -bn))


def external_launch(shape, sa, sb, layout: str, isz: int, sms: int) -> dict:
    """The planner's description of one launch: a persistent grid (at most one block per SM
    of ``sms`` for each batch entry), block, shared memory, and the two tensor maps' geometry
    (``tma``: per operand, dims, byte strides and box, innermost first), which the backend
    encodes per call with the operands' addresses."""
    bt, m, n, k = shape
    bn = width(shape, sms)
    grid = (min(-(-m // BM) * -(-n // bn), sms), 1, bt)

    def geometry(inner, outer, s_outer, s_batch, box, batched):
        # a broadcast (or single) batch is one matrix; its stride is any legal value
        dims = (inner, outer, bt if batched else 1)
        stride_batch = s_batch * isz if batched else -(-outer * s_outer * isz // _ALIGN) * _ALIGN
        return dims, (s_outer * isz, max(stride_batch, _ALIGN)), box

    a_map = geometry(k, m, sa[1], sa[0], (BK, BM, 1), bt > 1 and sa[0] != 0)
    if layout == "kn":
        b_map = geometry(n, k, sb[1], sb[0], (64, BK, 1), bt > 1 and sb[0] != 0)
    else:
        b_map = geometry(k, n, sb[2], sb[0], (BK, bn, 1), bt > 1 and sb[0] != 0)
    return {
        "source": f"wgmma-{bn}",
        "options": options(bn),
        "grid": grid,
        "block": (THREADS, 1, 1),
        "smem": smem_bytes(bn),
        "tma": (a_map, b_map),
    }


# ---- tensor maps ----------------------------------------------------------------
_UINT16, _SWIZZLE_128B, _L2_256B = 1, 3, 3  # CUtensorMapDataType / Swizzle / L2promotion values


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
    dims, strides, box = geometry
    tmap = _TensorMap()
    rc = _encoder()(
        ctypes.byref(tmap),
        _UINT16,
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


def tensor_maps(a_address: int, b_address: int, tma) -> tuple:
    """The two encoded maps of a launch (``tma``: their geometry) for operands at these addresses."""
    return _encode(a_address, tma[0]), _encode(b_address, tma[1])
