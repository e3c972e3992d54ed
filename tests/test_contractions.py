"""The contractions' reduction itself: no copies where strides allow, the order of pairwise products,
and the optional opt_einsum path (the conformance cases are in polymm/testing/test_contractions.py)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import polymm
from polymm import dispatch
from polymm.notation import contraction_path, greedy_path, parse
from polymm.testing.reference import assert_contraction_matches, random_array


@pytest.fixture
def products(monkeypatch):
    """The operands of every product a contraction hands to polymm.matmul."""
    seen = []
    real = dispatch.matmul

    def spy(a, b, **options):
        seen.append((a, b))
        return real(a, b, **options)

    monkeypatch.setattr(dispatch, "matmul", spy)
    return seen


VIEWED = [
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 7, 8)], None),
    ("abij,ijc->cba", [(2, 3, 4, 5), (4, 5, 6)], None),  # the result permuted: a view of the product
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 6, 7)], None),
    ("ij,jk->ki", [(4, 5), (5, 6)], None),
    ("bij,bkj->bik", [(3, 4, 6), (3, 5, 6)], "transpose-x2"),  # a transposed operand: read in place
    ("ij,jk->ik", [(4, 10), (5, 6)], "slice-x1"),  # a sliced operand: strides, no copy
]


@pytest.mark.parametrize("subscripts,shapes,layout", VIEWED, ids=[c[0] + str(c[2]) for c in VIEWED])
def test_two_operands_are_one_product_of_views(products, subscripts, shapes, layout):
    rng = np.random.default_rng(0)
    operands = [random_array(rng, s, "float64") for s in shapes]
    if layout == "transpose-x2":
        operands[1] = np.ascontiguousarray(operands[1].transpose(0, 2, 1)).transpose(0, 2, 1)
    if layout == "slice-x1":
        operands[0] = operands[0][:, ::2]
    result = polymm.einsum(subscripts, *operands, backend="cpu")
    assert_contraction_matches(result, subscripts, operands)
    assert len(products) == 1
    for given, handed in zip(operands, products[0]):
        assert np.shares_memory(given, handed), "an operand was copied where its strides allow a view"


def test_contracted_axes_that_cannot_merge_copy_the_smaller_operand(products):
    rng = np.random.default_rng(1)
    big = random_array(rng, (40, 3, 4), "float64")  # contracted (j, k) merge in the order j, k
    small = random_array(rng, (4, 3), "float64")  # ... but only as k, j here
    result = polymm.einsum("ijk,kj->i", big, small, backend="cpu")
    assert_contraction_matches(result, "ijk,kj->i", [big, small])
    ((a, b),) = products
    assert np.shares_memory(a, big) and not np.shares_memory(b, small)


def test_a_batched_trace_is_row_dots_of_views(products):
    """``bij,bji->b``: (i, j) merge in x1 only; one of them becomes a batch axis of the product
    (dot products over the other, x2 read down its columns), summed after -- no copy."""
    rng = np.random.default_rng(4)
    x1, x2 = (random_array(rng, (3, 40, 50), "float64"), random_array(rng, (3, 50, 40), "float64"))
    result = polymm.einsum("bij,bji->b", x1, x2, backend="cpu")
    assert_contraction_matches(result, "bij,bji->b", [x1, x2])
    ((a, b),) = products
    assert np.shares_memory(a, x1) and np.shares_memory(b, x2)
    assert a.shape[-2] == 1 and b.shape[-1] == 1  # dot products


def test_a_copy_reads_its_operand_in_memory_order(products):
    """``aibj,jkbi->ak``: x2's contracted axes cannot merge (k lies between them); its copy is laid
    out (k, i b j) -- x2's own order as far as the product allows -- and handed over transposed."""
    rng = np.random.default_rng(5)
    x1, x2 = random_array(rng, (6, 3, 2, 4), "float32"), random_array(rng, (4, 5, 2, 3), "float32")
    result = polymm.einsum("aibj,jkbi->ak", x1, x2, backend="cpu")
    assert_contraction_matches(result, "aibj,jkbi->ak", [x1, x2])
    ((a, b),) = products
    assert np.shares_memory(a, x1) and not np.shares_memory(b, x2)
    assert b.shape == (24, 5) and b.strides == (4, 24 * 4)


def test_a_layout_is_planned_once(monkeypatch):
    """The reduction is decided once per layout; later calls replay it on their own data, and a
    new layout (other strides) is planned anew."""
    from polymm import contract, notation

    planned = []
    real = contract._plan_pair
    monkeypatch.setattr(contract, "_PLANS", {})
    monkeypatch.setattr(notation, "_EINSUMS", {})
    monkeypatch.setattr(contract, "_plan_pair", lambda *a: planned.append(1) or real(*a))
    rng = np.random.default_rng(7)
    for _ in range(3):
        x1, x2 = random_array(rng, (3, 6, 5), "float64"), random_array(rng, (3, 5, 6), "float64")
        assert_contraction_matches(polymm.einsum("bij,bji->b", x1, x2), "bij,bji->b", [x1, x2])
    assert len(planned) == 1
    x2 = np.asfortranarray(x2)
    assert_contraction_matches(polymm.einsum("bij,bji->b", x1, x2), "bij,bji->b", [x1, x2])
    assert len(planned) == 2


def test_kept_tensordots_and_vecdots_replay_on_new_data():
    """A tensordot or vecdot seen before (same axes, types, dtypes, shapes, strides) replays its
    plan: the conjugate of a complex x1 included, each axes spelling its own."""
    rng = np.random.default_rng(8)
    for _ in range(3):
        x1, x2 = random_array(rng, (4, 6, 5), "complex128"), random_array(rng, (4, 6, 5), "complex128")
        np.testing.assert_allclose(polymm.vecdot(x1, x2, axis=-2), np.vecdot(x1, x2, axis=-2), rtol=1e-12)
        y1, y2 = random_array(rng, (4, 6, 5), "float64"), random_array(rng, (5, 6, 3), "float64")
        for axes in (([1, 2], [1, 0]), ((2, 1), (0, 1)), 0):
            np.testing.assert_allclose(
                polymm.tensordot(y1, y2, axes=axes), np.tensordot(y1, y2, axes=axes), rtol=1e-12, atol=1e-12
            )
    with pytest.raises(ValueError):  # a kept layout does not skip the checks of another call's axes
        polymm.tensordot(y1, y2, axes=([1, 2], [0, 1]))


DOT_LAYOUTS = ["plain", "x1-strided", "x2-columns", "both-strided"]


@pytest.mark.parametrize("layout", DOT_LAYOUTS)
@pytest.mark.parametrize("batch,k", [(64, 100), (700, 512)])  # one thread; threads
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int8", "uint64", "bool", "float16"])
def test_batches_of_dot_products(batch, k, layout, dtype):
    """Batches of 1 x K by K x 1 (vecdot's product) in every layout the CPU backend's dot kernels
    tell apart: operands read along K, or across the batch (a batched trace's transposed operand)."""
    rng = np.random.default_rng(6)
    x = random_array(rng, (batch, k), dtype)
    y = random_array(rng, (batch, k), dtype)
    if layout in ("x1-strided", "both-strided"):
        x = np.asfortranarray(x)  # x1's K stride is the batch's length
    if layout in ("x2-columns", "both-strided"):
        y = np.asfortranarray(y)  # x2's column runs K with a long stride, its batch with one element
    got = polymm.matmul(x[:, None, :], y[:, :, None], backend="cpu")
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    want = np.matmul(x[:, None, :].astype(wide), y[:, :, None].astype(wide))
    if np.dtype(dtype).kind in "iub":
        want = np.matmul(x[:, None, :], y[:, :, None])
        np.testing.assert_array_equal(got, want)
    else:
        tol = 1e-2 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(got.astype(wide), want, rtol=tol, atol=tol * np.sqrt(k))
    assert got.dtype == want.dtype or np.dtype(dtype).kind not in "iub"


def test_tensordot_and_vecdot_are_views_too(products):
    rng = np.random.default_rng(2)
    x1 = random_array(rng, (6, 5, 4), "float32")
    x2 = random_array(rng, (5, 4, 3), "float32")
    polymm.tensordot(x1, x2, axes=2, backend="cpu")
    polymm.vecdot(x1, x1, axis=-2, backend="cpu")
    assert all(np.shares_memory(a, x1) for a, _ in products)


def test_greedy_path_contracts_the_small_pair_first():
    # (a x b)(b x c)(c x d) with a tiny c: the product of the last two first keeps intermediates small
    labels = [["a", "b"], ["b", "c"], ["c", "d"]]
    sizes = {"a": 100, "b": 100, "c": 2, "d": 100}
    path = greedy_path(labels, ["a", "d"], sizes)
    assert len(path) == 2 and all(i < j for i, j in path)
    first = labels[path[0][0]] + labels[path[0][1]]
    assert "c" in first  # never the 100 x 100 x 100 product of the first two


def test_opt_einsum_path_is_used_when_installed(monkeypatch):
    asked = []

    def contract_path(equation, *shapes, shapes_=None, **kw):
        asked.append((equation, shapes, kw))
        return [(1, 2), (0, 1)], None

    fake = types.SimpleNamespace(
        get_symbol=lambda i: "abcdefghij"[i],
        contract_path=lambda equation, *shapes, **kw: contract_path(equation, *shapes, **kw),
    )
    monkeypatch.setitem(sys.modules, "opt_einsum", fake)
    path = contraction_path([["i", "j"], ["j", "k"], ["k", "l"]], ["i", "l"], {"i": 2, "j": 3, "k": 4, "l": 5})
    assert path == [(1, 2), (0, 1)]
    assert asked[0][0] == "ab,bc,cd->ad" and asked[0][1] == ((2, 3), (3, 4), (4, 5))
    rng = np.random.default_rng(3)
    ops = [random_array(rng, s, "float64") for s in ((2, 3), (3, 4), (4, 5))]
    assert_contraction_matches(polymm.einsum("ij,jk,kl->il", *ops), "ij,jk,kl->il", ops)


def test_parse_labels():
    inputs, output = parse("...ij,jk", [(2, 3, 4, 5), (5, 6)])
    assert inputs == [[2, 1, "i", "j"], ["j", "k"]] and output == [2, 1, "i", "k"]
    assert parse("ii", [(3, 3)]) == ([["i", "i"]], [])


def test_the_contractions_benchmark_writes_a_record(tmp_path):
    """``polymm bench --suite contractions --json``: a record (date, command, machine, one result a
    case) whose every result was checked; quick shapes, so that it is a test of the tool only."""
    import json

    from polymm.tools.cli import main

    out = tmp_path / "contractions.json"
    argv = ["bench", "--suite", "contractions", "--backend", "cpu", "--quick", "--cases", "bilinear-form,vecdot-rows"]
    assert main([*argv, "--budget", "0.02", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["suite"] == "contractions" and record["date"] and record["command"].startswith("polymm ")
    assert record["machine"]["cpus"] >= 1
    assert [r["case"] for r in record["results"]] == ["bilinear-form", "vecdot-rows"]
    assert all(r["check"] == "ok" and r["polymm_us"] > 0 and r["library_us"] > 0 for r in record["results"])
