"""Timing the contractions users write: ``polymm bench --suite contractions``.

Each case (attention scores and outputs, bilinear forms, batched traces of products,
tensor-network pairs with permuted indices, ``tensordot``, ``vecdot``) is timed three ways on
each backend: polymm's function; the input library's own (``numpy.einsum`` /
``numpy.tensordot`` / ``numpy.vecdot`` for NumPy arrays, ``cupy.einsum`` for CuPy's; none for
PyOpenCL, which has no einsum); and the ``polymm.matmul`` calls the contraction reduces to, on
the very views it hands over (caught once, then timed alone): the reduction's own cost is the
difference.  The three are sampled in rounds that take turns (:func:`_interleaved`), the best
sample of each kept.  A benchmark, never a test: the figures are recorded by whoever runs it, with the
card and commit beside them.  ``quick=True`` shrinks every case to check the tool works.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .timing import host_clock, measure

__all__ = ["Case", "Result", "CASES", "run"]


@dataclass(frozen=True)
class Case:
    name: str
    function: str  # "einsum", "tensordot" or "vecdot"
    spec: object  # the subscripts, tensordot's axes, or vecdot's axis
    shapes: tuple
    quick_shapes: tuple
    dtype: str = "float32"


CASES = (
    Case("attention-scores", "einsum", "bhqd,bhkd->bhqk", ((8, 12, 256, 64), (8, 12, 256, 64)), ((2, 2, 16, 8),) * 2),
    Case(
        "attention-output",
        "einsum",
        "bhqk,bhkd->bhqd",
        ((8, 12, 256, 256), (8, 12, 256, 64)),
        ((2, 2, 16, 16), (2, 2, 16, 8)),
    ),
    Case("bilinear-form", "einsum", "i,ij,j->", ((2048,), (2048, 2048), (2048,)), ((16,), (16, 16), (16,))),
    Case(
        "bilinear-batched",
        "einsum",
        "bi,ij,bj->b",
        ((256, 1024), (1024, 1024), (256, 1024)),
        ((4, 16), (16, 16), (4, 16)),
    ),
    Case("batched-trace-of-product", "einsum", "bij,bji->b", ((64, 256, 256),) * 2, ((3, 8, 8),) * 2),
    Case(
        "tn-pair-permuted",
        "einsum",
        "aibj,jkbi->ak",
        ((64, 32, 16, 32), (32, 64, 16, 32)),
        ((4, 3, 2, 3), (3, 4, 2, 3)),
    ),
    Case("tn-pair-transposed-out", "einsum", "abc,cbd->da", ((256, 32, 64), (64, 32, 256)), ((4, 3, 5), (5, 3, 4))),
    Case("tensordot-two-axes", "tensordot", ([1, 2], [1, 0]), ((256, 64, 48), (48, 64, 256)), ((4, 3, 5), (5, 3, 4))),
    Case("vecdot-rows", "vecdot", -1, ((8192, 512), (8192, 512)), ((16, 8), (16, 8))),
)


@dataclass
class Result:
    case: str
    backend: str
    dtype: str
    shapes: tuple
    polymm_us: float
    library: str  # the input library's function timed, or "" when it has none
    library_us: float | None
    matmul_us: float  # the polymm.matmul calls it reduces to, on the same views
    products: int  # how many of them
    check: str  # "ok", or what differed from numpy.einsum

    @property
    def vs_library(self) -> float | None:
        """polymm's speed over the input library's (above 1: polymm is faster)."""
        return self.library_us / self.polymm_us if self.library_us else None

    @property
    def vs_matmul(self) -> float:
        """The contraction's time over the products' alone (1.0: the reduction costs nothing)."""
        return self.polymm_us / self.matmul_us

    def as_dict(self) -> dict:
        return asdict(self) | {"vs_library": self.vs_library, "vs_matmul": self.vs_matmul}


def _call(module, case: Case, operands, **options):
    if case.function == "einsum":
        return module.einsum(case.spec, *operands, **options)
    if case.function == "tensordot":
        return module.tensordot(*operands, axes=case.spec, **options)
    return module.vecdot(*operands, axis=case.spec, **options)


def _products(call):
    """The ``(x1, x2, options)`` of every ``polymm.matmul`` that ``call()`` makes."""
    from .. import dispatch

    seen, real = [], dispatch.matmul

    def spy(a, b, **options):
        seen.append((a, b, options))
        return real(a, b, **options)

    dispatch.matmul = spy
    try:
        call()
    finally:
        dispatch.matmul = real
    return seen


def run(backends, cases=None, quick: bool = False, budget: float = 0.5, progress=None) -> list[Result]:
    """Time ``cases`` (default :data:`CASES`) on each backend; ``quick``: tiny shapes, to check the tool."""
    import polymm

    from ..testing.reference import random_array

    results = []
    rng = np.random.default_rng(0)
    chosen = [c for c in CASES if cases is None or c.name in cases]
    for name in backends:
        impl = polymm.get_backend(name)
        clock = host_clock(impl.synchronize)
        library = impl.array_library
        for case in chosen:
            if progress is not None:
                progress(name, case)
            shapes = case.quick_shapes if quick else case.shapes
            host = [random_array(rng, s, case.dtype) for s in shapes]
            operands = [impl.from_numpy(x) for x in host]
            ours = _call(polymm, case, operands, backend=name)
            expected = _call(np, case, host)
            got = np.asarray(impl.to_numpy(ours))
            tol = 1e-3 * float(np.max(np.abs(expected), initial=1.0))
            check = "ok" if got.shape == expected.shape and np.allclose(got, expected, rtol=1e-3, atol=tol) else "WRONG"
            products = _products(lambda: _call(polymm, case, operands, backend=name))

            def reduced():
                for a, b, options in products:
                    polymm.matmul(a, b, **options)

            own, own_call = _library_call(library, case, operands)
            sides = [lambda: _call(polymm, case, operands, backend=name), reduced]
            if own_call is not None:
                sides.append(own_call)
            best = _interleaved(sides, clock, budget)
            results.append(
                Result(
                    case.name,
                    name,
                    case.dtype,
                    tuple(shapes),
                    best[0] * 1e6,
                    own,
                    best[2] * 1e6 if own_call is not None else None,
                    best[1] * 1e6,
                    len(products),
                    check,
                )
            )
    return results


#: Rounds of :func:`_interleaved`: each side is sampled once a round, the order turning.
ROUNDS = 5


def _interleaved(sides, clock, budget) -> list[float]:
    """The best seconds per call of each side, sampled in ``ROUNDS`` rounds that take turns (each
    side ``budget / ROUNDS`` seconds a round, the first side changing): a busy spell of the
    machine slows every side alike rather than the one measured then."""
    best = [float("inf")] * len(sides)
    for r in range(ROUNDS):
        for i in [(r + j) % len(sides) for j in range(len(sides))]:
            timing = measure(sides[i], clock, samples=3, budget=budget / ROUNDS, warm=r == 0)
            best[i] = min(best[i], timing.best)
    return best


def _library_call(library, case, operands):
    """``(the input library's function, a call of it)``, or ``("", None)`` where it has none."""
    if library == "numpy":
        module = np
    elif library == "cupy":
        import cupy as module
    else:
        return "", None
    if case.function == "vecdot" and not hasattr(module, "vecdot"):
        return "", None
    return f"{library}.{case.function}", lambda: _call(module, case, operands)
