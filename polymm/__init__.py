"""polymm: one ``matmul`` for every device.

``polymm.matmul(x1, x2)`` computes ``x1 @ x2`` with the array API standard's
semantics on a backend chosen by name, scope, environment or the inputs'
device; ``tensordot``, ``vecdot``, ``einsum`` (and the namespace ``polymm.linalg``)
reduce to the same batched products; backends are plugins found through the entry-point group
``polymm.backends``.  The tools (the ``polymm`` command, explain, bench, the cliff
suite, tuner, fuzzer) sit on top of this runtime in :mod:`polymm.tools`.
"""

from .backend import Backend, BackendUnavailable, Operand
from . import dispatch
from .compilation import warmup
from .dispatch import matmul
from .contract import tensordot, vecdot
from .notation import einsum
from . import linalg
from .precision import use_precision
from .registry import BackendInfo, backends, get_backend, register_backend, set_default_backend, use_backend

__all__ = [
    "Backend",
    "BackendInfo",
    "BackendUnavailable",
    "backends",
    "einsum",
    "get_backend",
    "linalg",
    "matmul",
    "Operand",
    "register_backend",
    "set_default_backend",
    "tensordot",
    "use_backend",
    "use_precision",
    "vecdot",
    "warmup",
]

__version__ = "0.1.0"


def _dask_matmul(x1, x2, /, **options):
    """Dask arrays' route (:func:`polymm.dask.matmul`): Dask is optional, so its module (and Dask)
    is imported at the first Dask array; dispatch calls it through ``dispatch.lazy_matmul``."""
    from .dask import matmul

    return matmul(x1, x2, **options)


def _grad_matmul(x1, x2, /, **options):
    """PyTorch tensors that require grad (:func:`polymm.autograd.matmul`): torch is optional, so its
    module (and torch) is imported at the first such tensor; dispatch calls it through ``dispatch.grad_matmul``."""
    from .autograd import matmul

    return matmul(x1, x2, **options)


dispatch.lazy_matmul = _dask_matmul
dispatch.grad_matmul = _grad_matmul
