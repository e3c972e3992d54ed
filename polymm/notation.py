"""``polymm.einsum``: NumPy's notation, reduced to pairwise batched products.

The subscripts become one label per axis (letters; the axes under ``...`` are labelled by their
place counted from the right, so operands broadcast as NumPy's do).  A label repeated within an
operand takes that operand's diagonal first (a view in NumPy, CuPy and PyTorch).  One operand is
then summed and permuted by its own library; two or more are contracted a pair at a time, each
pair one :func:`polymm.contract.contract_pair` -- one :func:`polymm.matmul` over strided views --
in an order chosen by cost: ``opt_einsum``'s path when it is installed, else a greedy one.
"""

from __future__ import annotations

import math
import sys

from .contract import (
    _apply,
    _check_arrays,
    _check_sizes,
    _grouped,
    _options,
    _pair,
    check_options,
    contract_pair,
    deliver,
    keep,
    layout_key,
    namespace,
    run_pair,
    sum_out,
    via_host,
    viewless,
)

__all__ = ["einsum", "parse", "contraction_path"]

_NAME = "polymm.einsum"


def einsum(subscripts, /, *operands, backend=None, algorithm="auto", out=None, precision=None):
    """NumPy's ``einsum`` (explicit and implicit output, ``...``, repeated subscripts for
    diagonals and traces) on polymm's products; keywords as :func:`polymm.matmul`."""
    if not isinstance(subscripts, str):
        raise TypeError(f"{_NAME}: subscripts must be a string like 'ij,jk->ik', got {type(subscripts).__name__}")
    if not operands:
        raise ValueError(f"{_NAME}: no operands given for subscripts {subscripts!r}")
    options = _options(backend, algorithm, precision)
    key = layout_key(subscripts, operands)
    known = _EINSUMS.get(key) if key is not None else None
    if known is not None:  # this contraction, of operands laid out so, was checked and planned before
        return deliver(_NAME, _replay(known, operands, options), out)
    _check_arrays(_NAME, *operands)
    if viewless(operands):
        return via_host(_einsum_of(subscripts), operands, {}, _options(backend, algorithm, precision), out)
    inputs, output = _parsed(subscripts, tuple(tuple(x.shape) for x in operands))
    terms = [diagonal(x, labels, f"operand {i}") for i, (x, labels) in enumerate(zip(operands, inputs))]
    _check_sizes(_NAME, [tuple(x.shape) for x, _ in terms], [labels for _, labels in terms])
    if len(terms) == 1:
        check_options(options, operands[0])
        x, labels = sum_out(*terms[0], set(output))
        sizes = dict(zip(labels, x.shape))
        return deliver(_NAME, _grouped(x, labels, output, [sizes[a] for a in output]), out)
    sizes = {a: n for x, labels in terms for a, n in zip(labels, x.shape) if n != 1}
    # what is done is kept for operands of this layout, where no diagonal was taken first
    steps = [] if key is not None and all(len(set(labels)) == len(labels) for labels in inputs) else None
    for i, j in _path([labels for _, labels in terms], output, sizes):
        (x1, labels1), (x2, labels2) = terms[i], terms[j]
        terms = [term for p, term in enumerate(terms) if p not in (i, j)]
        plan = [] if steps is not None else None
        if not terms:  # the last pair: the result in the output's order
            result = contract_pair(x1, labels1, x2, labels2, output, options, plan)
            if steps is not None:
                steps.append((i, j, plan[0], plan[1]))
                keep(_EINSUMS, key, tuple(steps))
            return deliver(_NAME, result, out)
        wanted = set(output).union(*(labels for _, labels in terms))
        terms.append(_pair(x1, labels1, x2, labels2, wanted, options, record=plan))
        if steps is not None:
            steps.append((i, j, plan[0], None))
    raise AssertionError("a contraction path left more than one operand")


def _replay(steps, operands, options):
    """An einsum kept by :func:`einsum`: its pairs' plans replayed on these operands."""
    terms = list(operands)
    for i, j, plan, last in steps:
        x1, x2 = terms[i], terms[j]
        terms = [term for p, term in enumerate(terms) if p not in (i, j)]
        product = run_pair(plan, x1, x2, options)
        if last is not None:
            return _apply(product, last)
        terms.append(product)
    raise AssertionError("a kept einsum left more than one operand")


#: Einsums done, by layout (:func:`polymm.contract.layout_key`): the pairs' plans to replay.
_EINSUMS: dict = {}


def _parsed(subscripts, shapes):
    """:func:`parse`, kept per subscripts and shapes (a loop calls einsum with the same ones)."""
    key = (subscripts, shapes)
    found = _PARSED.get(key)
    if found is None:
        found = parse(subscripts, shapes)
        if len(_PARSED) >= _KEPT:
            _PARSED.clear()
        _PARSED[key] = found
    inputs, output = found
    return [list(labels) for labels in inputs], list(output)


def _path(label_lists, output, sizes):
    """:func:`contraction_path`, kept per labels and sizes."""
    if len(label_lists) == 2:
        return [(0, 1)]
    key = (tuple(map(tuple, label_lists)), tuple(output), tuple(sorted(sizes.items(), key=repr)), id(_opt_einsum()))
    found = _PATHS.get(key)
    if found is None:
        found = contraction_path(label_lists, output, sizes)
        if len(_PATHS) >= _KEPT:
            _PATHS.clear()
        _PATHS[key] = found
    return found


_PARSED: dict = {}
_PATHS: dict = {}
_KEPT = 256


def _einsum_of(subscripts):
    def einsum_(*operands, **keywords):
        return einsum(subscripts, *operands, **keywords)

    einsum_.__name__ = "einsum"
    return einsum_


def parse(subscripts: str, shapes) -> tuple[list[list], list]:
    """The labels of each operand's axes and of the result's, or a ``ValueError`` saying what is
    wrong with ``subscripts`` for operands of ``shapes``."""
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    if "->" in rhs or "-" in lhs or ">" in lhs:
        raise ValueError(f"{_NAME}: subscripts {subscripts!r} must have at most one '->' and no other '-' or '>'")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(
            f"{_NAME}: subscripts {subscripts!r} name {len(terms)} operand(s) but {len(shapes)} were given"
        )
    inputs, spread = [], 0
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        before, after, dots = _term(term, f"operand {i}", subscripts)
        named = len(before) + len(after)
        if len(shape) < named or (not dots and len(shape) != named):
            raise ValueError(
                f"{_NAME}: operand {i} has {len(shape)} dimension(s) (shape {shape}) but its subscripts "
                f"{term!r} name {named}" + ("" if dots else " (use '...' for the others)")
            )
        covered = len(shape) - named
        spread = max(spread, covered)
        inputs.append(before + list(range(covered, 0, -1)) + after)
    if arrow:
        before, after, dots = _term(rhs, "the output", subscripts)
        letters = before + after
        for a in letters:
            if letters.count(a) > 1:
                raise ValueError(f"{_NAME}: output subscript {a!r} appears more than once in {subscripts!r}")
            if not any(a in labels for labels in inputs):
                raise ValueError(f"{_NAME}: output subscript {a!r} appears in no operand of {subscripts!r}")
        if spread and not dots:
            raise ValueError(
                f"{_NAME}: the operands' '...' cover {spread} dimension(s) but the output {rhs!r} has no '...' "
                f"to put them in ({subscripts!r})"
            )
        return inputs, before + list(range(spread, 0, -1)) + after
    counts: dict = {}
    for labels in inputs:
        for a in labels:
            if isinstance(a, str):
                counts[a] = counts.get(a, 0) + 1
    return inputs, list(range(spread, 0, -1)) + sorted(a for a, c in counts.items() if c == 1)


def _term(term: str, which: str, subscripts: str):
    """``(letters before '...', letters after, whether there is a '...')`` of one term."""
    before, dots, after = term.partition("...")
    for part in (before, after):
        for c in part:
            if not (c.isascii() and c.isalpha()):
                raise ValueError(
                    f"{_NAME}: invalid subscript {c!r} for {which} in {subscripts!r}: subscripts are the letters "
                    "a-z and A-Z, and one '...'"
                )
    return list(before), list(after), bool(dots)


def diagonal(x, labels, which):
    """``x`` with each repeated label reduced to its diagonal (labels then unique, the diagonal's last)."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        a = next(a for a in labels if labels.count(a) > 1)
        i = labels.index(a)
        j = labels.index(a, i + 1)
        if x.shape[i] != x.shape[j]:
            raise ValueError(
                f"{_NAME}: subscript {a!r} repeats in {which} over axes of different lengths "
                f"({x.shape[i]} and {x.shape[j]}; shape {tuple(x.shape)})"
            )
        rest = [p for p in range(len(labels)) if p not in (i, j)]
        xp = namespace(x)
        x = xp.linalg.diagonal(xp.permute_dims(x, tuple(rest + [i, j])))
        labels = [labels[p] for p in rest] + [a]
    return x, labels


def contraction_path(label_lists, output, sizes) -> list[tuple[int, int]]:
    """The pairs to contract, in order, as positions in the list of operands left (each pair's
    result appended at its end): ``opt_einsum``'s path when it is installed, else the greedy one
    (:func:`greedy_path`)."""
    if len(label_lists) == 2:
        return [(0, 1)]
    opt_einsum = _opt_einsum()
    if opt_einsum is None:
        return greedy_path(label_lists, output, sizes)
    symbols: dict = {}
    for labels in [*label_lists, output]:
        for a in labels:
            symbols.setdefault(a, opt_einsum.get_symbol(len(symbols)))
    equation = ",".join("".join(symbols[a] for a in labels) for labels in label_lists)
    equation += "->" + "".join(symbols[a] for a in output)
    shapes = [tuple(sizes.get(a, 1) for a in labels) for labels in label_lists]
    path, _ = opt_einsum.contract_path(equation, *shapes, shapes=True, optimize="auto")
    return [tuple(sorted(pair)) for pair in path]


def _opt_einsum():
    """The ``opt_einsum`` module, or None where it is not installed (an import that failed is not
    tried again: it searches the whole path each time)."""
    module = sys.modules.get("opt_einsum")
    if module is not None or _OPT_EINSUM_MISSING:
        return module
    try:
        import opt_einsum
    except ImportError:
        globals()["_OPT_EINSUM_MISSING"] = True
        return None
    return opt_einsum


_OPT_EINSUM_MISSING = False


def greedy_path(label_lists, output, sizes) -> list[tuple[int, int]]:
    """Contract first the pair whose result saves the most memory (its size less its operands'),
    then the cheapest product: what most many-operand expressions want, in ``O(n^3)`` steps."""
    terms = [set(labels) for labels in label_lists]
    path = []
    while len(terms) > 1:
        best = None
        for i in range(len(terms)):
            for j in range(i + 1, len(terms)):
                others = set(output).union(*(t for p, t in enumerate(terms) if p not in (i, j)))
                kept = (terms[i] | terms[j]) & others
                grown = _size(kept, sizes) - _size(terms[i], sizes) - _size(terms[j], sizes)
                cost = (grown, _size(terms[i] | terms[j], sizes))
                if best is None or cost < best[0]:
                    best = (cost, i, j, kept)
        _, i, j, kept = best
        path.append((i, j))
        terms = [t for p, t in enumerate(terms) if p not in (i, j)] + [kept]
    return path


def _size(labels, sizes) -> int:
    return math.prod(sizes.get(a, 1) for a in labels)
