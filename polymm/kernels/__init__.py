"""The matmul kernels, written once and rendered for CUDA or OpenCL.

The algorithm bodies (``naive.c``, ``tiled.c``, ``regblock.c``) use a small
dialect-neutral vocabulary (``KERNEL``, ``GLOBAL``, ``LOCAL_MEM``, ``BARRIER``,
``LOCAL_ID``, ...) that a short prelude (``prelude_opencl.h`` /
``prelude_cuda.h``) maps onto each dialect; ``types.h`` supplies the per-dtype
arithmetic (``LOAD``, ``ACC_MADD``, ``STORE``, ...).  :func:`render` glues
prelude + ``#define``s for the dtype and tile parameters + body into one
complete source, so a fix to the algorithm is made once for both backends.

Kernel interfaces: declared once in :mod:`polymm.kernels.abi` (the products'
``PM_ARGS``: sizes, then each operand as base pointer + element offset +
element strides, C contiguous ``(B, M, N)`` from ``c_off``); :func:`render`
writes the signatures into every source and the backends pack arguments with
:func:`polymm.kernels.abi.arguments`.  ``T`` is the dtype's storage type:
``uchar`` for bool, ``half`` (OpenCL) / ``unsigned short`` (CUDA, raw bits)
for float16, ``ushort`` / ``unsigned short`` (raw bits) for bfloat16,
``float2``/``double2`` for complex (one table: ``_DTYPES``).

``image`` (``image.c``) is the naive kernel reading A and B as 2-D images
(OpenCL ``image2d_t``, CUDA texture objects): its own interface is in its
source; :func:`image_format` gives the texel format per dtype (it refuses the
dtypes images cannot hold) and :func:`check_image_size` the size limit.

Kernel names: :func:`kernel_name` (``polymm_naive``, ``polymm_tiled``,
``polymm_tiled_dynamic``, ``polymm_regblock``; CUDA ones are ``extern "C"``).
``tiled-dynamic`` takes its tile memory at launch: OpenCL gets one trailing
``__local`` argument of :func:`local_mem_bytes` bytes (``cl.LocalMemory``);
CUDA gets the same number as the launch's dynamic shared memory size.

Launch geometry: :func:`launch_geometry` gives OpenCL NDRange sizes in
work-items; CUDA uses ``block = local`` and ``grid = global // local``
(``gridDim.z`` = batch is limited to 65535 there: split larger batches by
advancing ``a_off``/``b_off``/``c_off``).
"""

from __future__ import annotations

import functools

import dataclasses
from dataclasses import dataclass
from importlib import resources

import numpy as np

from . import abi

__all__ = [
    "KernelParams",
    "KERNELS",
    "DIALECTS",
    "render",
    "kernel_name",
    "launch_geometry",
    "pack_params",
    "realify_params",
    "GRID_ROWS",
    "local_mem_bytes",
    "fast_path",
    "value_itemsize",
    "HELPER_KERNELS",
    "IMAGE_DTYPES",
    "ImageFormat",
    "image_format",
    "check_image_size",
]

DIALECTS = ("cuda", "opencl")
#: Kernel names accepted by :func:`render` (``tiled-dynamic`` is ``tiled.c``
#: rendered with ``PM_DYNAMIC_LOCAL``).
KERNELS = (
    "naive",
    "image",
    "tiled",
    "tiled-dynamic",
    "regblock",
    "matvec",
    "vecmat",
    "pack",
    "sum-slices",
    "realify",
)
_BODY_FILES = {
    "naive": "naive.c",
    "image": "image.c",
    "tiled": "tiled.c",
    "tiled-dynamic": "tiled.c",
    "regblock": "regblock.c",
    "matvec": "matvec.c",
    "vecmat": "vecmat.c",
    "pack": "pack.c",
    "sum-slices": "sum_slices.c",
    "realify": "realify.c",
}
#: Helper kernels with their own interfaces (not PM_ARGS): ``pack`` copies a
#: strided ``(batch, rows, cols)`` view to contiguous memory, ``sum-slices``
#: adds split-K partial products in a fixed order, ``realify`` writes a complex
#: operand as the real matrix that turns a complex product into a real one (see
#: their sources).
HELPER_KERNELS = ("pack", "sum-slices", "realify")


@dataclass(frozen=True)
class KernelParams:
    """Tile parameters, as data (they become ``#define``s).

    ``ts``: tile edge of ``tiled``/``tiled-dynamic`` (work-group ``ts x ts``).
    ``regblock``: ``mwg x nwg`` block of C per work-group, K step ``kwg``,
    work-group ``(ndimc, mdimc)``, micro-tile ``(mwg/mdimc) x (nwg/ndimc)`` per
    work-item; ``vw``: interleave width (local-memory shape) or SIMD vector
    width along N (``use_local=False``, the CPU shape); ``pad``: local-memory row
    padding against bank conflicts; ``gvw``: global vector load width of the
    fast path (local-memory shape); ``mr``: rows of the register kernel of the
    CPU shape, which walks a work-item's ``mwg/mdimc`` x ``nwg/ndimc`` block
    ``mr`` x ``nr`` at a time (``nr=0``: all columns) and K in chunks of
    ``kwg``; ``pack_b``: copy each KWG x NR chunk of B to contiguous private
    memory first (CPU shape; avoids cache-set conflicts); ``maxrreg``: register cap per work-item for
    backends that can set one at build time (0: the compiler's choice; not
    part of the source); ``bpg``: batch entries per work-group of the CPU
    shape (small matrices: several per group, so per-group overhead is
    shared; :func:`launch_geometry` uses the largest divisor of the batch
    not above it).  GPU shape only: ``kteams`` teams of ``mdimc x ndimc`` work-items per
    work-group, each walking every ``kteams``-th K step with tiles of its own, their micro-tiles
    added in team order at the end (more work-items per block of C where there are few blocks);
    ``group``: work-groups walk C in bands of ``group`` tile rows (column by column within a
    band) so that those in flight share A's and B's tiles in the L2 cache (0 or 1: row by row);
    ``stages``: local tiles of 1 K step, or 2 that alternate (the next step stored while the other
    is read: one barrier per step instead of two, twice the local memory).

    ``matvec`` reads the same words: ``mr`` rows x ``nwg`` columns of dot
    products per work-item, ``vw`` the vector width along K, ``mdimc``
    work-items per group; ``use_local`` (GPUs): the ``mdimc`` work-items of a
    group share one ``mr x nwg`` block, walking K side by side, and reduce
    in local memory (``mdimc`` a power of two).

    ``vecmat`` (few rows, GPUs) too: ``mr`` rows x ``nwg`` columns per work-group, ``ndimc``
    work-items along N holding ``gvw`` adjacent columns each (``nwg = ndimc * gvw``), ``mdimc``
    teams walking K side by side, each with ``kwg`` rows of B in flight.
    """

    ts: int = 16
    mwg: int = 64
    nwg: int = 64
    kwg: int = 16
    mdimc: int = 16
    ndimc: int = 16
    vw: int = 4
    pad: int = 0
    gvw: int = 4
    use_local: bool = True
    mr: int = 6
    nr: int = 0
    pack_b: bool = False
    maxrreg: int = 0
    bpg: int = 1
    kteams: int = 1
    group: int = 0
    stages: int = 1

    @property
    def wptm(self) -> int:
        return self.mwg // self.mdimc

    @property
    def wptn(self) -> int:
        return self.nwg // self.ndimc

    def replace(self, **changes) -> "KernelParams":
        return dataclasses.replace(self, **changes)

    def validate(self, kernel: str) -> None:
        """Raise ``ValueError`` if these parameters cannot render ``kernel``."""
        if kernel in ("tiled", "tiled-dynamic"):
            if self.ts < 1:
                raise ValueError(f"ts must be positive: {self}")
        if kernel == "matvec" and (self.mr < 1 or self.nwg < 1 or self.vw < 1):
            raise ValueError(f"matvec needs positive mr, nwg, vw: {self}")
        if kernel == "matvec" and self.use_local and self.mdimc & (self.mdimc - 1):
            raise ValueError(f"the work-group matvec needs mdimc a power of two: {self}")
        if kernel == "vecmat" and (
            min(self.mr, self.kwg, self.gvw, self.ndimc, self.mdimc) < 1 or self.nwg != self.ndimc * self.gvw
        ):
            raise ValueError(f"vecmat needs positive mr, kwg, gvw, ndimc, mdimc and nwg = ndimc * gvw: {self}")
        if kernel != "regblock":
            return
        if self.mwg % self.mdimc or self.nwg % self.ndimc:
            raise ValueError(f"mwg/nwg must be multiples of mdimc/ndimc: {self}")
        if self.use_local:
            if self.wptm % self.vw or self.wptn % self.vw:
                raise ValueError(f"micro-tile must be a multiple of vw: {self}")
            threads = self.mdimc * self.ndimc
            if (
                (self.mwg * self.kwg // self.gvw) % threads
                or (self.kwg * self.nwg // self.gvw) % threads
                or self.kwg % self.gvw
                or self.nwg % self.gvw
            ):
                raise ValueError(f"tiles must split evenly into gvw-vectors per work-item: {self}")
            if self.kteams < 1:
                raise ValueError(f"kteams must be positive: {self}")
            if self.stages not in (1, 2):
                raise ValueError(f"stages must be 1 or 2: {self}")
        elif (
            self.wptn % self.vw
            or self.wptm % self.mr
            or self.wptn % (self.nr or self.wptn)
            or (self.nr or self.wptn) % self.vw
        ):
            raise ValueError(f"wptn must be a multiple of nr, nr of vw, wptm of mr: {self}")


# dtype -> (PM_KIND, OpenCL storage, CUDA storage, OpenCL value/acc, CUDA value/acc, needs fp64)
_INT_ACC = {4: ("uint", "unsigned int"), 8: ("ulong", "unsigned long long")}
_DTYPES = {
    "bool": ("BOOL", "uchar", "unsigned char"),
    "int8": ("INT", "char", "signed char"),
    "int16": ("INT", "short", "short"),
    "int32": ("INT", "int", "int"),
    "int64": ("INT", "long", "long long"),
    "uint8": ("INT", "uchar", "unsigned char"),
    "uint16": ("INT", "ushort", "unsigned short"),
    "uint32": ("INT", "uint", "unsigned int"),
    "uint64": ("INT", "ulong", "unsigned long long"),
    "float16": ("HALF", "half", "unsigned short"),
    "bfloat16": ("BF16", "ushort", "unsigned short"),  # ml_dtypes' bfloat16, an optional dtype
    "float32": ("FLOAT", "float", "float"),
    "float64": ("FLOAT", "double", "double"),
    "complex64": ("COMPLEX", "float2", "float2"),
    "complex128": ("COMPLEX", "double2", "double2"),
}
# Raw-bits vectors vecmat reads a work-item's run of a row of B as, by its bytes: (OpenCL, CUDA).
_ROW_TYPES = {4: ("uint", "unsigned int"), 8: ("uint2", "uint2"), 16: ("uint4", "uint4")}
# Raw-bits element types of the pack kernel, by item size: (OpenCL, CUDA).
_COPY_TYPES = {
    1: ("uchar", "unsigned char"),
    2: ("ushort", "unsigned short"),
    4: ("uint", "unsigned int"),
    8: ("ulong", "unsigned long long"),
    16: ("ulong2", "ulonglong2"),
}
_COPY_ZERO = {"opencl": "((pm_copy_t)(0))", "cuda": "pm_copy_t()"}


@dataclass(frozen=True)
class ImageFormat:
    """One-channel texel format of a dtype: OpenCL ``CL_R`` + ``channel_type`` read by
    ``read_fn``; CUDA ``tex2D<texel>`` of a channel of ``bits`` bits of kind ``cuda_kind``."""

    channel_type: str
    read_fn: str
    texel: str
    bits: int
    cuda_kind: str


_IMAGE_FORMATS = {
    "bool": ImageFormat("UNSIGNED_INT8", "read_imageui", "unsigned char", 8, "Unsigned"),
    "int8": ImageFormat("SIGNED_INT8", "read_imagei", "signed char", 8, "Signed"),
    "int16": ImageFormat("SIGNED_INT16", "read_imagei", "short", 16, "Signed"),
    "int32": ImageFormat("SIGNED_INT32", "read_imagei", "int", 32, "Signed"),
    "uint8": ImageFormat("UNSIGNED_INT8", "read_imageui", "unsigned char", 8, "Unsigned"),
    "uint16": ImageFormat("UNSIGNED_INT16", "read_imageui", "unsigned short", 16, "Unsigned"),
    "uint32": ImageFormat("UNSIGNED_INT32", "read_imageui", "unsigned int", 32, "Unsigned"),
    # float16 travels as raw 16-bit words (PoCL reads CL_HALF_FLOAT texels wrong)
    "float16": ImageFormat("UNSIGNED_INT16", "read_imageui", "unsigned short", 16, "Unsigned"),
    "float32": ImageFormat("FLOAT", "read_imagef", "float", 32, "Float"),
}
#: Dtypes the image kernel serves: images have no 64-bit or two-component texels here.
IMAGE_DTYPES = tuple(np.dtype(name) for name in _IMAGE_FORMATS)


def image_format(dtype, device: str = "this device") -> ImageFormat:
    """The texel format for ``dtype``, or a ``TypeError`` naming device, dtype and the dtypes served."""
    found = _IMAGE_FORMATS.get(np.dtype(dtype).name)
    if found is None:
        raise TypeError(
            f"algorithm 'image' cannot compute {np.dtype(dtype)} on {device}: image texels have no 64-bit or "
            f"complex format; it serves {', '.join(_IMAGE_FORMATS)}"
        )
    return found


def check_image_size(which: str, width: int, height: int, limit: tuple[int, int], dtype, device: str) -> None:
    """:class:`~polymm.backend.SizeLimitError` (a ``ValueError``) if a ``width x height`` image of
    operand ``which`` exceeds the device's 2-D image limit."""
    from ..backend import SizeLimitError

    if width > limit[0] or height > limit[1]:
        raise SizeLimitError(
            f"algorithm 'image': {which} needs a {width} x {height} image of {np.dtype(dtype)} but {device} "
            f"allows at most {limit[0]} x {limit[1]} (batches are stacked along the height); use another algorithm"
        )


# Fast (vector) paths exist for these: (scalar type of the vector, lanes per element).
# GVEC_T (same name in both dialects) holds GVW elements: complex64 pairs go as float4.
# The CPU shape's vector arithmetic (PM_VECTOR_MATH) is for the real types only.
_VECTOR_DTYPES = {"float32": ("float", 1), "float64": ("double", 1), "complex64": ("float", 2)}


def _type_defines(dialect: str, dtype: np.dtype) -> dict[str, str]:
    name = np.dtype(dtype).name
    if name not in _DTYPES:
        raise TypeError(f"polymm kernels do not support dtype {name}")
    kind, ocl, cuda = _DTYPES[name]
    elem = ocl if dialect == "opencl" else cuda
    d = {f"PM_KIND_{kind}": "1", "ELEM_T": elem, "PM_NEEDS_FP64": "1" if name in ("float64", "complex128") else "0"}
    if kind == "BOOL":
        d.update(VAL_T=elem, ACC_T="uint" if dialect == "opencl" else "unsigned int", VAL_ZERO="0")
    elif kind == "INT":
        acc = _INT_ACC[max(4, np.dtype(dtype).itemsize)][0 if dialect == "opencl" else 1]
        d.update(VAL_T=acc, ACC_T=acc, VAL_ZERO="0")
    elif kind in ("HALF", "BF16"):
        d.update(VAL_T="float", ACC_T="float", VAL_ZERO="0.0f")
    elif kind == "FLOAT":
        d.update(VAL_T=elem, ACC_T=elem, VAL_ZERO="0.0f" if name == "float32" else "0.0")
    else:  # COMPLEX
        zero = "0.0f" if name == "complex64" else "0.0"
        ctor = f"({elem})({zero}, {zero})" if dialect == "opencl" else f"make_{elem}({zero}, {zero})"
        d.update(VAL_T=elem, ACC_T=elem, VAL_ZERO=ctor)
    return d


@functools.lru_cache(maxsize=None)
def value_itemsize(dtype) -> int:
    """Bytes of one VAL_T (what local memory holds per element) for ``dtype`` (asked many times
    per plan: a dtype's name costs microseconds)."""
    name = np.dtype(dtype).name
    kind = _DTYPES[name][0]
    if kind == "BOOL":
        return 1
    if kind == "INT":
        return max(4, np.dtype(dtype).itemsize)
    if kind in ("HALF", "BF16"):
        return 4
    return np.dtype(dtype).itemsize


def _read(filename: str) -> str:
    return resources.files(__package__).joinpath(filename).read_text()


def kernel_name(kernel: str) -> str:
    """The entry-point name of ``kernel`` in rendered source."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")
    return "polymm_" + kernel.replace("-", "_")


def default_params(kernel: str) -> KernelParams:
    return KernelParams()


def render(
    dialect: str,
    kernel: str,
    dtype,
    params: KernelParams | None = None,
    *,
    vec_a: bool = False,
    vec_b: bool = False,
    a_mmajor: bool = False,
    b_kmajor: bool = False,
    real_b: bool = False,
) -> str:
    """Complete compilable source of ``kernel`` for ``dtype`` in ``dialect``.

    ``vec_a``/``vec_b`` select the regblock fast paths, ``a_mmajor``/``b_kmajor`` their vectors
    along M (A) or K (B) for column-major operands; only pass what :func:`fast_path` allows for
    the operands at hand (they are ignored for dtypes without a vector path).  ``real_b``
    (regblock's GPU shape, float32/float64): B is complex, read in place as the real matrix
    ``realify`` would write (``kernels/regblock.c``).
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {DIALECTS}")
    kernel_name(kernel)
    params = params or default_params(kernel)
    params.validate(kernel)
    dtype = np.dtype(dtype)
    if real_b and not (kernel == "regblock" and params.use_local and dtype.name in ("float32", "float64")):
        raise ValueError(f"real_b is regblock's GPU shape for float32 or float64, not {kernel} {dtype} {params}")
    if real_b and (b_kmajor or not vec_b or params.gvw % 2):
        raise ValueError(f"real_b reads B's rows as vectors of pairs of reals: vec_b, gvw even ({params})")
    if kernel == "realify" and dtype.name not in ("float32", "float64"):
        raise TypeError(
            f"realify is rendered for the real dtype of a complex product (float32 or float64), not {dtype}"
        )
    defines = _type_defines(dialect, dtype)
    vector_ok = dtype.name in _VECTOR_DTYPES
    row_t = _ROW_TYPES.get(params.gvw * dtype.itemsize) if kernel == "vecmat" and vec_b and dtype.kind != "c" else None
    mv_rows = kernel == "matvec" and params.use_local and vec_a and vec_b and params.gvw * dtype.itemsize in _ROW_TYPES
    defines.update(
        TS=str(params.ts),
        MWG=str(params.mwg),
        NWG=str(params.nwg),
        KWG=str(params.kwg),
        MDIMC=str(params.mdimc),
        NDIMC=str(params.ndimc),
        VW=str(params.vw),
        PAD=str(params.pad),
        GVW=str(params.gvw),
        MR=str(params.mr),
        PM_RB_PACK_B="1" if params.pack_b else "0",
        NR=str(params.nr or params.wptn),
        PM_DYNAMIC_LOCAL="1" if kernel == "tiled-dynamic" else "0",
        PM_RB_LOCAL="1" if params.use_local else "0",
        PM_RB_VEC_A="1" if (vec_a and vector_ok) else "0",
        PM_RB_VEC_B="1" if (vec_b and vector_ok) else "0",
        PM_RB_A_MMAJOR="1" if (vec_a and a_mmajor and vector_ok) else "0",
        PM_RB_B_KMAJOR="1" if (vec_b and b_kmajor and vector_ok) else "0",
        PM_MV_VEC="1" if (kernel == "matvec" and vec_a and vec_b and vector_ok) else "0",
        PM_VM_VEC="1" if row_t else "0",
        COPY_T=_COPY_TYPES[dtype.itemsize][0 if dialect == "opencl" else 1],
        COPY_ZERO=_COPY_ZERO[dialect],
        PM_MV_GROUP="1" if (kernel == "matvec" and params.use_local) else "0",
        PM_MV_ROWS="1" if mv_rows else "0",
        BPG=str(params.bpg),
        KTEAMS=str(params.kteams),
        PM_RB_GROUP=str(params.group),
        PM_RB_STAGES=str(params.stages if params.use_local else 1),
        PM_RB_REAL_B="1" if real_b else "0",
        PM_RB_VEC_LOCAL="1"
        if (
            vector_ok
            and vec_a
            and vec_b
            and params.use_local
            and params.vw == params.gvw
            and params.pad % params.gvw == 0
        )
        else "0",
    )
    if row_t:
        defines["PM_VM_ROW_T"] = row_t[0 if dialect == "opencl" else 1]
    if mv_rows:
        defines["PM_MV_ROW_T"] = _ROW_TYPES[params.gvw * dtype.itemsize][0 if dialect == "opencl" else 1]
    if vector_ok:
        base, lanes = _VECTOR_DTYPES[dtype.name]
        width = params.gvw * lanes
        defines["GVEC_T"] = f"{base}{width}" if width > 1 else base  # OpenCL has no float1
        if dialect == "opencl" and not params.use_local and lanes == 1:
            # vloadN is an out-of-line call in PoCL (every accumulator spills
            # around it); a vector built from adjacent scalars becomes one
            # unaligned SIMD load instead.
            elements = ", ".join(f"(p)[{i}]" for i in range(params.vw))
            defines.update(PM_VECTOR_MATH="1", VEC_T=f"{base}{params.vw}", VSTOREN=f"vstore{params.vw}")
            defines["VLOADN(p)"] = f"(({base}{params.vw})({elements}))"
    defines.update(abi.signature_defines())
    if kernel == "image":
        texel = image_format(dtype)
        defines.update(IMAGE_READ_FN=texel.read_fn, IMAGE_TEXEL_T=texel.texel)
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    parts = [
        f"/* polymm {kernel} kernel, dtype {dtype.name}, dialect {dialect}, {params} */\n",
        head,
        _read(f"prelude_{dialect}.h"),
        _read("types.h"),
        _read(_BODY_FILES[kernel]),
    ]
    return "\n".join(parts)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


#: CUDA's most work-groups along a grid's second and third dimensions (gridDim.y, gridDim.z):
#: the copy kernels' rows and every CUDA launch's batch.
GRID_ROWS = 65535
#: The work-group of the GPU copy kernels (pack, realify): 64 columns side by side, 4 rows.
_COPY_GROUP = (64, 4, 1)


def _rows_per_item(rows: int) -> int:
    """Rows each work-item of a GPU copy kernel takes, a grid's height apart: at least 4 (its
    loads in flight at once) and enough that the grid's height stays within :data:`GRID_ROWS`."""
    return max(4, _ceil_div(rows, _COPY_GROUP[1] * GRID_ROWS))


def _copy_geometry(rows: int, cols: int, per_item: int, batch: int):
    """A GPU copy kernel's launch: a work-item per column and per ``per_item`` rows."""
    height = _ceil_div(_ceil_div(rows, per_item), _COPY_GROUP[1]) * _COPY_GROUP[1]
    return (_ceil_div(cols, _COPY_GROUP[0]) * _COPY_GROUP[0], height, batch), _COPY_GROUP


def pack_params(is_cpu: bool, rows: int) -> KernelParams:
    """The pack kernel's shape of work for ``rows`` rows: on a CPU a 16 x 16 tile per work-item
    (its cache lines used whole); on a GPU a column of ``mr`` rows per work-item."""
    return KernelParams(ts=16) if is_cpu else KernelParams(ts=1, mr=_rows_per_item(rows))


def realify_params(rows: int) -> KernelParams:
    """The realify kernel's (GPUs): ``ts`` of B's ``rows`` per work-item."""
    return KernelParams(ts=_rows_per_item(rows))


def launch_geometry(kernel: str, params: KernelParams | None, M: int, N: int, B: int):
    """``(global_size, local_size)`` in work-items (OpenCL NDRange terms).

    Dimension 0 runs along N (columns), 1 along M (rows), 2 over the batch
    with local size 1.  CUDA: ``block = local``, ``grid = global // local``.
    """
    kernel_name(kernel)
    params = params or default_params(kernel)
    if kernel in ("naive", "image"):
        local = (16, 16, 1)
        glob = (_ceil_div(N, 16) * 16, _ceil_div(M, 16) * 16, B)
    elif kernel in ("tiled", "tiled-dynamic"):
        ts = params.ts
        local = (ts, ts, 1)
        glob = (_ceil_div(N, ts) * ts, _ceil_div(M, ts) * ts, B)
    elif kernel == "matvec" and params.use_local:
        local = (params.mdimc, 1, 1)
        glob = (_ceil_div(M, params.mr) * params.mdimc, _ceil_div(N, params.nwg), B)
    elif kernel == "vecmat":
        local = (params.ndimc, params.mdimc, 1)
        glob = (_ceil_div(N, params.nwg) * params.ndimc, _ceil_div(M, params.mr) * params.mdimc, B)
    elif kernel == "matvec":
        local = (params.mdimc, 1, 1)
        glob = (_ceil_div(_ceil_div(M, params.mr), params.mdimc) * params.mdimc, _ceil_div(N, params.nwg), B)
    elif kernel == "pack" and params.ts == 1:  # GPUs: M rows, N columns, a column of MR rows per work-item
        glob, local = _copy_geometry(M, N, params.mr, B)
    elif kernel == "pack":  # CPUs: a TS x TS tile per work-item
        local = (8, 1, 1)
        glob = (_ceil_div(_ceil_div(N, params.ts), 8) * 8, _ceil_div(M, params.ts), B)
    elif kernel == "realify":  # B's K rows (TS per work-item), N columns
        glob, local = _copy_geometry(M, N, params.ts, B)
    elif kernel == "sum-slices":  # M elements per slice
        local = (64, 1, 1)
        glob = (_ceil_div(M, 64) * 64, 1, 1)
    else:
        bpg = 1
        if not params.use_local:
            bpg = max(d for d in range(1, min(params.bpg, B) + 1) if B % d == 0)
        teams = params.kteams if params.use_local else 1
        local = (params.ndimc, params.mdimc * teams, bpg)
        glob = (_ceil_div(N, params.nwg) * params.ndimc, _ceil_div(M, params.mwg) * params.mdimc * teams, B)
    return glob, local


def local_mem_bytes(kernel: str, dtype, params: KernelParams | None = None) -> int:
    """Local (shared) memory the kernel needs; for ``tiled-dynamic`` the size to pass at launch."""
    params = params or default_params(kernel)
    size = value_itemsize(dtype)
    if kernel in ("tiled", "tiled-dynamic"):
        return 2 * params.ts * params.ts * size
    if kernel == "regblock" and params.use_local:
        tiles = params.stages * params.kteams * params.kwg * (params.mwg + params.nwg + 2 * params.pad) * size
        partial = (params.kteams - 1) * params.nwg * params.mdimc * max(4, size)  # the teams' sums, a row at a time
        return tiles + partial
    if kernel == "matvec" and params.use_local:
        return params.mr * params.nwg * params.mdimc * max(4, size)
    if kernel == "vecmat":
        return params.mdimc * params.mr * params.nwg * max(4, size)
    return 0


def fast_path(
    dialect: str,
    dtype,
    params: KernelParams,
    M: int,
    N: int,
    K: int,
    batch: int,
    a_off: int,
    a_strides,
    b_off: int,
    b_strides,
    kernel: str = "regblock",
    padded: bool = False,
    real_b: bool = False,
) -> dict[str, bool]:
    """Which vector paths of ``kernel`` are valid for these operands (``render`` keywords).

    ``matvec``: both flags exactly when A and B are contiguous along K (OpenCL's CPU shape);
    the GPU shape's both when A's rows and B's columns split into runs of ``gvw`` (``matvec.c``'s
    ``PM_MV_ROWS``).
    The GPU shape also reads column-major operands with vectors (``a_mmajor``: along M,
    ``b_kmajor``: along K).

    ``a_strides = (a_sb, a_sm, a_sk)`` and ``b_strides = (b_sb, b_sk, b_sn)`` in
    elements.  The local-memory (GPU) shape reads ``gvw``-element vectors, so
    it needs inner stride 1 and every vector start a multiple of ``gvw``
    elements (buffers themselves are assumed aligned, as allocators give
    them); ``padded``: B was packed with rows padded to a multiple of ``gvw``
    (zeros), so N itself need not be one; ``real_b``: B is a complex matrix read as its real
    form (:func:`render`'s), which has vectors along its rows only, in pairs (``gvw`` even).  The CPU shape uses ``vloadN``,
    which needs only inner stride 1 (real dtypes only).
    """
    dtype = np.dtype(dtype)
    if kernel == "vecmat":  # a work-item's run of a row of B as one raw-bits vector (not complex)
        b_sb, b_sk, b_sn = b_strides
        g = params.gvw
        rows = (
            dtype.kind != "c"
            and g * dtype.itemsize in _ROW_TYPES
            and b_sn == 1
            and all(v % g == 0 for v in (N, b_off, b_sk, b_sb if batch > 1 else 0))
        )
        return {"vec_a": False, "vec_b": rows}
    if kernel == "matvec" and params.use_local:  # the GPU shape: runs of gvw elements along K
        g = params.gvw
        a_sb, a_sm, a_sk = a_strides
        b_sb, b_sk, b_sn = b_strides
        runs = g > 1 and g * dtype.itemsize in _ROW_TYPES and K % g == 0
        a_rows = a_sk == 1 and all(v % g == 0 for v in (a_off, a_sm if M > 1 else 0, a_sb if batch > 1 else 0))
        b_cols = b_sk == 1 and all(v % g == 0 for v in (b_off, b_sn if N > 1 else 0, b_sb if batch > 1 else 0))
        both = runs and a_rows and b_cols
        return {"vec_a": both, "vec_b": both}
    if dtype.name not in _VECTOR_DTYPES or (dtype.kind == "c" and not (params.use_local and kernel == "regblock")):
        return {"vec_a": False, "vec_b": False}
    a_sb, a_sm, a_sk = a_strides
    if kernel == "matvec":  # the CPU shape, both operands contiguous along K
        both = dialect == "opencl" and not params.use_local and a_sk == 1 and b_strides[1] == 1
        return {"vec_a": both, "vec_b": both}
    b_sb, b_sk, b_sn = b_strides
    if not params.use_local:
        return {"vec_a": False, "vec_b": dialect == "opencl" and b_sn == 1}
    g = params.gvw
    if params.pad % g:  # tile rows would not start on a vector boundary in local memory
        return {"vec_a": False, "vec_b": False, "a_mmajor": False, "b_kmajor": False}

    def aligned(*values):
        return all(v % g == 0 for v in values)

    a_batch, b_batch = (a_sb, b_sb) if batch > 1 else (0, 0)
    a_rows = a_sk == 1 and aligned(K, a_off, a_sm, a_batch)
    a_cols = a_sm == 1 and aligned(M, a_off, a_sk, a_batch)  # column-major A: vectors along M
    b_rows = b_sn == 1 and aligned(0 if padded else N, b_off, b_sk, b_batch) and not (real_b and g % 2)
    b_cols = b_sk == 1 and aligned(K, b_off, b_sn, b_batch) and not real_b  # column-major B: vectors along K
    # The GPU shape's vector path needs both (they share one prefetch pipeline).
    both = (a_rows or a_cols) and (b_rows or b_cols)
    return {"vec_a": both, "vec_b": both, "a_mmajor": both and not a_rows, "b_kmajor": both and not b_rows}
