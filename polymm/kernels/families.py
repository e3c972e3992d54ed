"""Kernel families: the paths the planner can take, each one descriptor.

A :class:`Family` names a kind of kernel (the SIMT register blocks, matrix-vector, split-K, the
tensor cores...), the devices it runs on (their kind and dialect) and one function,
``propose(problem)``, that answers either a :class:`Candidate` (the :class:`Choice` it would run,
with the :class:`~polymm.kernels.cost.Work` that costs) or a :class:`Refusal` saying which rule
the product breaks (a dtype, a capability, a layout, an alignment, a database switch point).

The shared families are in :mod:`polymm.kernels.simt`; a backend registers its own with
:func:`register` (CUDA: its tensor-core families). :mod:`polymm.kernels.planner` asks every family
that serves the device, ranks the candidates with the one cost model and keeps the ranking for
``polymm explain``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import KernelParams
from .cost import Work

__all__ = ["Candidate", "Choice", "Family", "Problem", "Refusal", "families_for", "register"]


@dataclass(frozen=True)
class Choice:
    """What a product runs, and why (``reason``).

    ``kernel``/``params``: the product kernel; ``swap``: compute ``C^T = B^T A^T``
    (same memory layout because M or N is 1); ``pack_a``/``pack_b``: copy that
    operand to contiguous scratch first (``pack_b="transposed"`` stores B as
    N x K, what the CPU ``matvec`` reads); ``pad``: round K and B's rows up to
    a multiple of this in the packed copies (zero-filled) so that the vector
    path reads whole vectors; ``splits``: split-K, slices of K computed as a
    batch into scratch, then added in slice order (deterministic); ``real_b``: B is a complex
    operand that ``regblock`` reads in place as its real form (the ``realify`` family's).
    Iterates as ``(kernel, params)``.
    """

    kernel: str
    params: KernelParams | None
    reason: str = ""
    swap: bool = False
    pack_a: bool = False
    pack_b: str = ""
    splits: int = 1
    pad: int = 1
    real_b: bool = False
    #: A dialect-only kernel outside this package (a backend family's): its
    #: ``source`` and ``options`` to compile, ``grid``/``block``, ``smem`` bytes;
    #: optionally ``abi`` (its argument list, in :mod:`~polymm.kernels.abi`'s form, when not the
    #: products'), ``scratch`` (bytes per buffer, slots 3 and on), ``before`` and
    #: ``after`` (launches around it, see :func:`polymm.kernels.planner._extra_launch`), ``operands``
    #: (what it reads, as ``(slot, offset, strides...)``, when not A and B), ``depth`` (the K it
    #: runs over there, when not the product's: byte planes side by side) and
    #: whatever its backend needs (``tma``: CUDA tensor maps). With ``splits``
    #: it must take the batch along grid z, and ``k_step`` (default 1) is what
    #: each slice's depth is a multiple of.
    external: dict | None = None

    def __iter__(self):
        return iter((self.kernel, self.params))

    def replace(self, **changes) -> "Choice":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Problem:
    """One product as the families see it: ``shape = (batch, M, N, K)``; ``a = (offset, (sb, sm,
    sk))`` and ``b = (offset, (sb, sk, sn))`` in elements, offsets counted from a 16-byte aligned
    base; ``precision``: the call's mode (:func:`polymm.precision.current`)."""

    device: object
    dtype: np.dtype
    shape: tuple
    a: tuple
    b: tuple
    precision: str = "default"

    @property
    def batch(self) -> int:
        return self.shape[0]

    @property
    def M(self) -> int:
        return self.shape[1]

    @property
    def N(self) -> int:
        return self.shape[2]

    @property
    def K(self) -> int:
        return self.shape[3]

    @property
    def a_strides(self) -> tuple:
        return tuple(self.a[1])

    @property
    def b_strides(self) -> tuple:
        return tuple(self.b[1])

    def replace(self, **changes) -> "Problem":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Candidate:
    """A family's offer: the ``choice`` it would run and the ``work`` that costs.

    ``relayout``: the family's kernels would read these operands once copied into the layout they
    take (``work`` counts the copies): where it wins, the plan is the best shared candidate's and
    says so, and the backend copies the operands and plans again. ``build``: a function making the
    whole :class:`~polymm.kernels.planner.Plan` where the family's launches are not one product
    (a complex product run as one real product)."""

    family: str
    choice: Choice
    work: Work
    relayout: bool = False
    build: Callable | None = None


@dataclass(frozen=True)
class Refusal:
    """Why ``family`` offers nothing for a product."""

    family: str
    reason: str


@dataclass(frozen=True)
class Family:
    """One kind of kernel: where it runs and what it offers.

    ``kinds``/``dialects``: the devices it serves (``"*"``: any dialect); ``propose(problem)``:
    a :class:`Candidate` or a :class:`Refusal`; ``shared``: a family of the shared kernels (what
    runs a relaid-out product's operands as they lie, see :attr:`Candidate.relayout`)."""

    name: str
    about: str
    propose: Callable[[Problem], Candidate | Refusal]
    kinds: tuple = ("gpu",)
    dialects: tuple = ("*",)
    shared: bool = True

    def serves(self, device) -> bool:
        return device.kind in self.kinds and ("*" in self.dialects or device.dialect in self.dialects)


_FAMILIES: list[Family] = []


def register(family: Family) -> None:
    """Add ``family`` (or replace the one of its name) for the planner to ask; the order of
    registration breaks ties between equal estimates."""
    for i, known in enumerate(_FAMILIES):
        if known.name == family.name:
            _FAMILIES[i] = family
            return
    _FAMILIES.append(family)


def families_for(device) -> list[Family]:
    """The families that serve ``device``, in registration order."""
    return [f for f in _FAMILIES if f.serves(device)]
