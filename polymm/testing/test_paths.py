"""Shapes at the edges between a backend's paths: every kernel a planner can pick, and its neighbours.

Backends choose kernels by shape (small products, batches of tiny matrices,
matrix-vector, deep K with split-K, big tiles).  Each entry of
:data:`PATH_SHAPES` is a shape class of the cliff suite (:mod:`polymm.tools.cliffs`),
drawn small enough for CI and placed on or just beside a threshold, so the
suite reaches every path and the seams between them.  Inputs are NumPy arrays;
results go into poisoned buffers and are checked against the higher-precision
reference, like the rest of the conformance suite.
"""

from __future__ import annotations

import numpy as np
import pytest

from polymm.testing.reference import random_array
from polymm.testing.test_conformance import rng, run  # noqa: F401  (rng is a fixture)

#: (id, shape of x1, shape of x2). Extend this table when a backend gains a path.
PATH_SHAPES = [
    # tiny and small squares: the serial / low-latency paths and their edges
    ("square-1", (1, 1), (1, 1)),
    ("square-2", (2, 2), (2, 2)),
    ("square-15", (15, 15), (15, 15)),
    ("square-16", (16, 16), (16, 16)),
    ("square-17", (17, 17), (17, 17)),
    ("square-31", (31, 31), (31, 31)),
    ("square-63", (63, 63), (63, 63)),
    ("square-64", (64, 64), (64, 64)),
    ("square-65", (65, 65), (65, 65)),
    ("square-127", (127, 127), (127, 127)),
    ("square-129", (129, 129), (129, 129)),
    # batches of tiny and small matrices, full and broadcast
    ("batch-300x4", (300, 4, 4), (300, 4, 4)),
    ("batch-257x8", (257, 8, 8), (257, 8, 8)),
    ("batch-129x16", (129, 16, 16), (129, 16, 16)),
    ("batch-33x33", (33, 33, 33), (33, 33, 33)),
    ("batch-9x64", (9, 64, 64), (9, 64, 64)),
    ("batch-odd", (65, 7, 13), (65, 13, 5)),
    ("batch-broadcast-a", (1, 16, 16), (200, 16, 16)),
    ("batch-broadcast-b", (200, 16, 16), (16, 16)),
    ("batch-broadcast-both", (20, 1, 8, 8), (1, 30, 8, 8)),
    # shape-compiled small-product kernels: K at its limit and past it, N over
    # one register tile (overlapping last tile), one row, one column
    ("small-k256", (3, 20, 256), (3, 256, 40)),
    ("small-k257", (3, 20, 257), (257, 40)),
    ("small-m1", (200, 1, 24), (200, 24, 24)),
    ("small-n1", (200, 24, 24), (24, 1)),
    ("small-65x64", (4, 65, 64), (4, 64, 64)),
    # matrix-vector, vector-matrix, and a few columns or rows
    ("gemv", (300, 257), (257,)),
    ("gevm", (257,), (257, 300)),
    ("dot", (1000,), (1000,)),
    ("batched-gemv", (5, 70, 90), (90,)),
    ("n1", (300, 257), (257, 1)),
    ("n2", (300, 257), (257, 2)),
    ("n3", (129, 300), (300, 3)),
    ("n4", (300, 257), (257, 4)),
    ("n7", (129, 300), (300, 7)),
    ("n8", (300, 257), (257, 8)),
    ("n9", (300, 257), (257, 9)),
    ("m1", (1, 257), (257, 300)),
    ("m3", (3, 300), (300, 129)),
    ("m8", (8, 257), (257, 300)),
    ("m9", (9, 257), (257, 300)),
    # few rows, long K: split-K over whole rows of B (edges of the chunking)
    ("m1-k1024", (1, 1024), (1024, 70)),
    ("m5-k1100", (5, 1100), (1100, 300)),
    ("batched-gevm-k1500", (3, 1, 1500), (3, 1500, 77)),
    # deep K (split-K and its reduction), with K not a multiple of any block
    ("deep-k", (8, 20000), (20000, 8)),
    ("deep-k-odd", (13, 9001), (9001, 11)),
    ("deep-k-32", (32, 16411), (16411, 32)),
    ("deep-k-batched", (3, 9, 5003), (3, 5003, 10)),
    # deep K on the CPU's packed split-K (M, N past the small kernels; 67 rows: a last row
    # panel short of the micro-tile; A's rows read in place)
    ("deep-k-packed", (67, 9001), (9001, 70)),
    # wide outer products (small K)
    ("outer-k1", (300, 1), (1, 257)),
    ("outer-k4", (513, 4), (4, 300)),
    ("wide-k33", (400, 33), (33, 401)),
    # bigger than one cache block in every direction, odd
    ("large-odd", (301, 523), (523, 277)),
    # OpenCL CPU planner edges: small batches up to K=256, split-K from K=4096,
    # the outer-product shape up to K=64, the split row strip from K=1024
    ("batch-k256", (5, 16, 256), (5, 256, 16)),
    ("batch-k257", (5, 16, 257), (5, 257, 16)),
    ("deep-k-4095", (16, 4095), (4095, 16)),
    ("deep-k-4096", (16, 4096), (4096, 16)),
    ("outer-k64", (96, 64), (64, 300)),
    ("outer-k65", (96, 65), (65, 300)),
    ("m3-k1500", (3, 1500), (1500, 70)),
    # GPU planner edges (polymm.kernels.planner): the work-group matvec and the
    # row strip from K=32, split-K from K=2048 at K >= 16 max(M, N), packing for
    # the vector path from 2**22 multiply-adds (odd K and N: zero-padded copies)
    ("n4-k31", (300, 31), (31, 4)),
    ("n4-k32", (300, 32), (32, 4)),
    ("m8-k31", (8, 31), (31, 300)),
    ("m8-k32", (8, 32), (32, 300)),
    ("deep-k-2047", (40, 2047), (2047, 40)),
    ("deep-k-2048", (40, 2048), (2048, 40)),
    ("pack-below", (161, 163), (163, 159)),
    ("pack-odd", (163, 165), (165, 157)),
]


#: float16 shapes around the GPU tensor-core kernels' rules (128 x 128 tiles, K in slices of 32,
#: 16-byte rows: K and N multiples of 8) and just off them, where another kernel takes over.
HALF_SHAPES = [
    ("half-square-128", (128, 128), (128, 128)),
    ("half-edges", (130, 40), (40, 136)),
    ("half-k-tail", (64, 520), (520, 64)),
    ("half-batched", (3, 200, 64), (3, 64, 264)),
    ("half-broadcast", (200, 64), (2, 64, 72)),
    ("half-n-odd", (128, 64), (64, 129)),
    ("half-k-odd", (128, 63), (63, 128)),
]


def _layouts(x: np.ndarray):
    """The same values as C, Fortran and negatively strided arrays (2-D and up)."""
    yield "c", x
    if x.ndim >= 2:
        yield "fortran", np.asfortranarray(x)
        flipped = np.ascontiguousarray(x[..., ::-1, :])[..., ::-1, :]
        yield "negative", flipped


@pytest.mark.parametrize("case", PATH_SHAPES, ids=[c[0] for c in PATH_SHAPES])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "complex64"])
def test_path_shapes(polymm_backend, polymm_algorithm, case, dtype, rng):  # noqa: F811
    _, s1, s2 = case
    x1 = random_array(rng, s1, dtype)
    x2 = random_array(rng, s2, dtype)
    run(polymm_backend, polymm_algorithm, x1, x2)


@pytest.mark.parametrize("case", PATH_SHAPES, ids=[c[0] for c in PATH_SHAPES])
def test_path_shapes_views(polymm_backend, case, rng):  # noqa: F811
    """Fortran and negatively strided operands take the same paths and give the same answers."""
    _, s1, s2 = case
    x1 = random_array(rng, s1, "float32")
    x2 = random_array(rng, s2, "float32")
    for (_, a), (_, b) in zip(_layouts(x1), _layouts(x2)):
        run(polymm_backend, "auto", a, b)


@pytest.mark.parametrize("case", HALF_SHAPES, ids=[c[0] for c in HALF_SHAPES])
def test_half_path_shapes(polymm_backend, polymm_algorithm, case, rng):  # noqa: F811
    _, s1, s2 = case
    run(polymm_backend, polymm_algorithm, random_array(rng, s1, "float16"), random_array(rng, s2, "float16"))
