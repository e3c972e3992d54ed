"""polymm-cuda: the CUDA backend of polymm (entry point ``cuda``).

Importing this package needs neither CuPy nor a GPU; instantiating
:class:`CUDABackend` does, and raises :class:`polymm.BackendUnavailable` with
the reason otherwise.
"""

from .backend import CUDABackend

__all__ = ["CUDABackend"]
__version__ = "0.1.0"
