"""An array namespace for the array API's own test suite (data-apis/array-api-tests): a base
library's namespace with polymm's contractions in place of its own.

``matmul``, ``tensordot``, ``vecdot`` and ``linalg.matmul`` / ``linalg.tensordot`` /
``linalg.vecdot`` are :mod:`polymm`'s; every other name (array creation, dtypes, the rest of
``linalg``) is the base library's, so the suite draws its arrays and checks its results with the
base and hands polymm's functions the base's arrays -- which polymm returns as their own kind.

The base is array-api-strict (``POLYMM_XP_BASE=numpy``: NumPy's own namespace); the backend is
the one polymm picks for the base's arrays (``POLYMM_XP_BACKEND=NAME`` to name one: ``cpu``,
``opencl``, ...).  Run it with ``scripts/array_api_tests.sh`` (which sets
``ARRAY_API_TESTS_MODULE=polymm.testing.array_api_namespace``).
"""

from __future__ import annotations

import functools
import importlib
import os
import types

import polymm

__all__ = ["matmul", "tensordot", "vecdot", "linalg"]

_base = importlib.import_module(os.environ.get("POLYMM_XP_BASE") or "array_api_strict")
_backend = os.environ.get("POLYMM_XP_BACKEND") or None

__array_api_version__ = getattr(_base, "__array_api_version__", "2024.12")


def _ours(function):
    @functools.wraps(function)
    def call(*args, **kwargs):
        if _backend is not None:
            kwargs.setdefault("backend", _backend)
        return function(*args, **kwargs)

    return call


matmul = _ours(polymm.matmul)
tensordot = _ours(polymm.tensordot)
vecdot = _ours(polymm.vecdot)

#: The base's ``linalg`` extension, its products polymm's.
linalg = types.ModuleType(f"{__name__}.linalg", "The base's linalg extension with polymm's matmul, tensordot, vecdot.")
linalg.__dict__.update({k: v for k, v in vars(_base.linalg).items() if not k.startswith("__")})
linalg.matmul, linalg.tensordot, linalg.vecdot = matmul, tensordot, vecdot


def __getattr__(name):
    """Every other name is the base library's."""
    return getattr(_base, name)


def __dir__():
    return sorted(set(dir(_base)) | set(__all__))
