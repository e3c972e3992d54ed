"""polymm-cuda: the CUDA backend of polymm (entry point ``cuda``), the shared GPU kernel layer
through CuPy with the tensor cores as CUDA-only kernel families of the shared planner.

Importing this package needs neither CuPy nor a GPU; instantiating
:class:`CUDABackend` does, and raises :class:`polymm.BackendUnavailable` with
the reason otherwise.
"""

from .backend import CUDABackend

__all__ = ["CUDABackend"]
__version__ = "0.1.0"
