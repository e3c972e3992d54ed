"""The kernel ABI, declared once: every kernel's argument list.

From these tables come the kernel signatures (``PM_ARGS``, ``PM_PACK_ARGS``,
``PM_SUM_ARGS``, ``PM_REALIFY_ARGS``, which :func:`polymm.kernels.render` writes into every source)
and both backends' argument packing (:func:`arguments`, :func:`scalar_types`),
so a change to an argument list is made here and nowhere else.  A backend's own kernels
(CUDA's tensor cores) declare their lists beside them, in the same form, and their launches
carry them: every function here takes such a list where it takes a kernel's name.

Kinds: ``size`` is a 32-bit ``int``; ``index`` a 64-bit element offset or
stride (``long`` in OpenCL, ``long long`` in CUDA; any sign, 0 allowed);
``in``/``out`` a global buffer of ``ELEM_T`` (``COPY_T`` for the raw-bits
copies of ``pack``), read-only or written.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SIGNATURES",
    "ABI_OF",
    "signature_defines",
    "arguments",
    "gemm_arguments",
    "scalar_types",
    "buffer_positions",
    "batch_step",
]

# C[b, m, n] = sum_k A[a_off + b*a_sb + m*a_sm + k*a_sk] * B[b_off + b*b_sb + k*b_sk + n*b_sn];
# C contiguous (batch, M, N) from c_off.
_GEMM = (
    ("M", "size"),
    ("N", "size"),
    ("K", "size"),
    ("A", "in"),
    ("a_off", "index"),
    ("a_sb", "index"),
    ("a_sm", "index"),
    ("a_sk", "index"),
    ("B", "in"),
    ("b_off", "index"),
    ("b_sb", "index"),
    ("b_sk", "index"),
    ("b_sn", "index"),
    ("C", "out"),
    ("c_off", "index"),
)
#: name of the argument list -> ((argument, kind), ...), in launch order.
SIGNATURES = {
    "gemm": _GEMM,
    # dst[d_off + b*RP*LD + r*LD + c] = src[s_off + b*s_sb + r*s_sr + c*s_sc] for r < R, c < NC,
    # and 0 in the padding (R <= r < RP or NC <= c < LD).
    "pack": (
        ("R", "size"),
        ("NC", "size"),
        ("RP", "size"),
        ("LD", "size"),
        ("src", "in"),
        ("s_off", "index"),
        ("s_sb", "index"),
        ("s_sr", "index"),
        ("s_sc", "index"),
        ("dst", "out"),
        ("d_off", "index"),
    ),
    # dst[d_off + b*4KN + (2k)*2N + 2n + (0, 1)] = (x, y) and, a row of 2N below, (-y, x) for the
    # complex element x + iy of src at (reals) s_off + b*s_sb + k*s_sk + n*s_sn: B as 2K x 2N reals.
    "realify": (
        ("K", "size"),
        ("N", "size"),
        ("src", "in"),
        ("s_off", "index"),
        ("s_sb", "index"),
        ("s_sk", "index"),
        ("s_sn", "index"),
        ("dst", "out"),
        ("d_off", "index"),
    ),
    # C[c_off + i] = W[i] + W[count + i] + ... (S slices, in slice order).
    "sum": (("S", "size"), ("count", "index"), ("W", "in"), ("C", "out"), ("c_off", "index")),
}
#: kernel -> its argument list.
ABI_OF = {
    "naive": "gemm",
    "tiled": "gemm",
    "tiled-dynamic": "gemm",
    "regblock": "gemm",
    "matvec": "gemm",
    "vecmat": "gemm",
    "pack": "pack",
    "sum-slices": "sum",
    "realify": "realify",
}
_MACROS = {"gemm": "PM_ARGS", "pack": "PM_PACK_ARGS", "sum": "PM_SUM_ARGS", "realify": "PM_REALIFY_ARGS"}
_ELEMENT = {"gemm": "ELEM_T", "pack": "COPY_T", "sum": "ELEM_T", "realify": "ELEM_T"}
_C_TYPES = {
    "size": "const int {}",
    "index": "const INDEX_T {}",
    "in": "GLOBAL const {elem}* RESTRICT {}",
    "out": "GLOBAL {elem}* RESTRICT {}",
}
_NUMPY = {"size": np.int32, "index": np.int64, "in": None, "out": None}


def signature_defines() -> dict[str, str]:
    """``#define`` name -> parameter list, for every argument list."""
    return {
        macro: ", ".join(_C_TYPES[kind].format(name, elem=_ELEMENT[abi]) for name, kind in SIGNATURES[abi])
        for abi, macro in _MACROS.items()
    }


def _args(kernel):
    """The argument list of ``kernel``: a kernel of this package by name (:data:`ABI_OF`), or the
    list itself, which a launch of a backend's own kernel carries (CUDA: ``polymm_cuda.abi``)."""
    return kernel if isinstance(kernel, tuple) else SIGNATURES[ABI_OF[kernel]]


def arguments(kernel: str | tuple, **values) -> list:
    """The launch arguments of ``kernel`` in order: scalars from ``values``, ``None`` for buffers."""
    out = []
    for name, kind in _args(kernel):
        if kind in ("in", "out"):
            out.append(None)
        elif name not in values:
            raise TypeError(f"kernel {kernel!r} needs argument {name!r}")
        else:
            out.append(int(values[name]))
    return out


def gemm_arguments(M: int, N: int, K: int, a, b, c_off: int, kernel: str | tuple = "regblock", **more) -> list:
    """The product kernels' arguments; ``a = (offset, sb, sm, sk)``, ``b = (offset, sb, sk, sn)``;
    ``kernel``'s list may take ``more`` after the "gemm" ones."""
    values = dict(M=M, N=N, K=K, c_off=c_off, **more)
    values.update(zip(("a_off", "a_sb", "a_sm", "a_sk"), a))
    values.update(zip(("b_off", "b_sb", "b_sk", "b_sn"), b))
    return arguments(kernel, **values)


def scalar_types(kernel: str | tuple) -> list:
    """NumPy type of each argument (``None`` for buffers), as PyOpenCL's ``set_scalar_arg_dtypes`` takes."""
    return [_NUMPY[kind] for _, kind in _args(kernel)]


def buffer_positions(kernel: str | tuple) -> dict[str, int]:
    """Buffer argument name -> position."""
    return {name: i for i, (name, kind) in enumerate(_args(kernel)) if kind in ("in", "out")}


def batch_step(kernel: str | tuple, args: list) -> dict[int, int]:
    """Position -> element advance per batch entry of the offsets: what a launch
    over part of a batch (CUDA's grid z is limited) adds for each entry it skips."""
    names = {name: i for i, (name, _) in enumerate(_args(kernel))}
    v = {name: args[i] for name, i in names.items()}
    kind = ABI_OF.get(kernel)  # a backend's own list (a tuple) advances nothing
    if kind == "gemm":
        return {names["a_off"]: v["a_sb"], names["b_off"]: v["b_sb"], names["c_off"]: v["M"] * v["N"]}
    if kind == "pack":
        return {names["s_off"]: v["s_sb"], names["d_off"]: v["RP"] * v["LD"]}
    if kind == "realify":
        return {names["s_off"]: v["s_sb"], names["d_off"]: 4 * v["K"] * v["N"]}
    return {}
