"""The fuzzer's contraction cases: random ``einsum``, ``tensordot`` and ``vecdot`` problems.

Drawn beside the matmul cases of :mod:`polymm.tools.fuzz` (the same ``(seed, index)``, a
stream of its own, so the matmul cases of a seed stay what they were), each a recipe whose
Python source builds and runs it: the reproducer of a failure is the code that failed.
Operands come in permuted and sliced layouts (the strided views the reduction hands over);
results are checked against the suite's higher-precision einsum reference, ``out=`` poisoned.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

import numpy as np

from ..backend import CONTRACT_DTYPES, algorithm_serves, optional_dtypes

__all__ = ["ContractionCase", "SHARE", "draw", "code", "check"]

#: Share of case indices that also draw a contraction.
SHARE = 0.25
FUNCTIONS = ("einsum", "tensordot", "vecdot")
LETTERS = "abcdefg"


@dataclass(frozen=True)
class ContractionCase:
    function: str
    call: str  # the arguments after the operands, as source ("axes=([1], [0])")
    subscripts: str  # the einsum the reference computes (x1 conjugated for complex vecdot)
    shapes: tuple  # each operand's shape as allocated
    layouts: tuple  # each operand's view: a permutation of its axes, or None
    dtype: str
    out: bool
    seed: int
    index: int

    @property
    def kind(self) -> str:
        return f"contraction-{self.function}"

    def describe(self) -> str:
        return f"{self.function} {self.subscripts!r} {self.dtype} shapes {self.shapes} layouts {self.layouts}" + (
            " out=" if self.out else ""
        )


def draw(seed: int, index: int, dtypes=None) -> ContractionCase | None:
    """The contraction of case ``index`` of run ``seed``, or None (most indices draw none)."""
    rng = np.random.default_rng([seed, index, 33])
    if rng.random() >= SHARE:
        return None
    dtypes = [str(np.dtype(d)) for d in (dtypes or CONTRACT_DTYPES + optional_dtypes())]
    dtype = dtypes[rng.integers(len(dtypes))]
    function = FUNCTIONS[rng.integers(len(FUNCTIONS))]
    sizes = {c: int(rng.choice([1, 2, 3, 5, 8, 13, 17])) for c in LETTERS}
    if function == "einsum":
        count = 2 if rng.random() < 0.75 else 3
        terms = [list(rng.choice(list(LETTERS), size=rng.integers(1, 5), replace=False)) for _ in range(count)]
        seen = [c for t in terms for c in t]
        if rng.random() < 0.15:  # a diagonal
            terms[0].append(terms[0][0])
        output = [c for c in dict.fromkeys(seen) if rng.random() < 0.5]
        rng.shuffle(output)
        subscripts = ",".join("".join(t) for t in terms) + "->" + "".join(output)
        shapes = [tuple(sizes[c] for c in t) for t in terms]
        call = repr(subscripts)
    elif function == "tensordot":
        n1, n2, n = (int(v) for v in rng.integers(0, 4, 3))
        n = min(n, n1, n2)
        first, second = list(LETTERS[:n1]), list(LETTERS[n1 : n1 + n2])
        axes1 = [int(a) for a in rng.permutation(n1)[:n]]
        axes2 = [int(a) for a in rng.permutation(n2)[:n]]
        for a1, a2 in zip(axes1, axes2):
            second[a2] = first[a1]
        kept = [c for i, c in enumerate(first) if i not in axes1] + [c for j, c in enumerate(second) if j not in axes2]
        subscripts = f"{''.join(first)},{''.join(second)}->{''.join(kept)}"
        shapes = [tuple(sizes[c] for c in first), tuple(sizes[c] for c in second)]
        call = f"axes=({axes1}, {axes2})"
    else:
        ndim1, ndim2 = (int(v) for v in rng.integers(1, 4, 2))
        ndim = max(ndim1, ndim2)
        axis = -int(rng.integers(1, min(ndim1, ndim2) + 1))
        labels = LETTERS[:ndim]
        full = [sizes[c] for c in labels]
        shapes = [
            tuple(1 if (i != ndim + axis and rng.random() < 0.3) else full[i] for i in range(ndim - d, ndim))
            for d in (ndim1, ndim2)
        ]
        kept = labels[: ndim + axis] + labels[ndim + axis + 1 :]
        subscripts = f"{labels[ndim - ndim1 :]},{labels[ndim - ndim2 :]}->{kept}"
        call = f"axis={axis}"
    layouts = tuple(
        tuple(int(a) for a in rng.permutation(len(s))) if len(s) > 1 and rng.random() < 0.4 else None for s in shapes
    )
    return ContractionCase(
        function, call, subscripts, tuple(shapes), layouts, dtype, bool(rng.random() < 0.3), seed, index
    )


def code(case: ContractionCase, backend: str) -> str:
    """Python source that builds the case's operands, runs it on ``backend`` and checks the result."""
    lines = [
        "import numpy as np",
        "import polymm",
        "from polymm.testing.reference import assert_contraction_matches, poison, random_array",
        f"rng = np.random.default_rng([{case.seed}, {case.index}, 34])",
    ]
    names = []
    for i, (shape, layout) in enumerate(zip(case.shapes, case.layouts)):
        name = f"x{i + 1}"
        if layout is None:
            lines.append(f"{name} = random_array(rng, {shape}, {case.dtype!r})")
        else:  # allocated in a permuted order, seen in the drawn one: strides not C's
            stored = tuple(shape[a] for a in layout)
            back = tuple(int(a) for a in np.argsort(layout))
            lines.append(f"{name} = random_array(rng, {stored}, {case.dtype!r}).transpose({back})")
        names.append(name)
    operands = ", ".join(names)
    head = (
        f"polymm.einsum({case.call}, {operands}"
        if case.function == "einsum"
        else f"polymm.{case.function}({operands}, {case.call}"
    )
    lines.append(f"result = {head}, backend={backend!r})")
    reference = list(names)
    if case.function == "vecdot" and np.dtype(case.dtype).kind == "c":
        reference[0] = f"np.conj({names[0]})"
    check = f"assert_contraction_matches({{}}, {case.subscripts!r}, [{', '.join(reference)}], {case.dtype!r})"
    lines.append(check.format("result"))
    if case.out:
        lines.append(f"out = poison(np.shape(result), {case.dtype!r})")
        lines.append(f"assert {head}, backend={backend!r}, out=out) is out")
        lines.append(check.format("out"))
    return "\n".join(lines) + "\n"


@np.errstate(all="ignore")
def check(case: ContractionCase, backend: str):
    """Run the case on ``backend``: ``(status, check, message)`` as the fields of the fuzzer's
    ``Outcome`` ("refused" where the backend does not compute the dtype and says so with a
    ``TypeError`` naming it)."""
    import polymm

    impl = polymm.get_backend(backend)
    dtype = np.dtype(case.dtype)
    try:
        impl.check_dtype(dtype, np.empty((1, 1), dtype))
        served = algorithm_serves(impl, "auto", dtype)
    except TypeError:
        served = False
    try:
        exec(compile(code(case, backend), f"<contraction case {case.index}>", "exec"), {})
    except TypeError as exc:
        if not served and str(dtype) in str(exc):
            return "refused", "", ""
        return ("fail", "contraction raised", f"{type(exc).__name__}: {exc}")
    except AssertionError as exc:
        return ("fail", "contraction value", str(exc))
    except Exception:
        return ("fail", "contraction raised", traceback.format_exc(limit=3))
    if not served and 0 not in [n for shape in case.shapes for n in shape]:
        return ("fail", "contraction refusal", f"{backend} computed {dtype}, which it says it does not")
    return "ok", "", ""
