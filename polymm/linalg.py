"""``polymm.linalg``: the array API's ``linalg`` extension as far as polymm computes it (its products)."""

from .contract import tensordot, vecdot
from .dispatch import matmul

__all__ = ["matmul", "tensordot", "vecdot"]
