"""Result dtypes: the input library's own promotion, checked against the contract."""

from __future__ import annotations

import numpy as np

from .backend import CONTRACT_DTYPES, is_bfloat16, optional_dtypes

SUPPORTED = frozenset(CONTRACT_DTYPES)
_NAMES = ", ".join(str(d) for d in CONTRACT_DTYPES) + " (and bfloat16 where ml_dtypes is installed)"


def check_operand_dtype(dtype, which: str, function: str = "polymm.matmul") -> np.dtype:
    """The operand's dtype as a NumPy dtype, or a ``TypeError`` naming it (and ``function``)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{function}: {which} has unsupported dtype {dtype}; supported: {_NAMES}") from None
    native = dtype.newbyteorder("=")  # byte-swapped data is cast to native order on the way in
    if native not in SUPPORTED and not (is_bfloat16(native) and native in optional_dtypes()):
        raise TypeError(f"{function}: {which} has unsupported dtype {dtype}; supported: {_NAMES}")
    return dtype


def numpy_dtype_of(library_dtype) -> np.dtype:
    """Map another library's dtype (``torch.float32``, ``array_api_strict.int8``) to NumPy's."""
    try:
        return np.dtype(library_dtype)
    except TypeError:
        pass
    name = str(library_dtype).rsplit(".", 1)[-1]
    if name == "bfloat16" and optional_dtypes():  # torch.bfloat16 and the like, through ml_dtypes
        return optional_dtypes()[0]
    try:
        return np.dtype(name)
    except TypeError:
        raise TypeError(f"polymm.matmul: unsupported dtype {library_dtype}; supported: {_NAMES}") from None


def foreign_result_type(x1, x2) -> np.dtype:
    """Promotion by the foreign library itself (PyTorch's rules for tensors, etc.)."""
    import array_api_compat

    xp = array_api_compat.array_namespace(x1, x2)
    return numpy_dtype_of(xp.result_type(x1.dtype, x2.dtype))
