"""polymm-cuda: the CUDA backend of polymm (entry point ``cuda``), and ``cuda-layer``, the same
on the shared GPU kernel layer, selected by name until a GPU run has validated it.

Importing this package needs neither CuPy nor a GPU; instantiating
:class:`CUDABackend` does, and raises :class:`polymm.BackendUnavailable` with
the reason otherwise.
"""

from .backend import CUDABackend
from .layer import CUDALayerBackend

__all__ = ["CUDABackend", "CUDALayerBackend"]
__version__ = "0.1.0"
