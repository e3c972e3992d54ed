"""Result dtypes: the input library's own promotion, checked against the contract."""

from __future__ import annotations

import numpy as np

from .backend import CONTRACT_DTYPES

SUPPORTED = frozenset(CONTRACT_DTYPES)
_NAMES = ", ".join(str(d) for d in CONTRACT_DTYPES)


def check_operand_dtype(dtype, which: str) -> np.dtype:
    """The operand's dtype as a NumPy dtype, or a ``TypeError`` naming it."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"polymm.matmul: {which} has unsupported dtype {dtype}; supported: {_NAMES}") from None
    if dtype.newbyteorder("=") not in SUPPORTED:  # byte-swapped data is cast to native order on the way in
        raise TypeError(f"polymm.matmul: {which} has unsupported dtype {dtype}; supported: {_NAMES}")
    return dtype


def numpy_dtype_of(library_dtype) -> np.dtype:
    """Map another library's dtype (``torch.float32``, ``array_api_strict.int8``) to NumPy's."""
    try:
        return np.dtype(library_dtype)
    except TypeError:
        pass
    name = str(library_dtype).rsplit(".", 1)[-1]
    try:
        return np.dtype(name)
    except TypeError:
        raise TypeError(f"polymm.matmul: unsupported dtype {library_dtype}; supported: {_NAMES}") from None


def foreign_result_type(x1, x2) -> np.dtype:
    """Promotion by the foreign library itself (PyTorch's rules for tensors, etc.)."""
    import array_api_compat

    xp = array_api_compat.array_namespace(x1, x2)
    return numpy_dtype_of(xp.result_type(x1.dtype, x2.dtype))
