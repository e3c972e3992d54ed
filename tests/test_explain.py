"""``polymm explain`` and :func:`polymm.tools.explain.explain`: what a call runs and why, on every kind of device."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import polymm
from polymm.tools.explain import explain, occupancy
from polymm.kernels.params import DeviceInfo


def test_cpu_explains_its_blocking():
    report = explain((512, 512), (512, 512), "float32", backend="cpu")
    text = str(report)
    assert report.path.startswith("auto_") and "mc=" in text and "kc=" in text and "nc=" in text
    assert "mr x nr" in text and "arithmetic intensity" in text
    assert report.intensity == pytest.approx(2 * 512**3 / (3 * 512 * 512 * 4))


def test_cpu_explains_small_and_narrow_paths():
    assert "register tile" in str(explain((100, 8, 8), (100, 8, 8), "float64"))
    assert "dot products" in str(explain((2000, 2000), (2000,), "float32"))


def test_run_measures_the_call():
    report = explain((64, 64), (64, 64), "float32", backend="cpu", run=True)
    assert report.seconds is not None and report.seconds > 0
    assert "measured" in str(report)


def test_model_h100_plans_without_a_gpu():
    report = explain((4096, 4096), (4096, 4096), "float32", backend="cuda", device="H100")
    text = str(report)
    (launch,) = report.launches
    assert report.path == "regblock" and launch["local_mem"] > 0
    assert "occupancy" in text and "limited by" in text and "roofline  H100" in text
    assert "compute-bound" in text and report.bound_seconds == pytest.approx(2 * 4096**3 / 66.9e12)
    gemv = explain((8192, 8192), (8192,), "float32", backend="opencl", device="H100")
    assert gemv.path == "matvec" and "memory-bound" in str(gemv)


def test_crossed_broadcast_batches_are_explained_as_the_one_product_they_run():
    """``C[i, j] = A[i] @ B[j]`` runs on a device library as one product of A's rows stacked and
    B's columns side by side (``polymm.dispatch``): explained as that, the traffic each operand's
    own; a host backend, which multiplies views, and batches that are not crossed so keep theirs."""
    crossed = explain((64, 1, 32, 32), (1, 64, 32, 32), "float64", backend="cuda", device="H100")
    assert "crossed broadcast batch" in crossed.reason and "one 2048x2048x32 product" in crossed.reason
    assert crossed.launches[0]["grid"][2] == 1  # one product, not 4096
    assert crossed.intensity == pytest.approx(2 * 4096 * 32**3 / ((2 * 64 + 4096) * 32 * 32 * 8))
    flipped = explain((1, 64, 32, 16), (64, 1, 16, 32), "float32", backend="opencl", device="H100")
    assert "one 2048x2048x16 product" in flipped.reason
    for shapes in (((64, 64, 32, 32), (1, 64, 32, 32)), ((64, 1, 32, 1), (1, 64, 1, 32))):
        assert "crossed" not in explain(*shapes, "float32", backend="cuda", device="H100").reason
    host = explain((8, 1, 16, 16), (1, 8, 16, 16), "float32", backend="cpu")
    assert "crossed" not in host.reason and host.path == "small_groups_serial"  # 64 products of 16 cubes
    assert host.reason.startswith("one launch over the 8 outer batch indices")
    packed = explain((2, 1, 300, 300), (1, 3, 300, 300), "float32", backend="cpu")
    assert packed.reason.startswith("2 calls of this plan, one per outer batch index")
    assert host.intensity == pytest.approx(2 * 64 * 16**3 / ((2 * 8 + 64) * 16 * 16 * 4))
    assert "calls" not in explain((8, 8, 16, 16), (16, 16), "float32", backend="cpu").reason


def test_model_h100_plans_tensor_cores_in_a_fresh_process():
    """The CUDA backend's planner entries (tensor cores) count for a model device even when
    nothing has imported the backend yet."""
    pytest.importorskip("polymm_cuda")
    code = (
        "from polymm.tools.explain import explain; e = explain((4096, 4096), (4096, 4096), dtype='float16', backend='cuda', "
        "device='H100'); print(e.reason)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "tensor cores" in out, out


def test_model_h100_roofline_is_the_tensor_cores_where_they_run():
    """A product planned on the tensor cores is bounded by their peak, not the SIMT units' (float64
    4096 cubed on DMMA: 2.05 ms, not 4.1), TF32's in the precision modes ("tf32x3": three
    products); bfloat16 is a dtype name here too; integers count operations."""
    pytest.importorskip("polymm_cuda")
    pytest.importorskip("ml_dtypes")
    f64 = explain((4096, 4096), (4096, 4096), "float64", backend="cuda", device="H100")
    assert "dmma" in f64.path and f64.bound_seconds == pytest.approx(2 * 4096**3 / 66.9e12)
    bf16 = explain((4096, 4096), (4096, 4096), "bfloat16", backend="cuda", device="H100")
    assert "wgmma" in bf16.path and bf16.bound_seconds == pytest.approx(2 * 4096**3 / 989e12)
    i8 = explain((4096, 4096), (4096, 4096), "int8", backend="cuda", device="H100")
    assert "TOP/s" in str(i8) and i8.bound_seconds == pytest.approx(2 * 4096**3 / 1979e12)
    with polymm.use_precision("tf32"):
        tf32 = explain((4096, 4096), (4096, 4096), "float32", backend="cuda", device="H100")
    with polymm.use_precision("tf32x3"):
        tf32x3 = explain((4096, 4096), (4096, 4096), "float32", backend="cuda", device="H100")
    assert tf32.bound_seconds == pytest.approx(2 * 4096**3 / 495e12)
    assert tf32x3.bound_seconds == pytest.approx(3 * tf32.bound_seconds)  # three TF32 products
    small = explain((256, 256), (256, 256), "float64", backend="cuda", device="H100")
    assert small.path == "regblock" and small.bound_seconds == pytest.approx(2 * 256**3 / 33.5e12)


def test_model_device_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="no model of device 'B200'"):
        explain((4, 4), (4, 4), backend="cuda", device="B200")
    with pytest.raises(ValueError, match="'cpu'"):
        explain((4, 4), (4, 4), backend="cpu", device="H100")
    with pytest.raises(ValueError, match="no algorithm 'fast'"):
        explain((4, 4), (4, 4), backend="cpu", algorithm="fast")


def test_occupancy_names_its_limit():
    gpu = DeviceInfo(
        "g",
        "NVIDIA",
        "gpu",
        "cuda",
        132,
        1024,
        48 * 1024,
        threads_per_cu=2048,
        blocks_per_cu=32,
        local_mem_per_cu=228 * 1024,
        registers_per_cu=65536,
    )
    # the course's question: 16 x 16 tiles of float32, 2 KiB of shared memory, 32 registers
    assert occupancy(gpu, 256, 2 * 16 * 16 * 4, 32)[:2] == (8, "threads")
    assert occupancy(gpu, 256, 8192, 128)[:2] == (2, "registers")
    assert occupancy(gpu, 64, 40 * 1024, 32)[:2] == (5, "shared memory")
    assert occupancy(gpu, 32, 0, 16)[:2] == (32, "blocks")


def test_opencl_explains_its_launches():
    pytest.importorskip("pyopencl")
    try:
        polymm.get_backend("opencl")
    except polymm.BackendUnavailable as exc:
        pytest.skip(f"opencl: {exc}")
    report = explain((300, 200), (200, 100), "float32", backend="opencl")
    text = str(report)
    assert report.launches and "launch 1" in text and "work-groups of" in text and "local memory" in text


def test_cli():
    out = subprocess.run(
        [sys.executable, "-m", "polymm.tools.cli", "explain", "256x256", "256", "--dtype", "float64"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "polymm explain: (256, 256) @ (256,) float64 on cpu" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "polymm.tools.cli", "explain", "4x4", "4xq"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "not a shape" in bad.stderr


@pytest.mark.parametrize(
    "shape1, words",
    [
        (np.ones((4, 4)), "an array: pass x.shape and x.dtype"),
        ("4x4", "must be a shape, a tuple of ints; got str"),
        (4, "must be a shape, a tuple of ints; got int"),
        ((4, -1), "non-negative ints; got (4, -1)"),
        ((4, 2.5), "non-negative ints; got (4, 2.5)"),
    ],
)
def test_explain_refuses_what_is_not_a_shape(shape1, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        explain(shape1, (4, 4), "float32", backend="cpu")
