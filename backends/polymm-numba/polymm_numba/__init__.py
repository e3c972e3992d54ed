"""polymm's CPU backend: matmul kernels written in Numba.

Registered under the entry-point group ``polymm.backends`` as ``cpu``, the
default for NumPy arrays.  Importing this package is light: Numba is imported
with :mod:`polymm_numba.backend`, when the backend is made, and
:func:`polymm.backends` lists it from :func:`info` (its ``polymm.backend_info``
entry point) without that.
"""

__all__ = ["CPUBackend", "INFO", "info", "params"]
__version__ = "0.1.0"

from .listing import INFO


def info() -> dict:
    """What ``polymm.backends()`` lists for ``cpu`` (the ``polymm.backend_info`` entry point)."""
    return dict(INFO)


def __getattr__(name):
    if name == "CPUBackend":
        from .backend import CPUBackend

        return CPUBackend
    if name == "params":
        import importlib

        return importlib.import_module(".params", __name__)
    raise AttributeError(f"module 'polymm_numba' has no attribute {name!r}")
