"""The GPU paths of the shared planner, run on this machine's OpenCL device.

CI has no GPU, but PoCL runs GPU-shaped kernels too (local memory, barriers,
work-groups): here the planner is told the device is a GPU with 16 compute
units and at most 7 batch entries per launch (like CUDA's grid z limit,
smaller), so every GPU path -- the work-group matvec, vecmat (split or not,
vectors or not), the split row strip, split-K with its ordered reduction,
batched small tiles, zero-padded packing for the vector path, narrow vectors
for odd sizes, column-major operands read with vectors in place, batches
launched in parts -- computes real products, checked against the reference
oracle like the conformance suite.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import polymm  # noqa: E402
import polymm_opencl  # noqa: E402
from polymm.testing.reference import random_array  # noqa: E402
from polymm.testing.test_conformance import run  # noqa: E402

#: (shape of x1, shape of x2, layout, words of the planner's reason): one per GPU path.
CASES = [
    ((2000, 700), (700, 3), "c", "lanes along K"),
    ((700, 900), (900, 1), "fortran", "packed to rows"),
    ((3000,), (3000, 900), "c", "streamed once"),
    ((700,), (700, 250), "fortran", "streamed once"),
    ((6, 1, 300), (6, 300, 70), "c", "streamed once"),
    ((9000,), (9000, 40), "c", "slices of K added in order"),
    ((5, 3000), (3000, 900), "c", "row strip"),
    ((40, 9000), (9000, 24), "c", "slices of K"),
    ((300, 20, 40), (300, 40, 30), "c", "small"),
    ((200, 70), (70, 190), "c", "tiles"),
    ((301, 523), (523, 277), "c", "1 wide"),
    ((601, 523), (523, 477), "c", "zero-padded"),
    ((300, 512), (512, 300), "fortran", "read in place"),
]
#: the reasons of the vector paths, which only the vector dtypes take
VECTOR_REASONS = ("1 wide", "zero-padded", "read in place")


@pytest.fixture
def gpu_planned(monkeypatch):
    """The opencl backend planning as for a GPU (fresh plans before and after)."""
    real = polymm_opencl.device_info
    monkeypatch.setattr(
        polymm_opencl.queues,  # where each queue's facts are asked
        "device_info",
        lambda device: dataclasses.replace(real(device), kind="gpu", compute_units=16, max_batch=7),
    )
    backend = polymm.get_backend("opencl")
    backend._facts.clear()
    backend._plans.clear()
    yield backend
    backend._facts.clear()
    backend._plans.clear()


@pytest.mark.parametrize("case", CASES, ids=[c[3].replace(" ", "-") + f"-{c[2]}" for c in CASES])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_gpu_path(gpu_planned, case, dtype):
    s1, s2, layout, reason = case
    rng = np.random.default_rng(11)
    x1, x2 = random_array(rng, s1, dtype), random_array(rng, s2, dtype)
    if layout == "fortran":
        x1, x2 = np.asfortranarray(x1), np.asfortranarray(x2)
    run("opencl", "auto", x1, x2)
    if reason in VECTOR_REASONS and dtype != "float32":
        reason = "tiles"
    assert reason in gpu_planned.last_plan.reason, gpu_planned.last_plan


def test_split_k_on_gpu_is_deterministic(gpu_planned):
    rng = np.random.default_rng(2)
    x1, x2 = random_array(rng, (40, 9000), "float32"), random_array(rng, (9000, 24), "float32")
    first = polymm.matmul(x1, x2, backend="opencl")
    assert gpu_planned.last_plan.splits > 1
    for _ in range(2):
        np.testing.assert_array_equal(polymm.matmul(x1, x2, backend="opencl"), first)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("layout", ["c", "transposed", "batch-fortran"])
def test_realify_onto_the_real_tiles(gpu_planned, monkeypatch, dtype, layout):
    """A complex product as one real product on the shared tiles (``realify.simt``, NVIDIA's
    complex64 path, asked for here): B realified into scratch, A read in place as reals where its
    K axis is contiguous, else packed so first (a complex ``pack`` before real launches); checked
    against the oracle, every layout, a batch."""
    from polymm.kernels import devices

    monkeypatch.setitem(devices.entry("any", "realify", "simt"), "value", [dtype])
    monkeypatch.setitem(devices.entry("any", "realify", "work"), "value", 0)
    monkeypatch.setenv("POLYMM_PREFER", "realify")
    rng = np.random.default_rng(13)
    s1, s2 = ((3, 70, 90), (3, 90, 50)) if layout == "batch-fortran" else ((70, 90), (90, 50))
    x1, x2 = random_array(rng, s1, dtype), random_array(rng, s2, dtype)
    if layout == "transposed":
        x1 = np.ascontiguousarray(x1.T).T
    elif layout == "batch-fortran":
        x1 = np.asfortranarray(x1)
    run("opencl", "auto", x1, x2)
    reason = gpu_planned.last_plan.reason
    real = {"complex64": "float32", "complex128": "float64"}[dtype]
    assert reason.startswith(f"{dtype} as one {real} product"), reason
    assert ("A packed K-contiguous" in reason) == (layout != "c"), reason


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "float16", "bfloat16", "float32", "float64"])
def test_vecmat_reads_each_run_of_a_row_of_b_as_one_vector(gpu_planned, dtype):
    """vecmat loads a work-item's run of a row of B (4, 8 or 16 bytes) as one raw-bits vector for
    every dtype but complex: 16-bit and 8-bit types took an instruction per element, half of
    cuBLAS's stream on the H200. Checked against the oracle; a stepped B keeps the element path."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(17)
    x1, x2 = random_array(rng, (3000,), dtype), random_array(rng, (3000, 512), dtype)
    for b, vector in ((x2, True), (random_array(rng, (3000, 1024), dtype)[:, ::2], False)):
        run("opencl", "auto", x1, b)
        kernel, _, flags = gpu_planned.last_choice  # the product's launch
        assert kernel == "vecmat" and flags.get("vec_b", False) is vector, gpu_planned.last_choice


@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "uint16", "int32", "float16", "bfloat16", "float32", "float64", "complex64"]
)
def test_matvec_reads_runs_of_the_rows_of_a_as_one_vector(gpu_planned, dtype):
    """The work-group matvec reads A's rows and B's column in runs of ``matvec.run_bytes`` (16),
    one raw-bits load each, for every dtype whose element is smaller: element by element, 16-bit
    types streamed at 3.3 TB/s where 4-byte ones reached 3.6 on the H200. Checked against the
    oracle for one column, a batch, and operands that keep the element path: two columns of a
    row-major B, a K that breaks the runs."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(19)
    a = random_array(rng, (4, 300, 1040), dtype)
    x, v = random_array(rng, (1040,), dtype), random_array(rng, (1040, 2), dtype)
    cases = [
        (a[0], x, {"vec_a": True, "vec_b": True}),
        (a[0], v, {"vec_a": False, "vec_b": False}),  # B's rows contiguous, not its columns
        (a, x[:, None], {"vec_a": True, "vec_b": True}),
        (a[0, :, 1:1038], x[1:1038], {"vec_a": False, "vec_b": False}),  # K = 1037
    ]
    for x1, x2, flags in cases:
        run("opencl", "auto", x1, x2)
        kernel, _, got = gpu_planned.last_choice
        assert kernel == "matvec", gpu_planned.last_choice
        assert {k: got.get(k, False) for k in flags} == flags, (x1.shape, x2.shape, gpu_planned.last_choice)
