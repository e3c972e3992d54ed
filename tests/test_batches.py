"""Broadcast batches of a device library (``polymm.dispatch._compute``): where A walks one batch
axis and B the other (``C[i, j] = A[i] @ B[j]``), the product runs as one (every A's rows
stacked, every B's columns side by side) and its blocks are copied into place; other broadcasts
take the copies of the whole batch as before. On the OpenCL and CUDA backends, every result
checked by the oracle, the products the backend is asked for counted."""

from __future__ import annotations

import numpy as np
import pytest

import polymm
from polymm.testing.reference import assert_matches, random_array


class Strided(np.ndarray):
    """A view ``cut(base)`` (NumPy indexing and ``transpose`` only) that remembers how it was cut,
    to be cut the same way on the device."""

    def __new__(cls, base, cut):
        view = cut(base).view(cls)
        view.whole, view.cut = base, cut
        return view


def _transfers(name):
    """``(to_device, to_host)`` for the array library of backend ``name``."""
    if name == "opencl":
        import pyopencl.array as cl_array
        from polymm_opencl import default_queue

        queue = default_queue()
        return (lambda x: cl_array.to_device(queue, x)), (lambda x: x.get())
    import cupy

    return cupy.asarray, cupy.asnumpy


class Asked(list):
    """The (A, B) shapes a backend computed; ``on_cpu``: whether its device is a CPU (PoCL)."""

    on_cpu = False


@pytest.fixture(params=["opencl", "cuda"])
def device(request, monkeypatch):
    """``(run, asked)``: ``run(x1, x2, **options)`` multiplies device copies of host arrays on a
    device backend and returns the host result; ``asked`` lists the (A, B) shapes it computed."""
    name = request.param
    if not any(i.name == name and i.available for i in polymm.backends()):
        pytest.skip(f"the {name} backend is unavailable here")
    to_device, to_host = _transfers(name)
    backend = type(polymm.get_backend(name))
    asked = Asked()
    asked.on_cpu = "[CPU]" in polymm.get_backend(name).devices()[0]
    compute = backend.matmul

    def counted(self, a, b, out, algorithm):
        asked.append((a.shape, b.shape))
        return compute(self, a, b, out, algorithm)

    monkeypatch.setattr(backend, "matmul", counted)

    def run(x1, x2, **options):
        if "out" in options:
            options["out"] = to_device(options["out"])
        # a strided host view goes over as its base, viewed the same way on the device
        d1, d2 = (x.cut(to_device(x.whole)) if hasattr(x, "cut") else to_device(x) for x in (x1, x2))
        got = polymm.matmul(d1, d2, backend=name, **options)
        assert "out" not in options or got is options["out"]
        return to_host(got)

    return run, asked


@pytest.mark.parametrize(
    "shape1, shape2, one",
    [
        ((4, 1, 5, 3), (1, 6, 3, 7), ((1, 20, 3), (1, 3, 42))),  # A along the first axis, B the second
        ((1, 6, 5, 3), (4, 1, 3, 7), ((1, 30, 3), (1, 3, 28))),  # and the other way round
        ((3, 1, 16, 16), (1, 5, 16, 16), ((1, 48, 16), (1, 16, 80))),
    ],
)
def test_crossed_batches_run_as_one_product(device, shape1, shape2, one):
    run, asked = device
    rng = np.random.default_rng(5)
    for dtype in ("float32", "complex64", "int32"):
        x1, x2 = random_array(rng, shape1, dtype), random_array(rng, shape2, dtype)
        asked.clear()
        assert_matches(run(x1, x2), x1, x2)
        assert asked == [one], asked


def test_crossed_batches_stack_a_copy_of_a_and_fill_out(device):
    """An A whose matrices do not lie one stride apart is copied to be stacked; ``out`` is filled."""
    run, asked = device
    rng = np.random.default_rng(6)
    whole = np.ascontiguousarray(random_array(rng, (4, 1, 3, 5), "float64").transpose(0, 1, 3, 2))
    x1 = Strided(whole, lambda x: x[:, :, ::2])
    x2 = random_array(rng, (1, 6, 3, 7), "float64")
    assert_matches(run(x1, x2), x1, x2)
    assert asked == [((1, 12, 3), (1, 3, 42))], asked
    asked.clear()
    poisoned = np.full((4, 6, 3, 7), np.nan)
    assert_matches(run(x1, x2, out=poisoned), x1, x2)
    assert len(asked) == 1


@pytest.mark.parametrize(
    "shape1, shape2",
    [
        ((4, 6, 5, 3), (1, 6, 3, 7)),  # A walks both axes: copies of the whole batch
        ((4, 1, 8, 1), (1, 6, 1, 8)),  # K = 1: the blocks outweigh the copies they would save
        ((2, 3, 1, 5, 3), (1, 1, 4, 3, 7)),  # three batch axes
    ],
)
def test_other_broadcasts_are_not_crossed(device, shape1, shape2):
    run, asked = device
    rng = np.random.default_rng(7)
    x1, x2 = random_array(rng, shape1, "float32"), random_array(rng, shape2, "float32")
    assert_matches(run(x1, x2), x1, x2)
    m, n = shape1[-2], shape2[-1]
    assert all(a[1] == m and b[2] == n for a, b in asked), asked


def test_a_batch_that_does_not_merge_is_laid_out_again_for_one_product(device):
    """A batched trace's second operand (``bij,bji->b`` as dot products over ``(b, i)``): its
    batch axes lie 256 and 1 elements apart, no one stride; copied once (no element repeated,
    fewer bytes than the launches saved), the product is one launch, not one per ``b``."""
    run, asked = device
    rng = np.random.default_rng(8)
    x1 = random_array(rng, (8, 16, 1, 32), "float32")
    whole = random_array(rng, (8, 32, 16, 1), "float32")
    x2 = Strided(whole, lambda x: x.transpose((0, 2, 1, 3)))  # (8, 16, 32, 1), strides (512, 1, 16, 1)
    assert_matches(run(x1, x2), x1, x2)
    assert asked == [((128, 1, 32), (128, 32, 1))], asked


def test_a_large_relayout_stays_launches_where_the_copy_costs_more(device):
    """The batched trace's own size (64 x 256 dot products of 256): one launch after a 16 MiB copy
    on a GPU; on an OpenCL CPU device (PoCL) the copy costs more than the 63 launches it saves
    (13 -> 21 ms), so the core loops there."""
    run, asked = device
    rng = np.random.default_rng(9)
    x1 = random_array(rng, (64, 256, 1, 256), "float32")
    whole = random_array(rng, (64, 256, 256, 1), "float32")
    x2 = Strided(whole, lambda x: x.transpose((0, 2, 1, 3)))  # (64, 256, 256, 1): (b, i) strides 65536, 1
    assert_matches(run(x1, x2), x1, x2)
    assert asked == ([((256, 1, 256), (256, 256, 1))] * 64 if asked.on_cpu else [((16384, 1, 256), (16384, 256, 1))])
