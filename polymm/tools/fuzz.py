"""A fuzzer for ``polymm.matmul`` on one backend: random valid and invalid problems, checked
against the suite's reference, with failures shrunk into short runnable reproducers.

Every case is a :class:`Case`, a small recipe drawn from ``(seed, index)`` alone
(:func:`draw_case`), so ``polymm fuzz --seed S --case I`` replays exactly one case.  A
recipe is turned into Python source (:func:`case_code`): the fuzzer builds its arrays by
running that source, so the reproducer printed for a failure is the very code that failed.
Valid problems are checked with :func:`polymm.testing.assert_matches` (values, dtype,
shape), ``out`` identity, untouched inputs and untouched neighbours of a strided ``out``;
invalid ones must raise the contract's exception type with a message naming what was wrong.
A quarter of the indices also draw a contraction (``einsum``, ``tensordot``, ``vecdot``:
:mod:`polymm.tools.fuzz_contractions`), counted by kind beside the invalid ones.

Use it from Python (no pytest needed)::

    from polymm.tools import fuzz
    summary = fuzz.run(["cpu"], cases=1000, seed=1)
    assert not summary.failures, summary.failures[0].reproducer
"""

from __future__ import annotations

import ctypes
import dataclasses
import time
import traceback
from dataclasses import dataclass, field, replace

import numpy as np

from ..backend import CONTRACT_DTYPES, algorithm_serves, is_bfloat16, optional_dtypes
from ..testing.checks import unwritten
from ..testing.reference import assert_matches, poison, random_array
from . import fuzz_contractions

__all__ = ["Case", "Failure", "Outcome", "Summary", "case_code", "check_case", "draw_case", "run", "shrink"]

#: Sizes on and beside the tile edges of the kernels (and 1, 2, 3 for the degenerate paths).
EDGE_SIZES = (1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129)
#: Multiply-adds allowed per case (the longdouble reference is slow): ordinary and big cases.
COST = 600_000
BIG_COST = 3_000_000

#: How operands are laid out in memory (see :func:`_operand_code`).
LAYOUTS = ("C", "F", "T", "neg", "negrow", "step2", "step3", "step-2", "bcast", "batchT", "swap")
_LAYOUT_WEIGHTS = (40, 10, 12, 8, 4, 6, 4, 4, 5, 3, 4)
#: Share of valid cases (and of read-only ``out=`` ones) whose arrays, ``out=`` included, are the
#: backend's own (:class:`OwnArrays`): a device backend's short path for them is not the one NumPy
#: operands take, and its array adapter's ``assign``, ``shares_memory``, ``is_c_contiguous`` and
#: ``writeable`` decide what happens to an ``out=`` of its library.
NATIVE_SHARE = 0.25
#: How ``out=`` is given for valid problems.
OUT_MODES = ("none", "exact", "strided", "fortran", "reversed", "alias1", "alias2", "aliasboth")
#: The invalid problems, each with exactly one thing wrong.
INVALID_KINDS = (
    "contraction",
    "zero-d",
    "batch",
    "dtype",
    "operand-type",
    "out-shape",
    "out-dtype",
    "out-readonly",
    "out-type",
    "algorithm",
)
#: Operand dtypes outside the contract, as the source that makes them from a float64 array ``v``.
BAD_DTYPES = {
    "object": "v.astype(object)",
    "str": 'v.astype("U3")',
    "bytes": 'v.astype("S3")',
    "datetime64": 'np.zeros(v.shape, "M8[s]")',
    "timedelta64": 'np.zeros(v.shape, "m8[s]")',
    "structured": 'np.zeros(v.shape, [("x", "f4")])',
    "longdouble": "v.astype(np.longdouble)",
    "clongdouble": "v.astype(np.clongdouble)",
}
if np.dtype(np.longdouble) in CONTRACT_DTYPES:  # platforms where long double is double
    del BAD_DTYPES["longdouble"], BAD_DTYPES["clongdouble"]
BAD_ALGORITHMS = ("no-such-kernel", "AUTO", "tiled ", "", "blas")


@dataclass(frozen=True)
class Case:
    """One problem: enough to rebuild it exactly (arrays come from ``data_seed``)."""

    kind: str  # "valid" or one of INVALID_KINDS
    dtype1: str
    dtype2: str
    batch1: tuple[int, ...]
    batch2: tuple[int, ...]
    m: int
    k: int
    n: int
    k2: int  # x2's contraction length (differs from k only for "contraction")
    vec1: bool  # x1 is 1-D (k,)
    vec2: bool  # x2 is 1-D (k2,)
    layout1: str
    layout2: str
    out: str  # one of OUT_MODES (valid and out-* cases)
    specials1: int  # NaN/Inf (floats) or extreme integers written into x1
    specials2: int
    algorithm: str
    data_seed: int
    bad: str = ""  # what is wrong, for invalid kinds ("x1", a dtype name, ...)
    native: bool = False  # arrays (out= too) made the backend's own, layouts and aliasing kept (CuPy, PyOpenCL)

    def __post_init__(self):  # batches as tuples also when rebuilt from JSON lists
        object.__setattr__(self, "batch1", tuple(self.batch1))
        object.__setattr__(self, "batch2", tuple(self.batch2))

    @property
    def shape1(self) -> tuple[int, ...]:
        return (self.k,) if self.vec1 else self.batch1 + (self.m, self.k)

    @property
    def shape2(self) -> tuple[int, ...]:
        return (self.k2,) if self.vec2 else self.batch2 + (self.k2, self.n)

    @property
    def result_dtype(self) -> np.dtype:
        return np.result_type(np.dtype(self.dtype1), np.dtype(self.dtype2)).newbyteorder("=")

    @property
    def result_shape(self) -> tuple[int, ...]:
        return (
            _broadcast(self.batch1, self.batch2) + (() if self.vec1 else (self.m,)) + (() if self.vec2 else (self.n,))
        )

    @property
    def cost(self) -> int:
        b = 1
        for d in _broadcast(self.batch1, self.batch2, strict=False):
            b *= d
        return b * max(self.m, 1) * max(self.k, 1) * max(self.n, 1)

    def describe(self) -> str:
        what = f"{self.shape1} {self.dtype1} [{self.layout1}] @ {self.shape2} {self.dtype2} [{self.layout2}]"
        extra = f", out={self.out}" if self.out != "none" else ""
        extra += ", as the backend's arrays" if self.native else ""
        if self.kind != "valid":
            return f"invalid ({self.kind}{': ' + self.bad if self.bad else ''}): {what}{extra}"
        return what + extra


def _broadcast(b1, b2, strict=True) -> tuple[int, ...]:
    nd = max(len(b1), len(b2))
    p1 = (1,) * (nd - len(b1)) + tuple(b1)
    p2 = (1,) * (nd - len(b2)) + tuple(b2)
    out = []
    for d1, d2 in zip(p1, p2):
        if d1 != d2 and d1 != 1 and d2 != 1:
            if strict:
                raise ValueError("batch dimensions do not broadcast")
            out.append(max(d1, d2))
        else:
            out.append(d1 if d2 == 1 else d2)
    return tuple(out)


# ---------------------------------------------------------------------------------- drawing


def case_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of case ``index`` of run ``seed``: it depends on both and on nothing else."""
    return np.random.default_rng([seed, index])


def _pick(rng, options, weights=None):
    if weights is None:
        return options[int(rng.integers(len(options)))]
    p = np.asarray(weights, float)
    return options[int(rng.choice(len(options), p=p / p.sum()))]


def _size(rng, cap=129) -> int:
    r = rng.random()
    if r < 0.03:
        return 0
    if r < 0.6:
        return _pick(rng, [s for s in EDGE_SIZES if s <= cap])
    return int(min(cap, max(1, round(cap ** rng.random()))))  # log-uniform: small sizes are common


def _batches(rng, r1, r2, tiny=False):
    nd = max(r1, r2, 2) - 2
    full = [int(_pick(rng, (1, 2, 3, 4, 5, 7))) for _ in range(nd)]
    if tiny:  # thousands of tiny matrices
        full = (
            [int(rng.integers(1000, 4001))]
            if nd <= 1
            else [int(rng.integers(20, 70)), int(rng.integers(20, 70))] + [1] * (nd - 2)
        )
        nd = len(full)
    if rng.random() < 0.02 and full:  # an empty batch
        full[0] = 0
    out = []
    for r in (r1, r2):
        own = full[nd - (r - 2) :] if r > 2 else []
        own = [1 if (d > 1 and rng.random() < 0.2) else d for d in own]  # broadcasting with 1s
        out.append(tuple(own))
    return out


def _promotes(dtype1: str, dtype2: str) -> bool:
    try:
        np.result_type(np.dtype(dtype1), np.dtype(dtype2))
    except TypeError:
        return False
    return True


#: Sizes and cost are this many times larger in a run of a reduced precision mode (its tensor-core
#: paths start where products are no longer tiny).
LARGE = 4


def draw_case(seed: int, index: int, dtypes=None, algorithms=("auto",), large: bool = False) -> Case:
    """Case ``index`` of the run with ``seed``: a pure function of its arguments (``large``: sizes
    up to ``LARGE`` times the usual, for the precision modes)."""
    rng = case_rng(seed, index)
    cap = 129 * (LARGE if large else 1)
    dtypes = [str(np.dtype(d)) for d in (dtypes or CONTRACT_DTYPES + optional_dtypes())]
    kind = "valid" if rng.random() < 0.85 else _pick(rng, INVALID_KINDS)
    dtype1 = _pick(rng, dtypes)
    dtype2 = dtype1 if rng.random() < 0.7 else _pick(rng, dtypes)
    if not _promotes(dtype1, dtype2):  # bfloat16 with float16: NumPy has no common dtype
        dtype2 = dtype1
    r1, r2 = (_pick(rng, (1, 2, 3, 4), (12, 50, 25, 13)) for _ in range(2))
    shape_class = _pick(rng, ("plain", "gemv", "gevm", "deep-k", "tiny-batch"), (92, 2.5, 1.5, 2, 2))
    m, k, n = _size(rng, cap), _size(rng, cap), _size(rng, cap)
    if shape_class == "tiny-batch":
        r1, r2 = _pick(rng, ((3, 3), (3, 2), (2, 3), (4, 4), (4, 3)))
        m, k, n = (int(rng.integers(1, 5)) for _ in range(3))
    batch1, batch2 = _batches(rng, r1, r2, tiny=shape_class == "tiny-batch")
    if shape_class in ("gemv", "gevm"):
        batch1 = batch2 = ()
        big = [int(rng.integers(100, 700)) for _ in range(2)]
        small = int(rng.integers(1, 9))
        m, k, n = (big[0], big[1], small) if shape_class == "gemv" else (small, big[1], big[0])
        r1 = r2 = 2
        if rng.random() < 0.3:
            r2, r1 = (1, 2) if shape_class == "gemv" else (2, 1)
    elif shape_class == "deep-k":
        m, n = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        k = 256 * max(m, n) + int(rng.integers(0, 300))
        batch1 = batch2 = ()
        r1, r2 = 2, 2
    vec1, vec2 = r1 == 1, r2 == 1
    if vec1:
        batch1 = ()
    if vec2:
        batch2 = ()
    case = Case(
        kind,
        dtype1,
        dtype2,
        tuple(batch1),
        tuple(batch2),
        m,
        k,
        n,
        k,
        vec1,
        vec2,
        _pick(rng, LAYOUTS, _LAYOUT_WEIGHTS),
        _pick(rng, LAYOUTS, _LAYOUT_WEIGHTS),
        "none",
        0,
        0,
        _pick(rng, tuple(algorithms)),
        int(rng.integers(2**31)),
    )
    budget = (BIG_COST if shape_class != "plain" else COST) * (LARGE**2 if large else 1)
    case = _bound(case, budget)
    specials = lambda: int(rng.integers(1, 4)) if rng.random() < 0.15 else 0  # noqa: E731
    case = replace(case, specials1=specials(), specials2=specials())
    if kind == "valid" or kind.startswith("out-"):
        case = replace(
            case,
            out=_pick(rng, OUT_MODES, (45, 20, 10, 5, 5, 6, 5, 4) if kind == "valid" else (0, 1, 0, 0, 0, 0, 0, 0)),
        )
        if case.out.startswith("alias"):
            case = _bound(_make_alias(case, rng), budget)
    if kind != "valid":
        case = _make_invalid(case, rng, algorithms)
        return _own(case) if case.kind == "out-readonly" and rng.random() < 0.5 else case
    return _own(case) if rng.random() < NATIVE_SHARE else case


def _own(case: Case) -> Case:
    """``case`` with the backend's own arrays (not bfloat16, not byte-swapped: device libraries have neither)."""
    if "bfloat16" in (case.dtype1, case.dtype2):
        return case
    native = {name: "C" for name in ("layout1", "layout2") if getattr(case, name) == "swap"}
    return replace(case, native=True, **native)


_TIED = {"alias1": ("n",), "alias2": ("m",), "aliasboth": ("m", "n")}


def _tie(case: Case) -> Case:
    """Re-apply the shape ties an aliased ``out`` needs (they are equal to K)."""
    return replace(case, k2=case.k, **{name: case.k for name in _TIED.get(case.out, ())})


def _bound(case: Case, budget: int) -> Case:
    """Keep the cost bounded: halve the largest matrix dimension until the case fits ``budget``."""
    while case.cost > budget and max(case.m, case.k, case.n) > 1:
        dims = {"m": case.m, "k": case.k, "n": case.n}
        name = max(dims, key=dims.get)
        name = "k" if name in _TIED.get(case.out, ()) else name
        case = _tie(replace(case, **{name: dims[name] // 2}))
    return case


def _make_alias(case: Case, rng) -> Case:
    """Adjust shapes, dtypes and layouts so that ``out`` can be the aliased operand itself."""
    writable = lambda lay: lay if lay not in ("bcast", "swap") else "C"  # noqa: E731
    case = replace(case, vec1=False, vec2=False, dtype2=case.dtype1)
    if case.out == "alias1":  # (..., M, K) @ (K, K) -> (..., M, K)
        full = case.batch1 if len(case.batch1) >= len(case.batch2) else case.batch2
        return replace(
            case,
            n=case.k,
            k2=case.k,
            batch1=full,
            batch2=tuple(1 if rng.random() < 0.3 else d for d in full[len(full) - min(len(case.batch2), len(full)) :]),
            layout1=writable(case.layout1),
        )
    if case.out == "alias2":  # (M, M) @ (..., M, N) -> (..., M, N)
        full = case.batch2 if len(case.batch2) >= len(case.batch1) else case.batch1
        return replace(
            case,
            m=case.k,
            k2=case.k,
            batch2=full,
            batch1=tuple(1 if rng.random() < 0.3 else d for d in full[len(full) - min(len(case.batch1), len(full)) :]),
            layout2=writable(case.layout2),
        )
    return replace(case, m=case.k, n=case.k, k2=case.k, batch2=case.batch1, layout1=writable(case.layout1))


def _make_invalid(case: Case, rng, algorithms) -> Case:
    kind = case.kind
    case = replace(case, out="none" if not kind.startswith("out-") else case.out)
    if kind == "contraction":
        k2 = case.k + _pick(rng, (1, -1, 2, 7)) if case.k > 1 else case.k + 1
        return replace(case, k2=max(k2, 0) if max(k2, 0) != case.k else case.k + 1)
    if kind == "batch":
        b1, b2 = list(case.batch1) or [2], list(case.batch2) or [3]
        d = int(rng.integers(2, 6))
        b1[-1], b2[-1] = d, d + 1
        return replace(case, vec1=False, vec2=False, batch1=tuple(b1), batch2=tuple(b2))
    if kind in ("zero-d", "operand-type"):
        return replace(case, bad=_pick(rng, ("x1", "x2")))
    if kind == "dtype":
        return replace(case, bad=f"{_pick(rng, ('x1', 'x2'))}:{_pick(rng, tuple(BAD_DTYPES))}")
    if kind == "out-shape":
        return replace(case, out="exact", bad=_pick(rng, ("plus", "extra", "drop")))
    if kind == "out-dtype":
        wrong = [str(d) for d in CONTRACT_DTYPES if d != case.result_dtype]
        return replace(case, out="exact", bad=_pick(rng, wrong))
    if kind in ("out-readonly", "out-type"):
        return replace(case, out="exact")
    if kind == "algorithm":
        return replace(case, bad=_pick(rng, tuple(a for a in BAD_ALGORITHMS if a not in algorithms)))
    raise AssertionError(kind)


# ---------------------------------------------------------------------------------- source


def _operand_code(name: str, shape, dtype: str, layout: str, specials: int) -> list[str]:
    """Source lines that bind ``name`` to an array of ``shape`` and ``dtype`` laid out as ``layout``."""
    nd = len(shape)
    base = tuple(shape)
    view = "{}"
    if layout == "F" and nd >= 2:
        view = "np.asfortranarray({})"
    elif layout == "T" and nd >= 2:
        base = shape[:-2] + (shape[-1], shape[-2])
        view = "{}.swapaxes(-1, -2)"
    elif layout == "batchT" and nd >= 4:
        base = (shape[1], shape[0]) + tuple(shape[2:])
        view = "{}.swapaxes(0, 1)"
    elif layout == "neg" and nd >= 1:
        view = "{}[" + ", ".join(["::-1"] * nd) + "]"
    elif layout == "negrow" and nd >= 1:
        view = "{}[::-1]" if nd == 1 else "{}[..., ::-1, :]"
    elif layout.startswith("step") and nd >= 1:
        step = int(layout[4:])
        start = "1" if step == 3 else ""
        axes = min(nd, 2)
        base = tuple(shape[: nd - axes]) + tuple(d * abs(step) for d in shape[nd - axes :])
        view = "{}[..., " + ", ".join([f"{start}::{step}"] * axes) + "]"
    elif layout == "bcast" and nd >= 1:
        if nd >= 3 and any(d > 1 for d in shape[:-2]):
            base = (1,) * (nd - 2) + tuple(shape[-2:])
        elif nd >= 2:
            base = tuple(shape[:-2]) + (1, shape[-1])  # every row the same: stride 0 inside the matrix
        else:
            base = (1,)
        view = f"np.broadcast_to({{}}, {tuple(shape)})"
    elif layout == "swap" and not is_bfloat16(np.dtype(dtype)):  # bfloat16 has no byte-swapped twin
        view = f"{{}}.astype(np.dtype({dtype!r}).newbyteorder())"  # byte-swapped
    make = f"random_array(rng, {tuple(base)}, {dtype!r})"
    size = int(np.prod(base)) if base else 1
    if not specials or size == 0:
        return [f"{name} = {view.format(make)}"]
    if np.dtype(dtype).kind in "fc" or is_bfloat16(np.dtype(dtype)):
        values = ", ".join(("np.nan", "np.inf", "-np.inf")[:specials])
    elif np.dtype(dtype).kind in "iu":
        values = ", ".join((f"np.iinfo({dtype!r}).min", f"np.iinfo({dtype!r}).max", "0")[:specials])
    else:
        return [f"{name} = {view.format(make)}"]
    tmp = name.replace("x", "v")
    return [
        f"{tmp} = {make}",
        f"{tmp}.flat[rng.integers({size}, size={specials})] = [{values}]  # special values",
        f"{name} = {view.format(tmp)}",
    ]


def _bad_out_shape(case: Case) -> tuple[int, ...]:
    shape = case.result_shape
    if case.bad == "drop" and shape:
        return shape[1:]
    if case.bad == "plus" and shape:
        return shape[:-1] + (shape[-1] + 1,)
    return (2,) + shape


def _out_code(case: Case) -> list[str]:
    mode = case.out
    if mode == "none" and not case.kind.startswith("out-"):
        return []
    shape, dtype = case.result_shape, str(case.result_dtype)
    if case.kind == "out-shape":
        return [f"out = poison({_bad_out_shape(case)}, {dtype!r})"]
    if case.kind == "out-dtype":
        return [f"out = poison({shape}, {case.bad!r})"]
    if case.kind == "out-readonly":
        return [f"out = poison({shape}, {dtype!r})", "out.flags.writeable = False"]
    if case.kind == "out-type":
        return [f"out = poison({shape}, {dtype!r}).tolist()"]
    if mode == "none":
        return []
    if mode == "strided" and shape:
        holder = shape[:-1] + (2 * shape[-1] + 1,)
        return [f"holder = poison({holder}, {dtype!r})", "out = holder[..., 1::2]"]
    if mode == "fortran" and len(shape) >= 2:
        return [f"out = np.asfortranarray(poison({shape}, {dtype!r}))"]
    if mode == "reversed" and shape:
        return [f"out = poison({shape}, {dtype!r})[::-1]"]
    if mode == "alias1":
        return ["out = x1"]
    if mode in ("alias2",):
        return ["out = x2"]
    if mode == "aliasboth":
        return ["x2 = out = x1"]
    return [f"out = poison({shape}, {dtype!r})"]


def build_code(case: Case) -> list[str]:
    """Source lines that build ``x1``, ``x2`` (and ``out``, ``holder``) for ``case``."""
    lines = [f"rng = np.random.default_rng({case.data_seed})"]
    for i, (shape, dtype, layout, specials) in enumerate(
        (
            (case.shape1, case.dtype1, case.layout1, case.specials1),
            (case.shape2, case.dtype2, case.layout2, case.specials2),
        ),
        start=1,
    ):
        name = f"x{i}"
        if case.kind == "zero-d" and case.bad == name:
            lines.append(f"{name} = np.asarray(random_array(rng, (), {dtype!r}))  # 0-d")
        elif case.kind == "dtype" and case.bad.startswith(name):
            lines.append(f"v = random_array(rng, {shape}, 'float64')")
            lines.append(f"{name} = {BAD_DTYPES[case.bad.split(':')[1]]}")
        elif case.kind == "operand-type" and case.bad == name:
            lines.append(f"{name} = random_array(rng, {shape}, {dtype!r}).tolist()  # a list, not an array")
        else:
            lines += _operand_code(name, shape, dtype, layout, specials)
    return lines + _out_code(case)


def _call(case: Case, backend: str, own: bool = False) -> str:
    """The call, on ``own.x1``, ``own.x2`` (and ``own.out``) where the case takes the backend's own arrays."""
    algorithm = case.bad if case.kind == "algorithm" else case.algorithm
    at = "own." if own else ""
    return (
        f"polymm.matmul({at}x1, {at}x2, backend={backend!r}, algorithm={algorithm!r}"
        + (f", out={at}out" if _has_out(case) else "")
        + ")"
    )


def _has_out(case: Case) -> bool:
    return case.out != "none" or case.kind.startswith("out-")


def _native(case: Case, backend: str) -> bool:
    """Whether ``case`` runs on the backend's own arrays: drawn so, and not NumPy's (whose own arrays
    every other case uses already)."""
    import polymm

    return case.native and polymm.get_backend(backend).array_library != "numpy"


def _own_line(case: Case, backend: str) -> str:
    names = ["x1", "x2"] + (["out"] if _has_out(case) else []) + (["holder"] if case.out == "strided" else [])
    return f"own = OwnArrays({backend!r}, {', '.join(f'{n}={n}' for n in names)})  # the backend's own arrays"


def expected_error(case: Case, algorithms=()) -> tuple[type, list[str]]:
    """The exception type the contract wants for an invalid case, and what its message must name."""
    kind = case.kind
    if kind == "contraction":
        return ValueError, [str(case.shape1), str(case.shape2)]
    if kind == "zero-d":
        other = case.shape2 if case.bad == "x1" else case.shape1
        return ValueError, ["()", str(other)]
    if kind == "batch":
        return ValueError, ["broadcast", str(case.shape1), str(case.shape2)]
    if kind == "dtype":
        code = BAD_DTYPES[case.bad.split(":")[1]]
        bad = eval(code, {"np": np, "v": np.zeros(1)}).dtype  # noqa: S307 (our own table)
        return TypeError, [str(bad)]
    if kind == "operand-type":
        return TypeError, [case.bad, "list"]
    if kind == "out-shape":
        return ValueError, [str(_bad_out_shape(case)), str(case.result_shape)]
    if kind == "out-dtype":
        return TypeError, [str(np.dtype(case.bad)), str(case.result_dtype)]
    if kind == "out-readonly":
        return ValueError, ["read-only"]
    if kind == "out-type":
        return TypeError, ["out", type(np.zeros(case.result_shape, case.result_dtype).tolist()).__name__]
    if kind == "algorithm":
        return ValueError, [repr(case.bad)] + [repr(a) for a in algorithms]
    raise AssertionError(kind)


def case_code(case: Case, backend: str, algorithms=(), check: str | None = None, precision: str = "default") -> str:
    """A short runnable Python snippet: builds the case, calls polymm, asserts the contract
    (in ``precision``'s scope when it is not the default)."""
    code = _case_lines(case, backend, algorithms, check)
    if precision == "default":
        return code
    head, body = code.split("\n\n", 1)
    body = "".join(f"    {line}\n" if line else "\n" for line in body.rstrip("\n").split("\n"))
    return f"{head}\n\nwith polymm.use_precision({precision!r}):\n{body}"


def _case_lines(case: Case, backend: str, algorithms=(), check: str | None = None) -> str:
    native = _native(case, backend)
    lines = [
        "import numpy as np",
        *(
            ["import ml_dtypes  # noqa: F401 (gives NumPy bfloat16)"]
            if "bfloat16" in (case.dtype1, case.dtype2)
            else []
        ),
        "import polymm",
        "from polymm.testing import assert_matches, poison, random_array",
        *(["from polymm.tools.fuzz import OwnArrays"] if native else []),
        "",
    ]
    lines += build_code(case)
    if native:
        lines.append(_own_line(case, backend) + ": the same layouts, the same aliasing")
    if case.kind != "valid":
        exc, names = expected_error(case, algorithms)
        lines += [
            "try:",
            f"    {_call(case, backend, native)}",
            f"except {exc.__name__} as exc:",
            f"    for name in {names!r}:",
            "        assert name in str(exc), f'message does not name {name!r}: {exc}'",
            "else:",
            f"    raise AssertionError('no {exc.__name__} raised')",
        ]
        return "\n".join(lines) + "\n"
    aliased = case.out.startswith("alias")
    lines.append(
        "expected = (x1.copy(), x2.copy())  # before the call: out may alias an input"
        if aliased
        else "expected = (x1.copy(), x2.copy())"
    )
    if check == "out-neighbours":
        lines.append("before = holder.copy()")
    if not native:
        lines.append(f"result = {_call(case, backend)}")
        if case.out != "none":
            lines.append("assert result is out")
    elif case.out == "none":
        lines.append(f"result = own.to_numpy({_call(case, backend, True)})")
    else:
        lines += [
            f"assert {_call(case, backend, True)} is own.out",
            "own.sync()  # what the backend's memory holds, back in x1, x2, out",
            "result = out",
        ]
    lines.append(f"assert_matches(result, *expected, dtype={str(case.result_dtype)!r})")
    if check == "input-modified":
        lines.append("assert x1.tobytes() == expected[0].tobytes() and x2.tobytes() == expected[1].tobytes()")
    if check == "out-neighbours":
        lines += ["before[..., 1::2] = out", "assert holder.tobytes() == before.tobytes(), 'wrote outside out'"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- checking


@dataclass
class Outcome:
    """What one case did: ``status`` is "ok", "refused" (a clear TypeError for a dtype the
    backend does not compute) or "fail"; ``check`` names the failed check."""

    status: str
    check: str = ""
    message: str = ""


class OwnArrays:
    """NumPy arrays made again as a backend's own (its ``from_numpy``), their layouts and aliasing kept.

    Each stretch of memory the arrays share is copied once, and every array is made a view of that
    copy by the adapter's :meth:`~polymm.arrays.ArrayKind.view`, read-only where the NumPy one is: so
    a transposed, strided or reversed NumPy ``out=`` or one aliasing an input becomes the same
    ``out=`` of the backend's library. An array the adapter makes no view of is copied on its own
    (layout lost, aliasing by identity kept); where a read-only one cannot be made, all stay NumPy
    (``kept`` False). :meth:`sync` copies the backend's memory back, so NumPy checks read what it wrote.
    """

    def __init__(self, backend: str, **arrays):
        import polymm

        from ..arrays import kind_named

        self.impl = polymm.get_backend(backend)
        self.kind = kind_named(self.impl.array_library)
        self._numpy = arrays
        self._copies = []  # (NumPy memory, its copy in the backend's library), synced back in reverse
        self.kept = True
        regions = _regions([x for x in arrays.values() if x is not None])
        made = {}
        for name, x in arrays.items():
            if id(x) not in made:
                made[id(x)] = self._own(x, regions)
            setattr(self, name, made[id(x)])
        if not self.kept:
            self.__dict__.update(arrays)

    def _own(self, x, regions):
        if x is None:
            return None
        region = regions.get(id(x))
        if region is not None:
            memory, start, copy = region
            if copy is None:
                copy = region[2] = self.impl.from_numpy(memory)
            size = x.dtype.itemsize
            offset = (x.__array_interface__["data"][0] - start) // size
            view = self.kind.view(copy, x.shape, [s // size for s in x.strides], offset, x.flags.writeable)
            if view is not None:
                if not any(c is copy for _, c in self._copies):
                    self._copies.append((memory, copy))
                return view
        if not x.flags.writeable:
            self.kept = False  # no read-only array of this library: the case stays NumPy's
            return x
        copy = self.impl.from_numpy(np.ascontiguousarray(x))
        self._copies.append((x, copy))
        return copy

    def to_numpy(self, x) -> np.ndarray:
        return x if not self.kept else np.asarray(self.impl.to_numpy(x))

    def sync(self) -> None:
        """Copy what the backend's arrays hold back into the NumPy arrays' memory."""
        if self.kept:
            for memory, copy in reversed(self._copies):
                memory[...] = self.to_numpy(copy)


def _regions(arrays) -> dict:
    """``id(x) -> [NumPy 1-D view of the memory, its start address, None]`` (one list shared by
    arrays whose memory overlaps); arrays of other dtypes, strides or alignment get none."""
    from numpy.lib.array_utils import byte_bounds

    spans = []
    for x in arrays:
        size = x.dtype.itemsize
        low, high = byte_bounds(x)
        if x.size and x.dtype.isnative and not any(s % size for s in x.strides) and low % size == 0:
            spans.append([low, high, x])
    spans.sort(key=lambda span: span[0])
    groups = []
    for low, high, x in spans:
        last = groups[-1] if groups else None
        if last is not None and low < last[1] and x.dtype == last[2][0].dtype:
            last[1] = max(last[1], high)
            last[2].append(x)
        else:
            groups.append([low, high, [x]])
    found = {}
    for low, high, members in groups:
        dtype = members[0].dtype
        if any(m.dtype != dtype or (m.__array_interface__["data"][0] - low) % dtype.itemsize for m in members):
            continue
        raw = (ctypes.c_uint8 * (high - low)).from_address(low)
        memory = np.ctypeslib.as_array(raw).view(dtype)
        region = [memory, low, None]
        for m in members:
            found[id(m)] = region
    return found


_NAMESPACE = {"np": np, "poison": poison, "random_array": random_array}


def _build(case: Case) -> dict:
    ns = dict(_NAMESPACE)
    exec(compile("\n".join(build_code(case)), "<polymm fuzz case>", "exec"), ns)  # noqa: S102 (our own source)
    return ns


def _fail(check, message) -> Outcome:
    return Outcome("fail", check, message)


@np.errstate(all="ignore")
def check_case(case: Case, backend: str) -> Outcome:
    """Run ``case`` on ``backend`` and check it against the contract and the reference."""
    import polymm

    impl = polymm.get_backend(backend)
    try:
        ns = _build(case)
    except Exception as exc:  # the fuzzer's own bug, not the backend's: say so loudly
        return _fail("fuzzer", f"building the case failed: {type(exc).__name__}: {exc}")
    x1, x2, out = ns["x1"], ns["x2"], ns.get("out")
    algorithm = case.bad if case.kind == "algorithm" else case.algorithm
    kwargs = {"out": out} if "out" in ns else {}
    own = None
    if _native(case, backend):
        own = OwnArrays(backend, x1=x1, x2=x2, **kwargs, holder=ns.get("holder"))
        if not own.kept:
            own = None

    if case.kind != "valid":
        exc_type, names = expected_error(case, impl.algorithms)
        try:
            if own is not None:
                polymm.matmul(own.x1, own.x2, backend=backend, algorithm=algorithm, out=own.out)
            else:
                polymm.matmul(x1, x2, backend=backend, algorithm=algorithm, **kwargs)
        except Exception as exc:
            if not isinstance(exc, exc_type):
                return _fail(
                    "wrong-exception", f"raised {type(exc).__name__}: {exc} (the contract wants {exc_type.__name__})"
                )
            missing = [n for n in names if n not in str(exc)]
            if missing:
                return _fail(
                    "message", f"{exc_type.__name__} message does not name {', '.join(map(repr, missing))}: {exc}"
                )
            return Outcome("ok")
        why = f" for a read-only {type(own.out).__qualname__} out= (the adapter's writeable())" if own else ""
        return _fail("no-exception", f"no {exc_type.__name__} raised{why}")

    dtype = case.result_dtype
    expected = (np.array(x1, copy=True), np.array(x2, copy=True))
    holder = ns.get("holder")
    before = holder.copy() if holder is not None else None
    for name in ("x1", "x2"):
        if own is not None and ns[name] is out and out.size and not own.kind.shares_memory(own.out, getattr(own, name)):
            return _fail(
                "shares-memory",
                f"adapter {own.kind.name!r}: shares_memory(out, {name}) is False for an out= that is {name} itself: "
                "the core would let the backend write into an input it is still reading",
            )
    try:
        if own is not None:
            result = polymm.matmul(
                own.x1, own.x2, backend=backend, algorithm=algorithm, **({"out": own.out} if out is not None else {})
            )
            if out is not None:
                if result is not own.out:
                    return _fail("out-identity", f"returned {type(result).__name__}, not the out array given")
                own.sync()
                result = out
            elif type(result) is not type(own.x1):
                return _fail("type", f"returned {type(result).__qualname__} for {type(own.x1).__qualname__} operands")
            else:
                result = own.to_numpy(result)
        else:
            result = polymm.matmul(x1, x2, backend=backend, algorithm=algorithm, **kwargs)
    except TypeError as exc:
        if str(dtype) in str(exc) and _refuses(impl, dtype, x1, algorithm):
            return Outcome("refused")
        return _fail("exception", f"TypeError: {exc}")
    except Exception as exc:
        return _fail("exception", f"{type(exc).__name__}: {exc}")
    if out is not None and result is not out:
        return _fail("out-identity", f"returned {type(result).__name__}, not the out array given")
    if not isinstance(result, np.ndarray):
        return _fail("type", f"returned {type(result).__module__}.{type(result).__qualname__}, not numpy.ndarray")
    if result.dtype != dtype:
        return _fail("dtype", f"dtype {result.dtype}, expected {dtype}")
    if result.shape != case.result_shape:
        return _fail("shape", f"shape {result.shape}, expected {case.result_shape}")
    hint = _own_out_hint(case, own) if own is not None and out is not None else ""
    if hint and unwritten(result, *expected):
        return _fail("out-unwritten", f"out= was not written at all: {hint}")
    try:
        assert_matches(result, *expected, dtype=dtype)
    except AssertionError as exc:
        return _fail("values", str(exc) + (f"; {hint}" if hint else ""))
    if not case.out.startswith("alias") and (
        x1.tobytes() != expected[0].tobytes() or x2.tobytes() != expected[1].tobytes()
    ):
        return _fail("input-modified", "an input changed")
    if holder is not None:
        before[..., 1::2] = out
        if holder.tobytes() != before.tobytes():
            return _fail("out-neighbours", "elements of the strided out's base outside the view were written")
    return Outcome("ok")


def _own_out_hint(case: Case, own: OwnArrays) -> str:
    """What the core does with this ``out=`` of the backend's library, naming the adapter methods it uses."""
    layout = {
        "exact": "C-contiguous",
        "strided": "strided",
        "fortran": "transposed (F-ordered)",
        "reversed": "reversed",
    }
    what = f"out= is a {layout.get(case.out, '')} {type(own.out).__qualname__} (adapter {own.kind.name!r})".replace(
        "  ", " "
    )
    if case.out.startswith("alias"):
        return (
            f"{what} aliasing an input: the core must see that (the adapter's shares_memory), compute into a "
            "temporary and copy it in with the adapter's assign(dst, src)"
        )
    if case.k == 0:
        return f"{what}; K = 0: the core writes zeros into it with the adapter's assign(dst, src)"
    if case.out == "exact":
        return f"{what}: the backend writes it directly"
    return (
        f"{what}, not C-contiguous (the adapter's is_c_contiguous): the core computes into a temporary and "
        "copies it in with the adapter's assign(dst, src)"
    )


def _refuses(impl, dtype, x1, algorithm) -> bool:
    """Does the backend refuse ``dtype`` (not listed, not served by ``algorithm``, or its
    check_dtype raises TypeError)?"""
    if dtype not in tuple(impl.dtypes()):
        return True
    if not algorithm_serves(impl, algorithm, dtype):
        return True
    try:
        impl.check_dtype(dtype, x1)
    except TypeError:
        return True
    return False


# ---------------------------------------------------------------------------------- shrinking


def _consistent(case: Case) -> bool:
    """Is ``case`` still the kind of problem it claims to be (valid stays valid, one error stays)?"""
    if min(case.m, case.k, case.n, case.k2) < 0 or any(d < 0 for d in case.batch1 + case.batch2):
        return False
    if case.vec1 and case.batch1 or case.vec2 and case.batch2:
        return False
    try:
        _broadcast(case.batch1, case.batch2)
        broadcasts = True
    except ValueError:
        broadcasts = False
    if case.kind == "batch":
        return not broadcasts and case.k == case.k2
    if case.kind == "contraction":
        return broadcasts and case.k != case.k2
    if not broadcasts or case.k != case.k2:
        return False
    if case.out == "alias1":
        return case.result_shape == case.shape1 and case.dtype1 == case.dtype2
    if case.out == "alias2":
        return case.result_shape == case.shape2 and case.dtype1 == case.dtype2
    if case.out == "aliasboth":
        return case.shape1 == case.shape2 == case.result_shape and case.dtype1 == case.dtype2
    return True


def _smaller(d: int) -> list[int]:
    return sorted({c for c in (0, 1, 2, d // 2, d - 1) if 0 <= c < d})


def _candidates(case: Case):
    """Simpler variants of ``case``, simplest first."""
    if case.native:
        yield replace(case, native=False)
    if case.out != "none" and case.kind == "valid":
        yield replace(case, out="none")
        if case.out != "exact":
            yield replace(case, out="exact")
    if case.specials1 or case.specials2:
        yield replace(case, specials1=0, specials2=0)
    for name in ("layout1", "layout2"):
        if getattr(case, name) != "C":
            yield replace(case, **{name: "C"})
    if case.dtype1 != case.dtype2:
        yield replace(case, dtype2=case.dtype1)
        yield replace(case, dtype1=case.dtype2)
    for name in ("batch1", "batch2"):
        batch = getattr(case, name)
        for i in range(len(batch)):
            yield replace(case, **{name: batch[:i] + batch[i + 1 :]})
    for name in ("batch1", "batch2"):
        batch = getattr(case, name)
        for i, d in enumerate(batch):
            for smaller in _smaller(d):
                yield replace(case, **{name: batch[:i] + (smaller,) + batch[i + 1 :]})
    for name in ("m", "n", "k"):
        for smaller in _smaller(getattr(case, name)):
            yield replace(case, **{name: smaller}, **({"k2": smaller} if name == "k" and case.k == case.k2 else {}))
    if case.k != case.k2:
        for smaller in _smaller(case.k2):
            yield replace(case, k2=smaller)
    for name in ("vec1", "vec2"):
        if getattr(case, name) and case.kind == "valid" and case.out == "none":
            yield replace(case, **{name: False}, **{"m" if name == "vec1" else "n": 1})


def _same(a: Outcome, b: Outcome) -> bool:
    if a.check != b.check:
        return False
    if a.check in ("exception", "wrong-exception"):
        return a.message.split(":", 1)[0] == b.message.split(":", 1)[0]  # the same exception type
    return True


def shrink(case: Case, backend: str, outcome: Outcome, max_tries: int = 400, time_limit: float = 60.0):
    """Greedily simplify ``case`` while it fails the same way; returns ``(case, outcome, tries)``."""
    tries, start = 0, time.perf_counter()
    progress = True
    while progress and tries < max_tries and time.perf_counter() - start < time_limit:
        progress = False
        for candidate in _candidates(case):
            if not _consistent(candidate):
                continue
            tries += 1
            result = check_case(candidate, backend)
            if result.status == "fail" and _same(result, outcome):
                case, outcome, progress = candidate, result, True
                break
            if tries >= max_tries or time.perf_counter() - start >= time_limit:
                break
    return case, outcome, tries


def replays(code: str) -> bool:
    """Does the reproducer ``code`` still fail (raise) when run?"""
    try:
        with np.errstate(all="ignore"):
            exec(compile(code, "<polymm fuzz reproducer>", "exec"), {"__name__": "__polymm_fuzz__"})  # noqa: S102
    except Exception:
        return True
    return False


# ---------------------------------------------------------------------------------- running


@dataclass
class Failure:
    backend: str
    seed: int
    index: int
    check: str
    message: str
    case: str  # the case as drawn, described
    shrunk: str = ""  # the shrunk case, described
    shrunk_case: dict | None = None  # the shrunk case's fields (Case(**shrunk_case) rebuilds it)
    reproducer: str = ""  # runnable Python source of the shrunk case
    replays: bool | None = None
    replay: str = ""  # the command that replays the original case

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Summary:
    seed: int
    backends: list[str]
    cases: int = 0
    valid: int = 0
    invalid: int = 0
    refused: int = 0
    per_dtype: dict = field(default_factory=dict)
    per_kind: dict = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str = ""  # why the run ended early ("time budget", "max failures"), if it did
    precision: str = "default"  # the mode every case was computed and checked in
    contractions: int = 0  # contraction cases, drawn beside the matmul cases (not among ``cases``)
    own_arrays: int = 0  # cases on a backend's own (not NumPy) arrays, out= too ...
    own_out: int = 0  # ... of which with an out= of its library

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = not self.failures
        return d


def _replay_command(backend, seed, index, dtypes, precision="default") -> str:
    cmd = f"polymm fuzz --backend {backend} --seed {seed} --case {index}"
    if dtypes:
        cmd += " --dtypes " + ",".join(str(np.dtype(d)) for d in dtypes)
    if precision != "default":
        cmd += f" --precision {precision}"
    return cmd


def run(
    backends,
    cases: int = 1000,
    seed: int = 0,
    *,
    dtypes=None,
    case: int | None = None,
    time_budget: float | None = None,
    max_failures: int = 10,
    shrink_failures: int = 3,
    on_case=None,
    precision: str = "default",
) -> Summary:
    """Fuzz each backend with ``cases`` cases of run ``seed`` (or only case number ``case``),
    computed and checked in ``precision`` (:mod:`polymm.precision`).

    ``on_case(backend, index, outcome)`` is called after every case (for progress bars).
    The first ``shrink_failures`` failures are shrunk into reproducers.
    """
    import polymm

    with polymm.use_precision(precision):
        return _run(backends, cases, seed, dtypes, case, time_budget, max_failures, shrink_failures, on_case, precision)


def _run(backends, cases, seed, dtypes, case, time_budget, max_failures, shrink_failures, on_case, precision):
    import polymm

    summary = Summary(seed, list(backends), precision=precision)
    start = time.perf_counter()
    indices = range(cases) if case is None else [case]
    for name in backends:
        impl = polymm.get_backend(name)
        algorithms = tuple(impl.algorithms)
        failed = 0
        for index in indices:
            if time_budget is not None and time.perf_counter() - start > time_budget:
                summary.stopped = "time budget"
                break
            if failed >= max_failures:  # per backend: one broken backend does not hide the others
                summary.stopped = "max failures"
                break
            drawn = draw_case(seed, index, dtypes, algorithms, large=precision != "default")
            try:
                outcome = check_case(drawn, name)
            except Exception:
                outcome = _fail("fuzzer", traceback.format_exc(limit=3))
            summary.cases += 1
            if drawn.kind == "valid":
                summary.valid += 1
                key = str(drawn.result_dtype)
                summary.per_dtype[key] = summary.per_dtype.get(key, 0) + 1
            else:
                summary.invalid += 1
                summary.per_kind[drawn.kind] = summary.per_kind.get(drawn.kind, 0) + 1
            summary.refused += outcome.status == "refused"
            if _native(drawn, name):
                summary.own_arrays += 1
                summary.own_out += _has_out(drawn)
            if outcome.status == "fail":
                failure = Failure(
                    name,
                    seed,
                    index,
                    outcome.check,
                    outcome.message,
                    drawn.describe(),
                    replay=_replay_command(name, seed, index, dtypes, precision),
                )
                if failed < shrink_failures:
                    small, small_outcome, _ = shrink(drawn, name, outcome)
                    failure.shrunk = small.describe()
                    failure.shrunk_case = dataclasses.asdict(small)
                    failure.message = small_outcome.message if small is not drawn else failure.message
                    failure.reproducer = case_code(small, name, algorithms, small_outcome.check, precision)
                    failure.replays = replays(failure.reproducer)
                summary.failures.append(failure)
                failed += 1
            contraction = fuzz_contractions.draw(seed, index, dtypes)
            if contraction is not None:  # drawn beside the matmul case of the same index
                summary.contractions += 1
                summary.per_kind[contraction.kind] = summary.per_kind.get(contraction.kind, 0) + 1
                checked = Outcome(*fuzz_contractions.check(contraction, name))
                summary.refused += checked.status == "refused"
                if checked.status == "fail":
                    summary.failures.append(
                        Failure(
                            name,
                            seed,
                            index,
                            checked.check,
                            checked.message,
                            contraction.describe(),
                            reproducer=fuzz_contractions.code(contraction, name),
                            replay=_replay_command(name, seed, index, dtypes, precision),
                        )
                    )
                    failed += 1
            if on_case is not None:
                on_case(name, index, outcome)
    summary.seconds = time.perf_counter() - start
    return summary
