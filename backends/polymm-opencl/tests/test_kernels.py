"""polymm.kernels without a GPU: every kernel x dtype renders and compiles in
both dialects (OpenCL through PoCL, CUDA through nvcc when installed), and the
OpenCL backend computes NumPy's answer for every kernel variant, dtype and
stride pattern on the local OpenCL device."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from polymm.backend import CONTRACT_DTYPES
from polymm.kernels import IMAGE_DTYPES, KERNELS, KernelParams, kernel_name, launch_geometry, render
from polymm.testing import assert_matches, random_array

pyopencl = pytest.importorskip("pyopencl")
cl_array = pytest.importorskip("pyopencl.array")

DTYPES = [d.name for d in CONTRACT_DTYPES]
VECTOR_DTYPES = ("float32", "float64", "complex64")  # those the GPU shape reads with vectors
CPU_SHAPE = KernelParams(mwg=12, nwg=16, kwg=8, mdimc=2, ndimc=1, vw=8, mr=6, use_local=False)
GPU_SHAPE = KernelParams(mwg=32, nwg=32, kwg=8, mdimc=8, ndimc=8, vw=2, gvw=2, pad=2)
MATVEC_SHAPE = KernelParams(mr=3, nwg=2, vw=8, mdimc=4, use_local=False)
VECMAT_SHAPE = KernelParams(mr=3, nwg=16, ndimc=8, gvw=2, mdimc=4, kwg=3, use_local=False)
#: (kernel, params, render flags): every code path of every body.
VARIANTS = [
    ("naive", None, {}),
    ("tiled", KernelParams(ts=8), {}),
    ("tiled-dynamic", KernelParams(ts=8), {}),
    ("regblock", GPU_SHAPE, {}),
    ("regblock", GPU_SHAPE, {"vec_a": True, "vec_b": True}),
    ("regblock", GPU_SHAPE, {"vec_a": True, "vec_b": True, "a_mmajor": True, "b_kmajor": True}),
    ("regblock", GPU_SHAPE.replace(gvw=1), {"vec_a": True, "vec_b": True}),  # odd sizes: 1-wide "vectors"
    # teams splitting K inside a work-group, work-groups in bands of tile rows
    ("regblock", GPU_SHAPE.replace(kteams=2, group=2), {"vec_a": True, "vec_b": True}),
    ("regblock", GPU_SHAPE.replace(kteams=2, group=2), {"vec_a": True, "vec_b": True, "a_mmajor": True}),
    ("regblock", GPU_SHAPE.replace(kteams=3, group=3), {}),
    # two stages of local tiles, K steps alternating between them
    ("regblock", GPU_SHAPE.replace(stages=2), {"vec_a": True, "vec_b": True}),
    ("regblock", GPU_SHAPE.replace(stages=2), {"vec_a": True, "vec_b": True, "a_mmajor": True, "b_kmajor": True}),
    ("regblock", GPU_SHAPE.replace(stages=2), {}),
    ("regblock", GPU_SHAPE.replace(stages=2, kteams=2), {"vec_a": True, "vec_b": True}),
    ("regblock", GPU_SHAPE.replace(stages=2, kteams=3), {}),
    ("regblock", CPU_SHAPE, {}),
    ("regblock", CPU_SHAPE, {"vec_b": True}),
    ("regblock", CPU_SHAPE.replace(nwg=32, nr=16, pack_b=True), {"vec_b": True}),
    ("regblock", CPU_SHAPE.replace(mwg=6, mdimc=1, nwg=8, bpg=3), {"vec_b": True}),
    ("matvec", MATVEC_SHAPE, {}),
    ("matvec", MATVEC_SHAPE, {"vec_a": True, "vec_b": True}),
    ("matvec", KernelParams(mr=2, nwg=2, mdimc=16, vw=1), {}),  # the GPU shape: a work-group per rows
    ("vecmat", VECMAT_SHAPE, {}),
    ("vecmat", VECMAT_SHAPE, {"vec_b": True}),
    ("vecmat", VECMAT_SHAPE.replace(gvw=8, nwg=64), {"vec_b": True}),  # 16-byte rows of 16-bit types
]
#: A complex B read as its real form by the GPU tiles (float32 and float64 products only).
REAL_B_VARIANTS = [
    ("regblock", shape, {"vec_a": True, "vec_b": True, "a_mmajor": mmajor, "real_b": True})
    for shape in (GPU_SHAPE, GPU_SHAPE.replace(stages=2, kteams=2))
    for mmajor in (False, True)
]
#: The helper kernels (own interfaces), rendered and compiled beside the products.
HELPERS = [
    ("pack", None, {}),
    ("pack", KernelParams(ts=1, mr=4), {}),  # the GPUs' shape of work
    ("sum-slices", None, {}),
    ("realify", KernelParams(ts=2), {}),
]


def _helpers(dtype):
    """The helper kernels rendered for ``dtype`` (``realify`` is for the real dtypes only)."""
    return [h for h in HELPERS if h[0] != "realify" or np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize >= 4]


def _variant_id(v):
    kernel, params, flags = v
    shape = "" if params is None or kernel == "vecmat" else ("-local" if params.use_local else "-cpu")
    shape += f"-mr{params.mr}" if kernel == "matvec" and params.use_local else ""
    shape += "-packed" if params is not None and params.pack_b else ""
    shape += f"-bpg{params.bpg}" if params is not None and params.bpg > 1 else ""
    shape += "-gvw1" if params is not None and params.use_local and params.gvw == 1 else ""
    if params is not None and params.kteams > 1:
        shape += f"-kteams{params.kteams}-group{params.group}"
    shape += f"-stages{params.stages}" if params is not None and params.stages > 1 else ""
    return kernel + shape + "".join(f"-{k}" for k in flags)


@pytest.fixture(scope="module")
def queue():
    from polymm_opencl import default_queue

    return default_queue()


@pytest.mark.parametrize("dtype", DTYPES)
def test_opencl_sources_build(queue, dtype):
    device = queue.device
    if dtype in ("float64", "complex128") and "cl_khr_fp64" not in device.extensions:
        pytest.skip(f"{device.name} has no fp64")
    for kernel, params, flags in VARIANTS + _helpers(dtype):
        if params is not None and not params.use_local and dtype == "float64":
            params = params.replace(vw=4)
        source = render("opencl", kernel, dtype, params, **flags)
        program = pyopencl.Program(queue.context, source).build()
        pyopencl.Kernel(program, kernel_name(kernel))  # the entry point exists
    if device.image_support and np.dtype(dtype) in IMAGE_DTYPES:
        program = pyopencl.Program(queue.context, render("opencl", "image", dtype)).build()
        pyopencl.Kernel(program, kernel_name("image"))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_sources_compile(tmp_path):
    def compile_one(numbered):
        number, (dtype, (kernel, params, flags)) = numbered
        source = tmp_path / f"{number}.cu"  # in the test's own folder: nothing left behind in /tmp
        source.write_text(render("cuda", kernel, dtype, params, **flags))
        result = subprocess.run(
            ["nvcc", "-arch=sm_90", "--ptx", "-o", "/dev/null", str(source)], capture_output=True, text=True
        )
        return dtype, kernel, flags, result.returncode, result.stderr

    jobs = [(d, v) for d in DTYPES for v in VARIANTS + _helpers(d)]
    jobs += [(d, v) for d in ("float32", "float64") for v in REAL_B_VARIANTS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        failures = [r for r in pool.map(compile_one, enumerate(jobs)) if r[3] != 0]
    assert not failures, "\n".join(f"{d} {k} {f}:\n{err[:2000]}" for d, k, f, _, err in failures)


def test_render_rejects_bad_input():
    with pytest.raises(ValueError):
        render("metal", "tiled", np.float32)
    with pytest.raises(ValueError):
        render("opencl", "strassen", np.float32)
    with pytest.raises(TypeError):
        render("opencl", "tiled", np.dtype("datetime64[s]"))
    with pytest.raises(ValueError):
        render("cuda", "regblock", np.float32, KernelParams(mwg=60, mdimc=16))


def test_launch_geometry():
    p = KernelParams(ts=16, mwg=128, nwg=64, mdimc=16, ndimc=8)
    assert launch_geometry("tiled", p, M=33, N=17, B=3) == ((32, 48, 3), (16, 16, 1))
    assert launch_geometry("regblock", p, M=129, N=64, B=1) == ((8, 32, 1), (8, 16, 1))
    for kernel in KERNELS:
        glob, local = launch_geometry(kernel, p, 5, 7, 2)
        assert all(gi % li == 0 for gi, li in zip(glob, local))


def _operands(rng, dtype, layout, batch=3, M=37, K=29, N=43):
    """(a, b) NumPy views of shape (batch, M, K), (batch, K, N) in a stride pattern."""
    if layout == "contiguous":
        return random_array(rng, (batch, M, K), dtype), random_array(rng, (batch, K, N), dtype)
    if layout == "transposed":
        return (
            random_array(rng, (batch, K, M), dtype).transpose(0, 2, 1),
            random_array(rng, (batch, N, K), dtype).transpose(0, 2, 1),
        )
    if layout in ("rows", "columns", "a-columns", "b-columns"):  # sizes even: the vector paths read them in place
        M, K, N = M + 1, K + 1, N + 1
        a = random_array(rng, (batch, M, K), dtype)
        b = random_array(rng, (batch, K, N), dtype)
        if layout in ("columns", "a-columns"):
            a = random_array(rng, (batch, K, M), dtype).transpose(0, 2, 1)
        if layout in ("columns", "b-columns"):
            b = random_array(rng, (batch, N, K), dtype).transpose(0, 2, 1)
        return a, b
    if layout == "negative":
        return (
            random_array(rng, (batch, M, 2 * K), dtype)[::-1, ::-1, ::-2],
            random_array(rng, (batch, K + 3, N), dtype)[:, :K][:, ::-1],
        )
    if layout == "broadcast":
        a = np.broadcast_to(random_array(rng, (1, M, K), dtype), (batch, M, K))
        return a, random_array(rng, (batch, K, N), dtype)
    raise ValueError(layout)


@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
@pytest.mark.parametrize("dtype", DTYPES)
def test_variant_matches_numpy(queue, variant, dtype):
    import polymm

    if dtype in ("float64", "complex128") and "cl_khr_fp64" not in queue.device.extensions:
        pytest.skip("no fp64")
    backend = polymm.get_backend("opencl")
    kernel, params, flags = variant
    if params is not None and not params.use_local and dtype == "float64":
        params = params.replace(vw=4)  # PoCL's wheel targets AVX2: at most 32-byte vectors
    rng = np.random.default_rng(7)
    layouts = ["contiguous", "transposed", "negative", "broadcast", "rows", "columns", "a-columns", "b-columns"]
    for layout in layouts:
        a, b = _operands(rng, dtype, layout)
        da = backend.from_numpy(a)
        db = backend.from_numpy(b)
        out = cl_array.empty(queue, (a.shape[0], a.shape[1], b.shape[2]), a.dtype)
        backend.launch(da, db, out, kernel, params)
        assert_matches(out.get(), a, b)
        if kernel == "regblock" and params.use_local and layout == "columns" and dtype in VECTOR_DTYPES:
            assert backend.last_choice[2] == {"vec_a": True, "vec_b": True, "a_mmajor": True, "b_kmajor": True}


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 200, 1), (5, 1, 7), (130, 17, 250), (64, 64, 64)])
@pytest.mark.parametrize("algorithm", ["naive", "tiled", "tiled-dynamic", "auto"])
def test_public_matmul_sizes(shape, algorithm):
    import polymm

    M, K, N = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = polymm.matmul(a, b, backend="opencl", algorithm=algorithm)
    assert_matches(c, a, b)


def test_fast_paths_taken_for_contiguous_float32(queue):
    import polymm

    backend = polymm.get_backend("opencl")
    a = cl_array.to_device(queue, np.ones((1, 64, 64), np.float32))
    out = cl_array.empty(queue, (1, 64, 64), np.float32)
    backend.launch(a, a, out, "regblock", KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16))
    assert backend.last_choice[2] == {"vec_a": True, "vec_b": True, "a_mmajor": False, "b_kmajor": False}
    np.testing.assert_array_equal(out.get(), np.full((1, 64, 64), 64, np.float32))
    columns = cl_array.to_device(queue, np.ones((1, 64, 64), np.float32)).transpose((0, 2, 1))
    backend.launch(columns, columns, out, "regblock", KernelParams(mwg=64, nwg=64, kwg=16, mdimc=16, ndimc=16))
    assert backend.last_choice[2] == {"vec_a": True, "vec_b": True, "a_mmajor": True, "b_kmajor": True}


def test_pyopencl_arrays_stay_on_their_queue(queue):
    import polymm

    a = cl_array.to_device(queue, np.arange(12, dtype=np.float32).reshape(3, 4))
    b = cl_array.to_device(queue, np.ones((4, 2), np.float32))
    c = polymm.matmul(a, b, backend="opencl")
    assert isinstance(c, cl_array.Array) and c.queue is queue
    np.testing.assert_array_equal(c.get(), a.get() @ b.get())


@pytest.mark.parametrize("view", ["c", "transposed", "reversed", "step"])
def test_numpy_operands_are_lent_to_a_host_memory_device_and_left_as_they_were(queue, view):
    """NumPy operands of a product on a device that computes in host memory (PoCL) are read where
    they lie (``CL_MEM_USE_HOST_PTR``: no copy into fresh device memory), views included, and come
    back unchanged; ``from_numpy`` still copies (an array made with it does not follow its source)."""
    import polymm
    from polymm_opencl.arrays import reads_host_memory

    backend = polymm.get_backend("opencl")
    rng = np.random.default_rng(5)
    base = rng.standard_normal((60, 80))
    x = {"c": base, "transposed": base.T, "reversed": base[::-1], "step": base[:, ::2]}[view]
    before = x.copy()
    lent, copied = backend.lend_numpy(x), backend.from_numpy(x)
    on_host = bool(lent.base_data.flags & pyopencl.mem_flags.USE_HOST_PTR)
    assert on_host == reads_host_memory(queue) and not copied.base_data.flags & pyopencl.mem_flags.USE_HOST_PTR
    np.testing.assert_array_equal(backend.to_numpy(lent), x)
    y = rng.standard_normal((x.shape[1], 7))
    assert_matches(polymm.matmul(x, y, backend="opencl"), x, y)
    np.testing.assert_array_equal(x, before)
    base[...] = -1.0  # the copy keeps the values it was made with
    np.testing.assert_array_equal(backend.to_numpy(copied), before)


@pytest.mark.parametrize("shape", [(1024, 512, 16), (256, 1024, 40000), (300, 1000, 200)])
def test_a_large_result_is_written_into_the_numpy_array_returned(queue, shape, monkeypatch):
    """On a device that computes in host memory, a large result (the database's
    ``cost.lent_result_bytes``, here 1 MiB) is written straight into the NumPy array the call
    returns (``lend_result``: no copy back), through every path that writes C (the packed kernel;
    deep K's slices summed into C), and ``out=`` is filled from it; smaller results, and other
    devices, come back as before."""
    import polymm
    from polymm_opencl import arrays
    from polymm_opencl.arrays import reads_host_memory

    threshold = 1 << 20
    assert arrays.lent_result_bytes(queue) > threshold or not reads_host_memory(queue)
    monkeypatch.setattr(arrays, "lent_result_bytes", lambda queue: threshold)

    backend = polymm.get_backend("opencl")
    m, n, k = shape
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    lent = backend.lend_result((m, n), np.dtype(np.float32), backend.lend_numpy(a))
    large = m * n * 4 >= threshold
    assert (lent is not None) == (large and reads_host_memory(queue))
    assert backend.lend_result((4, 4), np.dtype(np.float32), backend.lend_numpy(a)) is None
    got = polymm.matmul(a, b, backend="opencl")
    assert type(got) is np.ndarray and got.flags.c_contiguous
    assert_matches(got, a, b)
    again = polymm.matmul(a, b, backend="opencl")
    assert not np.shares_memory(got, again)
    out = np.full((m, n), np.nan, np.float32)  # poisoned
    assert polymm.matmul(a, b, backend="opencl", out=out) is out
    np.testing.assert_array_equal(out, again)


def test_a_large_result_is_written_straight_into_out(queue, monkeypatch):
    """On a device that computes in host memory, ``out=`` of a large result (over
    ``cost.lent_result_bytes``, here 1 MiB) is handed to the device itself (``lend_out``): the
    product is written there, not copied in afterwards; an ``out`` that shares memory with an
    operand, or is not C-contiguous, is filled from a result computed apart, as before."""
    import polymm
    from polymm_opencl import arrays
    from polymm_opencl.arrays import reads_host_memory

    threshold = 1 << 20
    monkeypatch.setattr(arrays, "lent_result_bytes", lambda queue: threshold)
    backend = polymm.get_backend("opencl")
    returned = []
    to_numpy = backend.to_numpy
    monkeypatch.setattr(backend, "to_numpy", lambda x: returned.append(to_numpy(x)) or returned[-1])
    rng = np.random.default_rng(8)
    n = 1024
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    expected = polymm.matmul(a, b, backend="opencl")
    out = np.full((n, n), np.nan, np.float32)  # poisoned
    assert polymm.matmul(a, b, backend="opencl", out=out) is out
    np.testing.assert_array_equal(out, expected)
    assert (returned[-1] is out) == reads_host_memory(queue)
    # over an operand: computed apart, then copied in (NumPy's answer, not a half-overwritten one)
    a2 = a.copy()
    assert polymm.matmul(a2, b, backend="opencl", out=a2) is a2
    np.testing.assert_array_equal(a2, expected)
    assert returned[-1] is not a2
    # a strided out: computed apart too
    wide = np.full((n, 2 * n), np.nan, np.float32)
    polymm.matmul(a, b, backend="opencl", out=wide[:, ::2])
    np.testing.assert_array_equal(wide[:, ::2], expected)
    assert np.isnan(wide[:, 1::2]).all()


def test_devices_listed():
    import polymm

    backend = polymm.get_backend("opencl")
    assert backend.devices() and "local memory" in backend.devices()[0]


def test_build_failure_carries_the_compiler_log(queue, monkeypatch):
    import polymm_opencl

    backend = polymm_opencl.OpenCLBackend()
    monkeypatch.setattr(polymm_opencl.programs, "render", lambda *a, **k: "__kernel void polymm_naive( { oops }")
    a = cl_array.to_device(queue, np.ones((1, 2, 2), np.float32))
    out = cl_array.empty(queue, (1, 2, 2), np.float32)
    with pytest.raises(polymm_opencl.KernelBuildError, match="naive"):
        backend.launch(a, a, out, "naive", None)


def test_fp64_refused_by_name_on_devices_without_it(monkeypatch):
    import polymm_opencl

    backend = polymm_opencl.OpenCLBackend()
    monkeypatch.setattr(polymm_opencl.queues, "_has_fp64", lambda device: False)
    with pytest.raises(TypeError, match="fp64"):
        backend.check_dtype(np.dtype("complex128"), np.ones(2))
    backend.check_dtype(np.dtype("float16"), np.ones(2))  # float16 works everywhere


def test_batches_per_group_divide_the_batch():
    p = KernelParams(mwg=8, nwg=8, mdimc=1, ndimc=1, vw=8, mr=4, use_local=False, bpg=16)
    assert launch_geometry("regblock", p, 8, 8, 1000) == ((1, 1, 1000), (1, 1, 10))
    assert launch_geometry("regblock", p, 8, 8, 7)[1] == (1, 1, 7)


@pytest.mark.parametrize(
    "shape,layout,expect",
    [
        ((4096, 4096, 1), "c", {"kernel": "matvec"}),
        ((4096, 4096, 4), "c", {"kernel": "matvec", "pack_b": "transposed"}),
        ((1, 4096, 4096), "c", {"kernel": "regblock"}),
        ((1, 4096, 4096), "f", {"kernel": "matvec", "swap": True}),
        ((128, 65536, 128), "c", {"kernel": "regblock", "splits": lambda s: s > 1}),
        ((1024, 1024, 1024), "t", {"kernel": "regblock", "pack_b": "rows", "pack_a": True}),
        ((1024, 1024, 1024), "c", {"kernel": "regblock", "pack_b": "", "splits": 1}),
    ],
)
def test_cpu_planner_choices(queue, shape, layout, expect):
    from polymm.kernels import planner
    from polymm_opencl import device_info

    if not device_info(queue.device).is_cpu:
        pytest.skip("the CPU planner")
    M, K, N = shape
    a_strides = {"c": (M * K, K, 1), "f": (M * K, 1, M), "t": (M * K, 1, M)}[layout]
    b_strides = {"c": (K * N, N, 1), "f": (K * N, 1, K), "t": (K * N, 1, K)}[layout]
    choice = planner.choose(device_info(queue.device), "auto", np.float32, M, N, K, 1, a_strides, b_strides)
    assert choice.reason
    for field, wanted in expect.items():
        value = getattr(choice, field)
        assert wanted(value) if callable(wanted) else value == wanted, (field, choice)


def test_batched_small_matrices_share_work_groups(queue):
    from polymm.kernels import planner
    from polymm_opencl import device_info

    if not device_info(queue.device).is_cpu:
        pytest.skip("the CPU planner")
    choice = planner.choose(device_info(queue.device), "auto", np.float32, 8, 8, 8, 4096)
    assert choice.kernel == "regblock" and choice.params.bpg > 1


def test_split_k_is_deterministic_and_right(queue):
    import polymm

    rng = np.random.default_rng(3)
    x = cl_array.to_device(queue, rng.standard_normal((9, 20011)).astype(np.float32))
    y = cl_array.to_device(queue, rng.standard_normal((20011, 7)).astype(np.float32))
    first = polymm.matmul(x, y, backend="opencl").get()
    backend = polymm.get_backend("opencl")
    if backend.last_plan.splits == 1:
        pytest.skip("this device does not split K here")
    for _ in range(3):
        np.testing.assert_array_equal(polymm.matmul(x, y, backend="opencl").get(), first)
    assert_matches(first, x.get(), y.get())


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_realify_makes_a_complex_product_real(queue, dtype):
    """``realify`` writes complex B (strided, a batch of two) as 2K x 2N reals; A seen as M x 2K
    reals times that is C seen as M x 2N reals: the complex product."""
    from polymm.kernels import abi

    real = np.dtype(dtype).char.lower()
    if real == "d" and "cl_khr_fp64" not in queue.device.extensions:
        pytest.skip(f"{queue.device.name} has no fp64")
    rng = np.random.default_rng(11)
    K, N, M = 37, 21, 5
    a = random_array(rng, (2, M, K), dtype)
    b = random_array(rng, (2, N, K), dtype).transpose(0, 2, 1)  # strided: K is the unit axis
    src = cl_array.to_device(queue, np.ascontiguousarray(b.transpose(0, 2, 1)).view(real))
    dst = cl_array.to_device(queue, np.full((2, 2 * K, 2 * N), np.nan, real))  # poisoned
    params = KernelParams(ts=4)
    program = pyopencl.Program(queue.context, render("opencl", "realify", real, params)).build()
    kernel = pyopencl.Kernel(program, kernel_name("realify"))
    kernel.set_scalar_arg_dtypes(abi.scalar_types("realify"))
    args = abi.arguments("realify", K=K, N=N, s_off=0, s_sb=2 * N * K, s_sk=2, s_sn=2 * K, d_off=0)
    pos = abi.buffer_positions("realify")
    args[pos["src"]], args[pos["dst"]] = src.data, dst.data
    glob, local = launch_geometry("realify", params, K, N, 2)
    kernel(queue, glob, local, *args)
    b2 = dst.get()
    np.testing.assert_array_equal(b2[:, 0::2, 0::2], b.real)
    np.testing.assert_array_equal(b2[:, 0::2, 1::2], b.imag)
    np.testing.assert_array_equal(b2[:, 1::2, 0::2], -b.imag)
    np.testing.assert_array_equal(b2[:, 1::2, 1::2], b.real)
    got = (np.ascontiguousarray(a).view(real).astype(np.float64) @ b2.astype(np.float64)).view(np.complex128)
    assert_matches(got.astype(dtype), a, b)


@pytest.mark.parametrize("shape", ["cpu", "gpu", "gpu-mr5"])
@pytest.mark.parametrize("layout", ["rows", "transposed", "step"])
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "complex128"])
def test_pack_copies_a_view_padded_with_zeros(queue, shape, layout, dtype):
    """``pack`` in either shape of work (a tile per work-item on CPUs, a column of MR rows on
    GPUs, rendered here for this device all the same) copies a strided batch of views into
    padded rows: every element in place, zeros in the padding, nothing past the padding."""
    from polymm.kernels import abi, pack_params

    rng = np.random.default_rng(12)
    R, NC, RP, LD, batch = 37, 21, 40, 24, 2
    base = random_array(rng, (batch, 2 * NC, 2 * R), dtype)
    view = {  # (batch, R, NC) views into one buffer
        "rows": base[:, 3 : 3 + R, 5 : 5 + NC],
        "transposed": base[:, :NC, :R].transpose(0, 2, 1),
        "step": base[:, 1 : 1 + 2 * NC : 2, 1 : 1 + 2 * R : 2].transpose(0, 2, 1),
    }[layout]
    item = base.itemsize
    s_sb, s_sr, s_sc = (st // item for st in view.strides)
    s_off = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    params = pack_params(shape == "cpu", RP) if shape != "gpu-mr5" else KernelParams(ts=1, mr=5)
    src = cl_array.to_device(queue, base.reshape(-1).view(np.uint8))  # raw bytes: the kernel moves words
    dst = cl_array.to_device(queue, np.full((batch * RP * LD + 1) * item, 0x5A, np.uint8))  # poisoned
    program = pyopencl.Program(queue.context, render("opencl", "pack", dtype, params)).build()
    kernel = pyopencl.Kernel(program, kernel_name("pack"))
    kernel.set_scalar_arg_dtypes(abi.scalar_types("pack"))
    args = abi.arguments("pack", R=R, NC=NC, RP=RP, LD=LD, s_off=s_off, s_sb=s_sb, s_sr=s_sr, s_sc=s_sc, d_off=0)
    pos = abi.buffer_positions("pack")
    args[pos["src"]], args[pos["dst"]] = src.data, dst.data
    glob, local = launch_geometry("pack", params, RP, LD, batch)
    kernel(queue, glob, local, *args)
    got = dst.get()
    expected = np.zeros((batch, RP, LD), dtype)
    expected[:, :R, :NC] = view
    assert got[: expected.nbytes].tobytes() == expected.tobytes()  # bit for bit, zeros in the padding
    assert (got[expected.nbytes :] == 0x5A).all()  # nothing written past the padding


def test_repeated_products_reuse_their_plan(queue):
    import polymm

    backend = polymm.get_backend("opencl")
    a = cl_array.to_device(queue, np.ones((16, 16), np.float32))
    polymm.matmul(a, a)
    plans = dict(backend._plans)
    for _ in range(3):
        c = polymm.matmul(a, a)
    assert backend._plans == plans
    np.testing.assert_array_equal(c.get(), np.full((16, 16), 16, np.float32))


@pytest.mark.parametrize("view", ["transposed", "fortran", "negative", "step"])
def test_device_views_are_packed_not_slow(queue, view):
    import polymm

    rng = np.random.default_rng(5)
    x = rng.standard_normal((96, 192)).astype(np.float32)
    a, b = {
        "transposed": (x[:, :96].T, x[:, 96:].T),
        "fortran": (np.asfortranarray(x[:, :96]), np.asfortranarray(x[:, 96:])),
        "negative": (x[::-1, :96], x[::-1, 96:]),
        "step": (x[:, ::2], x[:, ::2].T),
    }[view]
    backend = polymm.get_backend("opencl")
    c = polymm.matmul(backend.from_numpy(a), backend.from_numpy(b))
    assert_matches(c.get(), a, b)
    from polymm_opencl import device_info

    if device_info(queue.device).is_cpu:
        assert backend.last_choice[2]["vec_b"]  # the vector path, after packing where needed


def test_image_kernel_refusals_name_device_dtype_and_limit(queue):
    import polymm
    from polymm.backend import SizeLimitError

    if not queue.device.image_support:
        pytest.skip(f"{queue.device.name} has no image support")
    name = queue.device.name.strip()
    with pytest.raises(TypeError, match=f"float64.*{re.escape(name)}"):
        polymm.matmul(np.ones((3, 3)), np.ones((3, 3)), backend="opencl", algorithm="image")
    wide = queue.device.image2d_max_width + 1
    with pytest.raises(SizeLimitError, match=rf"{wide:d} x 2 image of float32.*{re.escape(name)}.*{wide - 1:d} x"):
        polymm.matmul(
            np.ones((2, wide), np.float32), np.ones((wide, 2), np.float32), backend="opencl", algorithm="image"
        )
    info = {i.name: i for i in polymm.backends()}["opencl"]
    assert "image" in info.algorithms
    assert "float32" in info.algorithm_dtypes["image"] and "float64" not in info.algorithm_dtypes["image"]


def test_image_kernel_serves_nothing_without_image_support(monkeypatch):
    import polymm
    import polymm_opencl
    from polymm_opencl import image

    device = polymm_opencl.default_queue().device
    monkeypatch.setattr(image, "_formats", {})

    class NoImages:
        image_support = False

        def __getattr__(self, name):
            return getattr(device, name)

    monkeypatch.setattr(
        polymm_opencl.backend, "default_queue", lambda: type("Q", (), {"context": device, "device": NoImages()})
    )
    backend = polymm.get_backend("opencl")
    assert backend.algorithm_dtypes() == {"image": ()}


@pytest.mark.parametrize("dtype", ["float32", "complex128", "int8"])
@pytest.mark.parametrize(
    "shape, strides, whole",
    [
        ((4, 3, 5, 16), (0, 80, 16, 1), (3, 5, 16)),  # a broadcast batch, rows of 16: a row per work-item on a CPU
        ((3, 5, 16), (160, 32, 2), (3, 5, 32)),  # last axis strided: an element per work-item
        ((2, 3, 16), (64, 16, 1), (2, 4, 16)),  # rows of a larger array
        ((3, 4, 7), (28, 7, 1), (3, 4, 7)),  # rows too short to copy a row per work-item
    ],
)
def test_gather_and_scatter_keep_every_element(queue, dtype, shape, strides, whole):
    """The device copies between a strided view and a dense array (broadcast batches; ``out=`` a
    view), by rows of a contiguous last axis on a CPU device, by elements elsewhere."""
    from polymm_opencl.arrays import OpenCLKind

    kind = OpenCLKind()
    rng = np.random.default_rng(3)
    base = random_array(rng, whole, dtype)
    view = np.lib.stride_tricks.as_strided(base, shape, [s * base.itemsize for s in strides])
    gathered = kind.broadcast_copy(cl_array.to_device(queue, base), shape, strides)
    np.testing.assert_array_equal(gathered.get(), view)
    if 0 in strides:
        return  # a broadcast view is read, never written
    dense = random_array(rng, shape, dtype)
    target = cl_array.to_device(queue, base)
    kind._strided_copy("polymm_scatter", cl_array.to_device(queue, dense), target, shape, strides)
    expected = base.copy()
    np.lib.stride_tricks.as_strided(expected, shape, [s * base.itemsize for s in strides])[...] = dense
    np.testing.assert_array_equal(target.get(), expected)


@pytest.mark.parametrize(
    "case",
    [
        ((1, 256, 512, 256), "contiguous"),
        ((1, 255, 516, 258), "contiguous"),  # M odd: clamped rows
        ((1, 64, 64, 8192), "contiguous"),  # deep K: slices of K, summed in order
        ((2, 256, 512, 256), "contiguous"),
        ((1, 256, 512, 256), "a-transposed"),  # A packed K-contiguous first
    ],
    ids=lambda c: f"{'x'.join(map(str, c[0]))}-{c[1]}",
)
@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "realified"])
def test_complex_b_is_read_as_reals_in_place_by_the_gpu_tiles(queue, case, in_place, monkeypatch):
    """complex64 planned as for an NVIDIA GPU (this OpenCL device standing in for one): one float32
    product on the GPU tiles that reads the complex B as its real form in place, no realify
    launch (``realify.in_place``; else B realified into scratch first), and NumPy's answer."""
    import dataclasses

    import polymm
    from polymm.arrays import as_operand
    from polymm.kernels import devices
    from polymm_opencl.plans import make_plan, run
    from polymm_opencl.queues import _QueueFacts

    monkeypatch.setitem(devices.entry("NVIDIA GPU", "realify", "in_place"), "value", in_place)
    (batch, M, N, K), layout = case
    facts = _QueueFacts(queue)
    gpu = {"kind": "gpu", "vendor": "NVIDIA", "compute_units": 132, "key": facts.info.key + "|as an NVIDIA GPU"}
    facts.info = dataclasses.replace(facts.info, **gpu)
    rng = np.random.default_rng(3)
    a = random_array(rng, (batch, M, K), np.complex64)
    if layout == "a-transposed":
        a = random_array(rng, (batch, K, M), np.complex64).transpose(0, 2, 1)
    b = random_array(rng, (batch, K, N), np.complex64)
    backend = polymm.get_backend("opencl")
    da, db = (as_operand(backend.from_numpy(x)) for x in (a, b))
    out = cl_array.empty(queue, (batch, M, N), np.complex64)
    out.fill(np.complex64(np.nan))
    plan = make_plan(backend._programs, facts, da, db, as_operand(out), "auto", None)
    kernels = [launch.kernel for launch in plan.plan.launches]
    reads = [bool(x.flags.get("real_b")) for x in plan.plan.launches if x.kernel == "regblock"]
    if in_place:
        assert "realify" not in kernels and "B read as reals in place" in plan.choice.reason, (kernels, plan.choice)
        assert kernels[0] == "pack" if layout == "a-transposed" else "pack" not in kernels
        assert reads == [True]
    else:  # B realified first, or the complex tiles where the cost model ranks them first
        assert reads == [False] and "B read as reals in place" not in plan.choice.reason
    run(facts, plan, da, db, as_operand(out))
    assert_matches(out.get(), a, b)
