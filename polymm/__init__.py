"""polymm: one ``matmul`` for every device.

``polymm.matmul(x1, x2)`` computes ``x1 @ x2`` with the array API standard's
semantics on a backend chosen by name, scope, environment or the inputs'
device; backends are plugins found through the entry-point group
``polymm.backends``.
"""

from .backend import Backend, BackendUnavailable, Operand
from .dispatch import matmul
from .explain import explain
from .precision import use_precision
from .registry import BackendInfo, backends, get_backend, register_backend, use_backend

__all__ = [
    "Backend",
    "BackendInfo",
    "BackendUnavailable",
    "backends",
    "explain",
    "get_backend",
    "matmul",
    "Operand",
    "register_backend",
    "use_backend",
    "use_precision",
]

__version__ = "0.1.0"
