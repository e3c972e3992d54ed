"""Every CUDA kernel this backend can launch compiles (nvcc, no GPU needed).

CI has no GPU but has ``nvcc``.  The kernels come from the shared planner:
it plans every shape of the conformance suite's path table (and a few large
ones) in C, transposed and odd layouts on a model H100, and every distinct
launch it makes -- kernel, parameters, fast-path flags -- is rendered for
CUDA and compiled, one translation unit per dtype (each variant in a
namespace of its own), through the front end and PTX generation.  The hot
float32 tile is also compiled fully to machine code to check that it does
not spill registers (a performance regression guard).  Skipped only when
``nvcc`` is absent.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from polymm.backend import CONTRACT_DTYPES, optional_dtypes
from polymm.kernels import IMAGE_DTYPES, abi, devices, kernel_name, planner, render
from polymm.kernels.params import DeviceInfo, table_params
from polymm.testing import assert_matches, random_array
from polymm.testing.test_paths import PATH_SHAPES
from polymm_cuda import planes

DTYPES = [d.name for d in CONTRACT_DTYPES]
H100 = DeviceInfo(
    name="NVIDIA H100 80GB HBM3",
    vendor="NVIDIA",
    kind="gpu",
    dialect="cuda",
    compute_units=132,
    max_work_group=1024,
    local_mem=48 * 1024,
    key="model",
    platform="CUDA",
    max_batch=65535,
)
#: (B, M, N, K) beyond the path table: large, odd, deep, strips.
LARGE = [(1, 4096, 4096, 4096), (1, 4095, 4097, 4099), (1, 256, 256, 65536), (1, 8192, 1, 8192), (4096, 64, 64, 64)]


def _nvcc():
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "bin", "nvcc").exists():
            return str(Path(root, "bin", "nvcc"))
    return None


NVCC = _nvcc()
ARCH = os.environ.get("POLYMM_CUDA_TEST_ARCH", "sm_90")


def _shapes():
    for _, s1, s2 in PATH_SHAPES:
        m = s1[-2] if len(s1) > 1 else 1
        k = s1[-1]
        n = s2[-1] if len(s2) > 1 else 1
        batch = max(s1[0] if len(s1) == 3 else 1, s2[0] if len(s2) == 3 else 1)
        yield batch, m, n, k
    yield from LARGE


def planned_variants(dtype: str) -> set:
    """Every distinct (kernel, params, flags, dtype) the planner launches for ``dtype`` on the model
    H100 (a launch's own dtype: a complex product realified launches real kernels after a complex
    pack)."""
    found = set()
    for algorithm in ("auto", "naive", "tiled"):
        for batch, m, n, k in _shapes():
            for a_strides, b_strides in (
                ((m * k, k, 1), (k * n, n, 1)),
                ((m * k, 1, m), (k * n, 1, k)),
            ):
                made = planner.plan(H100, dtype, (batch, m, n, k), (0, a_strides), (0, b_strides), 0, algorithm)
                for launch in made.launches:
                    own = np.dtype(launch.dtype if launch.dtype is not None else dtype).name
                    found.add((launch.kernel, launch.params, tuple(sorted(launch.flags.items())), own))
    return found


def _translation_unit(dtype: str) -> str:
    """All planned variants for ``dtype`` in one CUDA source: each in its own namespace,
    its entry point renamed and its ``#define``s undone after it."""
    parts = []
    for i, (kernel, params, flags, own) in enumerate(sorted(planned_variants(dtype), key=repr)):
        src = render("cuda", kernel, own, params, **dict(flags))
        name = kernel_name(kernel)
        src = re.sub(rf"\b{name}\b", f"{name}_v{i}", src)
        names = sorted(set(re.findall(r"^#define (\w+)", src, flags=re.M)))
        parts.append(f"namespace pm_v{i} {{\n{src}\n}}\n" + "".join(f"#undef {n}\n" for n in names))
    return "\n".join(parts)


def _compile(src: str, tag: str, workdir: str, extra=("--ptx", "-Xcicc", "-O0")):
    path = Path(workdir, f"{tag}.cu")
    path.write_text(src)
    out = Path(workdir, f"{tag}.out")
    cmd = [NVCC, "-std=c++17", f"-arch={ARCH}", *extra, "-o", str(out), "-x", "cu", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def test_planner_reaches_every_kernel():
    """The planned launches cover every product and helper kernel on a GPU (no nvcc needed)."""
    kernels = {kernel for kernel, _, _, _ in planned_variants("float32")}
    assert kernels == {"naive", "tiled", "regblock", "matvec", "vecmat", "pack", "sum-slices"}, kernels


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_compile(dtype):
    with tempfile.TemporaryDirectory() as tmp:
        rc, log = _compile(_translation_unit(dtype), f"all-{dtype}", tmp)
    assert rc == 0, f"nvcc failed for {dtype}:\n{log[-4000:]}"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_hot_path_does_not_spill():
    """The float32 tile "auto" runs on large aligned problems keeps all in registers."""
    params = table_params(H100, "float32")
    src = render("cuda", "regblock", "float32", params, vec_a=True, vec_b=True)
    with tempfile.TemporaryDirectory() as tmp:
        rc, log = _compile(src, "hot", tmp, ("-cubin", "-Xptxas", "-v"))
    assert rc == 0, log
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, f"{params} spills:\n{log}"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("arch", ["sm_80", ARCH])
@pytest.mark.parametrize(
    "source, va, vb, tiles",
    [
        ("tensorcore", 0, 0, 0),
        *(("dmma", va, vb, tiles) for va in (1, 2) for vb in (1, 2) for tiles in (1, 10**6)),
        ("transpose", 0, 0, 0),
    ],
)
def test_tensor_core_kernels_compile_without_spills(arch, source, va, vb, tiles):
    """Every tensor-core kernel (float16, bfloat16, int8, uint8 with the parameters ``"auto"`` uses;
    float64 on the FP64 tensor cores, with 16-byte and 8-byte copies and the MMA shapes, tiles and
    swapping of one wave of tiles and of many) builds to machine code for Ampere and Hopper with
    every accumulator in registers."""
    from polymm_cuda import sources, tensorcore

    if source == "tensorcore":
        options = tensorcore.mma_sync_params(H100).options()
        names = [tensorcore.kernel_name(d, lay) for d, lays in tensorcore.LAYOUTS.items() for lay in lays]
    elif source == "transpose":  # the copies before them
        options = ()
        names = [f"polymm_transpose_{size}" for size in (1, 2, 4, 8)]
    else:  # both copy widths of each operand, as the planner picks them for row-major operands
        shape = (1, 64 * 64, 64 * 64, 4096) if tiles > 1 else (1, 64, 64, 4096)  # 4096 tiles of 64 x 64, or one
        a_at = (0 if va == 2 else 1, (0, shape[3], 1))  # an odd element offset: one element per copy
        b_at = (0 if vb == 2 else 1, (0, shape[2], 1))
        device = dataclasses.replace(H100, cc=int(arch[3:]))
        options = tensorcore.dmma_launch("polymm_dmma_ak_bn", device, shape, a_at, b_at)["options"]
        assert f"-DDM_VA={va}" in options and f"-DDM_VB={vb}" in options, options
        names = [f"polymm_dmma_{a}_{b}" for a in ("ak", "am") for b in ("bn", "bk")]
        if "-DDM_MMA=884" not in options:  # complex128 on Hopper's MMA shapes, B realified as it is read
            names += ["polymm_dmmaz_ak_bn", "polymm_dmmaz_ak_bk"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "tc.cu")
        path.write_text(sources.source(source))
        cubin = str(Path(tmp, "tc.cubin"))
        cmd = [NVCC, "-std=c++17", f"-arch={arch}", "-cubin", *options, "-Xptxas", "-v", "-o", cubin, str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    for name in names:
        assert name in log, f"{name} not built:\n{log}"
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, log


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("n", [1024, 4096])
def test_complex128_dmma_kernels_compile_without_spills(n):
    """The complex128 FP64 tensor-core kernels as the planner launches them on Hopper: in the wide
    unswapped tiles (a 1024 square) and in 64 x 64 tiles swapped (4096), every accumulator in
    registers."""
    from polymm_cuda import sources, tensorcore

    row = (0, (0, n, 1))
    hopper = dataclasses.replace(H100, cc=90)
    options = tensorcore.dmma_launch("polymm_dmmaz_ak_bn", hopper, (1, n, n, n), row, row)["options"]
    assert ("-DDM_SWAP=0" in options) == (n == 1024), options
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "dmma.cu")
        path.write_text(sources.source("dmma"))
        cubin = str(Path(tmp, "dmma.cubin"))
        cmd = [NVCC, "-std=c++17", f"-arch={ARCH}", "-cubin", *options, "-Xptxas", "-v", "-o", cubin, str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "polymm_dmmaz_ak_bn" in log and "polymm_dmmaz_ak_bk" in log, log
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, log


def _compile_wgmma(bn: int, *extra: str, bm: int = 128) -> str:
    """nvcc's report (``-Xptxas -v``) on the wgmma module of ``bm`` x ``bn`` tiles, built with ``extra`` defines."""
    from polymm_cuda import wgmma
    from polymm_cuda.backend import _external_source

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "wg.cu")
        path.write_text(_external_source(f"wgmma-{bn}"))
        cubin = str(Path(tmp, "wg.cubin"))
        defines = [o for o in wgmma.options(bn, wgmma.stages_for(H100, bn, bm), bm) if o.startswith("-D")]
        gencode = "-gencode=arch=compute_90a,code=sm_90a"
        cmd = [NVCC, "-std=c++17", gencode, "-cubin", *defines, *extra, "-Xptxas", "-v", "-o", cubin, str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    return log


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("bn", devices.settings_for(H100)("wgmma", "widths"))
def test_wgmma_kernels_compile_without_spills(bn):
    """Hopper's wgmma kernels (float16 and bfloat16, B N- or K-major; TF32 with one and with three
    products; int8 and uint8; TF32, int8 and uint8 with B N-major read through registers; each
    tile width, in its stages) assemble
    for sm_90a with every accumulator in registers, and with no MMA serialized by ptxas."""
    from polymm_cuda import wgmma

    log = _compile_wgmma(bn)
    for dtype in ("float16", "bfloat16"):
        for layout in ("kn", "nk"):
            assert wgmma.kernel_name(dtype, layout) in log, log
    for name in (*wgmma.TF32_PRODUCTS, "int8", "uint8"):
        assert wgmma.kernel_name(name, "nk") in log, log
    for name in ("tf32", "int8", "uint8"):  # B N-major through registers
        assert wgmma.kernel_name(name, "kn") in log, log
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert len(spills) == 11 and max(spills) == 0, log
    assert "serialized" not in log, log  # ptxas's "Potential Performance Loss" notes
    assert wgmma.smem_bytes(bn, wgmma.stages_for(H100, bn)) <= 227 * 1024  # what one block may have on sm_90


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("bn", devices.settings_for(H100)("wgmma", "widths"))
def test_64_row_wgmma_kernels_compile_without_spills(bn):
    """The 64-row tiles (``-DWG_BM=64``: a ring and tiles of its own per consumer warp group) of
    every kernel that reads B from shared memory assemble for sm_90a with every accumulator in
    registers, no MMA serialized, in twice the stages where they fit; the swapped forms, whose
    consumers split a tile's columns, are not built."""
    from polymm_cuda import wgmma

    log = _compile_wgmma(bn, bm=64)
    for dtype in ("float16", "bfloat16"):
        for layout in ("kn", "nk"):
            assert wgmma.kernel_name(dtype, layout) in log, log
    assert all(wgmma.kernel_name(name, "nk") in log for name in (*wgmma.TF32_PRODUCTS, "int8", "uint8")), log
    assert not any(wgmma.kernel_name(name, "kn") in log for name in ("tf32", "int8", "uint8")), log
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert len(spills) == 8 and max(spills) == 0, log
    assert "serialized" not in log, log
    stages = wgmma.stages_for(H100, bn, 64)
    assert (
        stages % 2 == 0 and stages >= wgmma.stages_for(H100, bn) and wgmma.smem_bytes(bn, stages, 64) <= wgmma.MOST_SMEM
    )


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("bn", devices.settings_for(H100)("wgmma", "widths"))
def test_byte_plane_wgmma_kernels_compile_without_spills(bn):
    """The byte-plane products by Horner's rule (``-DWG_PLANES=1``: 16- and 32-bit results, their
    module holding only them) assemble for sm_90a, every accumulator in registers, no MMA serialized."""
    log = _compile_wgmma(bn, "-DWG_PLANES=1")
    assert "polymm_wgmma_planes16_nk" in log and "polymm_wgmma_planes32_nk" in log, log
    assert "polymm_wgmma_float16_kn" not in log, log
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert len(spills) == 2 and max(spills) == 0, log
    assert "serialized" not in log, log


def test_products_of_at_most_64_rows_plan_64_row_wgmma_tiles():
    """A batch of 64 x 64 float16 products on Hopper plans tiles of 64 rows (``-DWG_BM=64``: each
    consumer warp group computes tiles of its own, from a ring of its own, twice the stages), A's
    map in boxes of 64 rows, and ``polymm explain``'s reason says so; 65 rows, a deep product cut
    into runs of K, and the swapped 8-bit form keep 128."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)

    hopper = dataclasses.replace(H100, cc=90)

    def plan(dtype, bt, m, n, k, b_t=False):
        a = (m * k, k, 1)
        b = (k * n, 1, k) if b_t else (k * n, n, 1)
        return planner.plan(hopper, dtype, (bt, m, n, k), (0, a), (0, b)).choice

    small = plan("float16", 8192, 64, 64, 64)
    assert small.kernel == "polymm_wgmma_float16_kn" and "64-row tiles, one per consumer warp group" in small.reason
    options = small.external["options"]
    assert "-DWG_BM=64" in options and "-DWG_STAGES=12" in options, options  # 6 for 64-wide tiles, per ring
    assert small.external["tma"][0][1][2] == (64, 64, 1) and small.external["smem"] <= 227 * 1024
    assert "-DWG_BM=64" in plan("int8", 8192, 40, 64, 128, b_t=True).external["options"]
    taller = plan("float16", 8192, 65, 64, 64)
    assert "-DWG_BM=64" not in taller.external["options"] and taller.external["tma"][0][1][2] == (64, 128, 1)
    swapped = plan("int8", 8192, 64, 64, 128)  # B N-major: tiles of C^T, their rows along N
    assert swapped.kernel == "polymm_wgmma_int8_kn" and "-DWG_BM=64" not in swapped.external["options"]
    from polymm_cuda import wgmma

    deep = (1, 64, 64, 65536)  # cut into runs of K (their partial sums in 128-row tiles)
    assert wgmma.runs(deep, hopper) > 1 and wgmma.tile_rows(deep, hopper, 64) == 128
    assert wgmma.tile_rows((64, 64, 4096, 4096), hopper, 256) == 128  # two stages a ring: too few


def test_wgmma_is_planned_on_hopper_only():
    """float16 on compute capability 9.0 plans the wgmma kernel (tensor maps described for the
    backend to encode); 8.0 plans mma.sync; a misaligned row stride is copied first (16-byte rows,
    the map over the copy)."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)

    strides = (0, (512 * 512, 512, 1))
    made = planner.plan(dataclasses.replace(H100, cc=90), "float16", (1, 512, 512, 512), strides, strides)
    assert made.choice.kernel == "polymm_wgmma_float16_kn" and "wgmma" in made.choice.reason
    (a_map, b_map) = made.choice.external["tma"]  # (buffer slot, (dims, byte strides, box, element size))
    assert a_map == (0, ((512, 512, 1), (1024, 512 * 1024), (64, 128, 1), 2))
    assert b_map == (1, ((512, 512, 1), (1024, 512 * 1024), (64, 64, 1), 2))
    assert made.choice.external["source"] == "wgmma-64"  # 8 tiles of 256, 16 of 128 or 32 of 64 on 132 SMs
    big = (0, (4096 * 4096, 4096, 1))
    made = planner.plan(dataclasses.replace(H100, cc=90), "float16", (1, 4096, 4096, 4096), big, big)
    assert made.choice.external["source"] == "wgmma-256" and made.launches[0].global_size[0] == 132 * 384
    huge = (0, (8192 * 8192, 8192, 1))  # 64-wide tiles would cut the busiest SM's columns by 2% only
    made = planner.plan(dataclasses.replace(H100, cc=90), "float16", (1, 8192, 8192, 8192), huge, huge)
    assert made.choice.external["source"] == "wgmma-256"
    square = (0, (1024 * 1024, 1024, 1))  # at 512, 8 tiles of mma.sync on 132 SMs: the SIMT tiles rank first
    ampere = planner.plan(dataclasses.replace(H100, cc=80), "float16", (1, 1024, 1024, 1024), square, square)
    assert ampere.choice.kernel.startswith("polymm_tc_float16")
    odd = (0, (520 * 516, 516, 1))  # 1032-byte rows: not a multiple of 16 bytes
    made = planner.plan(dataclasses.replace(H100, cc=90), "float16", (1, 520, 512, 512), odd, strides)
    assert made.choice.kernel == "polymm_wgmma_float16_kn" and made.choice.reason.endswith("A copied K-major first")
    (copy,) = made.choice.external["before"]
    assert copy["kernel"] == "polymm_restride_2" and copy["values"]["s_r"] == 516 and copy["values"]["ld"] == 512
    assert made.choice.external["tma"][0] == (3, ((512, 520, 1), (1024, 520 * 1024), (64, 128, 1), 2))
    bt_int8 = (0, (512 * 512, 1, 512))  # B^T row-major: the 8-bit wgmma reads K-major B only
    made = planner.plan(dataclasses.replace(H100, cc=90), "int8", (1, 512, 512, 512), strides, bt_int8)
    assert made.choice.kernel == "polymm_wgmma_int8_nk"
    assert made.choice.external["tma"][1] == (1, ((512, 512, 1), (512, 512 * 512), (128, 64, 1), 1))
    made = planner.plan(dataclasses.replace(H100, cc=90), "int8", (1, 512, 512, 512), strides, strides)
    # B N-major: read as stored through registers, in tiles of C^T (128 columns of C by 64 rows)
    assert made.choice.kernel == "polymm_wgmma_int8_kn" and [x.kernel for x in made.launches] == [made.choice.kernel]
    a_map, b_map = made.choice.external["tma"]
    assert a_map == (0, ((512, 512, 1), (512, 512 * 512), (128, 64, 1), 1))  # A's rows: wgmma's B operand
    assert b_map == (1, ((512, 512, 1), (512, 512 * 512), (128, 128, 1), 1))  # B as stored
    assert made.scratch == [] and made.choice.external["grid"] == (32, 1, 1)  # 4 x 8 tiles
    # rows of 520 bytes, which the copy engine cannot address: the plan first copies B K-major into
    # scratch (slot 3), which the product reads
    unaligned = (0, (512 * 520, 520, 1))
    made = planner.plan(dataclasses.replace(H100, cc=90), "int8", (1, 512, 512, 512), strides, unaligned)
    assert made.choice.kernel == "polymm_wgmma_int8_nk"
    assert [x.kernel for x in made.launches] == ["polymm_transpose_1", "polymm_wgmma_int8_nk"]
    assert made.launches[0].buffers == {0: 1, 4: 3} and made.scratch == [512 * 512]
    assert made.choice.external["tma"][1] == (3, ((512, 512, 1), (512, 512 * 512), (128, 64, 1), 1))
    repeated = (0, (0, 0, 1))  # one row of A seen M times (a broadcast view): no tensor map has stride 0
    made = planner.plan(dataclasses.replace(H100, cc=90), "float16", (1, 512, 512, 512), repeated, strides)
    assert [x.kernel for x in made.launches] == ["polymm_restride_16", "polymm_wgmma_float16_kn"]
    assert made.launches[0].args[3] == 0  # the copy reads the one row M times (s_r = 0), in 16-byte words


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize(
    "source, kernels",
    [
        ("tf32_split", ["polymm_tf32_split", "polymm_tf32_fixup"]),
        ("byte_planes", [f"polymm_{k}_{n}" for k in ("byte_planes", "planes_sum") for n in (2, 4, 8)]),
    ],
)
def test_helper_kernels_compile_without_spills(source, kernels):
    """The kernels around the wgmma products (the TF32 modes' split and repair, the byte planes'
    split and sum) assemble for sm_80 (what runs them is any GPU that runs wgmma), in registers."""
    from polymm_cuda.backend import _external_source

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "split.cu")
        path.write_text(_external_source(source))
        cmd = [NVCC, "-std=c++17", "-arch=sm_80", "-cubin", "-Xptxas", "-v", "-o", str(Path(tmp, "s.cubin")), str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert all(f"Function properties for {k}" in log for k in kernels), log
    assert "bytes spill stores" in log and not re.search(r"[1-9]\d* bytes spill stores", log), log


def test_tf32_modes_plan_split_wgmma_and_repair():
    """float32 in "tf32x3" on Hopper: both operands split (slots 3 and 4), three products, the
    repair after; "tf32" reads K-major operands in place, B as stored through registers (C^T =
    B^T A^T), and splits only what neither reads (A transposed, B strided along N); "default",
    non-Hopper GPUs and products too small to pay keep float32 on the SIMT kernels."""
    import dataclasses

    import polymm
    import polymm_cuda.backend  # noqa: F401  (registers the families)

    hopper = dataclasses.replace(H100, cc=90)
    n = 2048
    shape = (1, n, n, n)
    row = (0, (n * n, n, 1))  # C-contiguous n x n
    col = (0, (n * n, 1, n))  # a transposed view: B K-major
    with polymm.use_precision("tf32x3"):
        made = planner.plan(hopper, "float32", shape, row, row)
        assert [x.kernel for x in made.launches] == [
            "polymm_tf32_split",
            "polymm_tf32_split",
            "polymm_wgmma_tf32x3_nk",
            "polymm_tf32_fixup",
        ]
        assert made.product.kernel == "polymm_wgmma_tf32x3_nk" and "tf32x3" in made.reason
        (slot_a, a_map), (slot_b, b_map) = made.choice.external["tma"]
        assert (slot_a, slot_b) == (3, 4) and a_map[0] == (n, n, 2) and a_map[3] == 4  # hi and lo parts
        assert made.scratch == [2 * n * n * 4] * 2 + [(n + n) * (n // 512) * 4]  # parts, then the flags
        ampere = planner.plan(dataclasses.replace(H100, cc=80), "float32", shape, row, row)
        assert "wgmma" not in ampere.choice.kernel
        small = (0, (1024 * 1024, 1024, 1))  # 1024^3: faster on the SIMT kernels, in float32
        assert "wgmma" not in planner.plan(hopper, "float32", (1, 1024, 1024, 1024), small, small).choice.kernel
    with polymm.use_precision("tf32"):
        made = planner.plan(hopper, "float32", shape, row, row)  # B as stored: C^T = B^T A^T
        assert [x.kernel for x in made.launches] == ["polymm_wgmma_tf32_kn"] and made.scratch == []
        (slot_a, a_map), (slot_b, b_map) = made.choice.external["tma"]
        assert (
            (slot_a, slot_b) == (0, 1)
            and a_map[2] == (32, 256, 1)
            and b_map[:3] == ((n, n, 1), (4 * n, 4 * n * n), (32, 32, 1))
        )
        assert "B^T A^T" in made.reason
        made = planner.plan(hopper, "float32", shape, row, col)
        assert [x.kernel for x in made.launches] == ["polymm_wgmma_tf32_nk"] and made.scratch == []
        odd = n - 4  # A's rows 16 bytes off 128-byte lines: A copied, its rows padded to tf32.row_align
        packed = (0, (odd * odd, odd, 1))
        made = planner.plan(hopper, "float32", (1, odd, odd, odd), packed, packed)
        assert [x.kernel for x in made.launches] == ["polymm_tf32_split", "polymm_wgmma_tf32_kn"]
        assert made.scratch == [odd * n * 4] and "A copied" in made.reason, (made.scratch, made.reason)
        made = planner.plan(hopper, "float32", shape, col, row)  # A transposed: split; B in place
        assert [x.kernel for x in made.launches] == ["polymm_tf32_split", "polymm_wgmma_tf32_kn"]
        assert [slot for slot, _ in made.choice.external["tma"]] == [3, 1]
        stepped = (0, (2 * n * n, 2 * n, 2))  # every other column of a 2n-wide B: neither reads it
        made = planner.plan(hopper, "float32", shape, row, stepped)
        assert [x.kernel for x in made.launches] == ["polymm_tf32_split", "polymm_wgmma_tf32_nk"]
        assert [slot for slot, _ in made.choice.external["tma"]] == [0, 3]
    made = planner.plan(hopper, "float32", shape, row, row)
    assert "wgmma" not in made.choice.kernel  # the default precision: float32 in float32


def test_tensor_cores_are_a_cuda_entry_of_the_planner():
    """The tensor-core kernels plug into the shared planner as CUDA-only families: float16 on a
    compute capability 8.0 device plans one external mma.sync launch; float32 and OpenCL devices do not."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)

    h100 = dataclasses.replace(H100, cc=80)
    strides = (0, (1024 * 1024, 1024, 1))
    shape = (1, 1024, 1024, 1024)
    made = planner.plan(h100, "float16", shape, strides, strides)
    (launch,) = made.launches
    assert launch.kernel.startswith("polymm_tc_float16") and launch.external["source"] == "tensorcore"
    assert launch.global_size[2] == 1 and "tensor cores" in made.choice.reason
    assert [c.family for c in made.ranking.candidates] == ["mma-sync", "tiles"]
    assert planner.plan(h100, "float32", shape, strides, strides).choice.external is None
    opencl = dataclasses.replace(h100, dialect="opencl")
    assert planner.plan(opencl, "float16", shape, strides, strides).choice.external is None


def test_dmma_is_planned_by_the_cuda_entry(monkeypatch):
    """float64 reaches the FP64 tensor cores through its kernel family, once they are on for
    "auto"; a batch beyond CUDA's grid is split into launches it can hold."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)

    h100 = dataclasses.replace(H100, cc=90)
    strides = (0, (256 * 256, 256, 1))
    monkeypatch.delenv("POLYMM_CUDA_DMMA", raising=False)  # the database decides
    monkeypatch.setitem(devices.entry("NVIDIA GPU", "dmma", "in_auto"), "value", False)
    assert planner.plan(h100, "float64", (1, 256, 256, 256), strides, strides).choice.external is None
    monkeypatch.setitem(devices.entry("NVIDIA GPU", "dmma", "in_auto"), "value", True)
    made = planner.plan(h100, "float64", (70000, 256, 256, 256), strides, strides)
    assert made.choice.kernel == "polymm_dmma_ak_bn" and made.choice.external["source"] == "dmma"
    assert [launch.global_size[2] for launch in made.launches] == [65535, 70000 - 65535]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_image_and_optional_dtype_kernels_compile():
    """The image kernel (texture fetches) for the dtypes images hold, and the shared kernels for the
    optional dtypes (bfloat16 with ml_dtypes) as the planner launches them."""
    jobs = [(f"image-{d.name}", render("cuda", "image", d)) for d in IMAGE_DTYPES]
    for d in optional_dtypes():
        jobs += [(f"{d.name}-all", _translation_unit(d.name))]
    with tempfile.TemporaryDirectory() as tmp:
        failed = {tag: log for tag, src in jobs for rc, log in [_compile(src, tag, tmp)] if rc != 0}
    assert not failed, "nvcc failed:\n" + "\n".join(f"--- {t}\n{log[-3000:]}" for t, log in failed.items())


def test_deep_float64_is_split_on_the_fp64_tensor_cores():
    """A deep float64 product on few tiles runs its K slices on the FP64 tensor cores as a batch
    into scratch (each slice 16-byte aligned, a multiple of 16 deep; the last one shorter), then
    the ordered sum: the planner's split-K, with an external kernel; so does a shallow one on a
    quarter of a wave of tiles or less."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)

    hopper = dataclasses.replace(H100, cc=90)
    m, n, k = 128, 128, 65536 + 40
    made = planner.plan(hopper, "float64", (1, m, n, k), (0, (m * k, k, 1)), (0, (k * n, n, 1)))
    splits = made.choice.splits
    assert made.choice.kernel == "polymm_dmma_ak_bn" and splits == 64, made.choice
    assert "64 slices of K" in made.choice.reason
    first, rest, total = made.launches
    depth = -(-k // splits // 16) * 16  # 1040: 63 whole slices and one of 520
    assert [x.kernel for x in made.launches] == ["polymm_dmma_ak_bn", "polymm_dmma_ak_bn", "sum-slices"]
    assert first.global_size[2] == k // depth == 63 and rest.global_size[2] == 1
    assert made.scratch == [64 * m * n * 8]
    names = [name for name, _ in abi._args("regblock")]
    arg = [dict(zip(names, x.args)) for x in (first, rest)]
    assert first.buffers[names.index("C")] == rest.buffers[names.index("C")] == 3  # the slices' sums
    assert arg[0]["K"] == depth and arg[0]["a_sb"] == depth and arg[0]["b_sb"] == depth * n
    assert arg[1]["K"] == k - 63 * depth and arg[1]["a_off"] == 63 * depth and arg[1]["b_off"] == 63 * depth * n
    assert arg[1]["c_off"] == 63 * m * n
    pos = abi.buffer_positions("sum-slices")
    assert total.buffers == {pos["W"]: 3, pos["C"]: 2}
    assert "-DDM_VA=2" in first.external["options"] and "-DDM_VB=2" in first.external["options"]
    # shallow products split where their tiles fill at most a quarter of a wave: 64 tiles of 512
    # cubed (K = 512: 4 slices of 128), not the 100 of 640 cubed nor the 256 of 1024 cubed
    for size, splits in ((512, 4), (640, 1), (1024, 1)):
        row = (0, (size * size, size, 1))
        shallow = planner.plan(hopper, "float64", (1, size, size, size), row, row)
        assert shallow.choice.kernel == "polymm_dmma_ak_bn" and shallow.choice.splits == splits, shallow.choice
        assert len(shallow.launches) == (1 if splits == 1 else 2)


def test_deep_complex128_fills_a_wave_of_wide_tiles():
    """A deep complex128 product on few tiles (one float64 product of 2M x 2K @ 2K x 2N reals, B
    realified as it is read) takes as many slices of K as fill one wave of the wide tiles, each
    at least twice ``dmma.slice_min`` deep; shallower slices keep the 64 x 64 tiles' count."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401

    hopper = dataclasses.replace(H100, cc=90)
    for m, splits, wide in ((256, 16, True), (128, 64, True), (64, 128, False)):
        k = 65536
        made = planner.plan(hopper, "complex128", (1, m, m, k), (0, (m * k, k, 1)), (0, (k * m, m, 1)))
        assert made.choice.splits == splits and f"{splits} slices of K" in made.reason, (m, made.reason)
        assert ("64 x 128 tiles" in made.reason) == wide, made.reason


def _matrices(a, b, v, z: int):
    """Batch entry ``z`` of a product launch's A (M x K) and B (K x N), read from the flat buffers
    ``a`` and ``b`` by the launch's arguments ``v`` (the products' ABI: offsets and strides)."""
    m, n, k = v["M"], v["N"], v["K"]
    ra = a[v["a_off"] + z * v["a_sb"] + np.arange(m)[:, None] * v["a_sm"] + np.arange(k) * v["a_sk"]]
    rb = b[v["b_off"] + z * v["b_sb"] + np.arange(k)[:, None] * v["b_sk"] + np.arange(n) * v["b_sn"]]
    return ra, rb


def _emulate(made, buffers) -> None:
    """Run a plan's launches in NumPy on flat arrays (slot -> array): the product kernels by their
    ABI (``C[c_off + b*M*N + m*N + n] = sum_k A[...] B[...]``, the batch along z), ``realify``
    and ``sum-slices`` by theirs.  Scratch slots must already be in ``buffers``."""
    for launch in made.launches:
        names = [name for name, _ in abi._args(launch.signature)]
        v = dict(zip(names, launch.args))
        slot = {names[pos]: s for pos, s in launch.buffers.items()}
        count = launch.global_size[2]
        if launch.kernel == "realify":
            src, dst = buffers[slot["src"]], buffers[slot["dst"]]
            k, n, b = np.ogrid[: v["K"], : v["N"], :count]
            at = v["s_off"] + b * v["s_sb"] + k * v["s_sk"] + n * v["s_sn"]
            x, y = src[at], src[at + 1]
            out = dst[v["d_off"] : v["d_off"] + count * 4 * v["K"] * v["N"]].reshape(count, 2 * v["K"], 2 * v["N"])
            for p, q, value in ((0, 0, x), (0, 1, y), (1, 0, -y), (1, 1, x)):
                out[:, p::2, q::2] = value.transpose(2, 0, 1)
        elif launch.kernel.startswith("polymm_byte_planes_"):
            x, p = buffers[slot["X"]], buffers[slot["P"]]
            nbytes = int(launch.kernel.rsplit("_", 1)[1])
            b, r, k = np.ogrid[:count, : v["R"], : v["KK"]]
            values = x[v["x_off"] + b * v["x_sb"] + r * v["x_sr"] + k * v["x_sk"]].view(f"u{nbytes}")
            rows = p[: count * v["R"] * v["ld"]].reshape(count, v["R"], v["ld"])
            rows[...] = 0  # the segments' tails and each shift's padding
            for at, pair in zip(planes.starts(nbytes, v["seg"])[0], planes.pairs(nbytes)):
                rows[:, :, at : at + v["KK"]] = (values >> np.uint64(8 * pair[v["side"]])) & 0xFF
        elif launch.kernel.startswith("polymm_planes_sum_"):
            w, c = buffers[slot["W"]].view(np.uint32), buffers[slot["C"]]
            nbytes = int(launch.kernel.rsplit("_", 1)[1])
            shifts = [sum(pair) for pair in planes.pairs(nbytes) for _ in range(v["per"])]
            runs = w[: len(shifts) * v["count"]].reshape(len(shifts), -1).astype(np.uint64)
            total = sum(run << np.uint64(8 * t) for run, t in zip(runs, shifts))
            c[v["c_off"] : v["c_off"] + v["count"]] = total.astype(f"u{nbytes}").view(c.dtype)
        elif "-DWG_PLANES=1" in (launch.external or {}).get("options", ()):  # Horner's rule over byte pairs
            a, b_, c = buffers[slot["A"]], buffers[slot["B"]], buffers[slot["C"]]
            m, n, k = v["M"], v["N"], v["K"]
            nbytes = int(launch.kernel.split("planes")[1].split("_")[0]) // 8
            seg = v["splits"]  # the bytes of K per byte pair; shift t's t + 1 pairs padded to whole slices
            for z in range(v["batch"]):
                ra, rb = _matrices(a, b_, v, z)
                acc = np.zeros((m, n), np.int64)
                first = 0
                for t in range(nbytes - 1, -1, -1):
                    last = first + -(-(t + 1) * seg // 128)  # as the kernel counts its slices
                    acc = (acc << 8) % 2**32  # Horner's step: C = 256 C + this shift's products
                    ks = slice(first * 128, min(k, last * 128))
                    acc = (acc + ra[:, ks].astype(np.int64) @ rb[ks].astype(np.int64)) % 2**32
                    first = last
                assert first * 128 == k, (first, k)  # the shifts fill the planes' rows
                c[v["c_off"] + z * m * n : v["c_off"] + (z + 1) * m * n] = acc.ravel().astype(c.dtype)
        elif "-DWG_SPLIT=1" in (launch.external or {}).get("options", ()):  # uint8 runs into int32 sums
            a, b_, w = buffers[slot["A"]], buffers[slot["B"]], buffers[slot["C"]].view(np.uint32)
            m, n, k, batch, splits = v["M"], v["N"], v["K"], v["batch"], v["splits"]
            kt_count = -(-k // 128)
            kt_run = -(-kt_count // splits)
            for z in range(batch):
                ra, rb = _matrices(a, b_, v, z)
                for run in range(splits):
                    ks = slice(run * kt_run * 128, min(k, (run + 1) * kt_run * 128))
                    sums = ra[:, ks].astype(np.int64) @ rb[ks].astype(np.int64)
                    at = (run * batch + z) * m * n
                    w[at : at + m * n] = (sums % 2**32).astype(np.uint32).ravel()
        elif launch.kernel == "sum-slices":
            w, c = buffers[slot["W"]], buffers[slot["C"]]
            c[v["c_off"] : v["c_off"] + v["count"]] = w[: v["S"] * v["count"]].reshape(v["S"], -1).sum(axis=0)
        else:
            a, b_, c = buffers[slot["A"]], buffers[slot["B"]], buffers[slot["C"]]
            m, n, k = v["M"], v["N"], v["K"]
            for z in range(count):
                ra, rb = _matrices(a, b_, v, z)
                c[v["c_off"] + z * m * n : v["c_off"] + (z + 1) * m * n] = (ra @ rb).ravel()


@pytest.mark.parametrize("dtype", ["int16", "uint32", "int64"])
@pytest.mark.parametrize("layout", ["c", "a-transposed", "b-transposed", "deep", "outer"])
def test_wide_integers_plan_byte_planes_that_add_up(dtype, layout, monkeypatch):
    """int16 to uint64 on Hopper: both operands split into byte planes side by side (slots 3 and
    4), then one uint8 wgmma product over them: by Horner's rule into C for 16- and 32-bit
    results; in runs (one per byte pair, or several where K is deep on few tiles; for 64-bit
    results no run deeper than ``_EXACT_DEPTH``, lowered here to reach it) and the shifted sum
    into C otherwise. Emulated launch by launch from their arguments (scratch poisoned first), the
    result is NumPy's wrapped product of full-range operands, bit for bit."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401

    monkeypatch.setattr(planes, "_EXACT_DEPTH", 256)
    monkeypatch.setenv("POLYMM_PREFER", "byte-planes")  # products this small rank the SIMT kernels first
    monkeypatch.setenv("POLYMM_CUDA_PLANES_MIN_WORK", "0")
    hopper = dataclasses.replace(H100, cc=90)
    nbytes = np.dtype(dtype).itemsize
    deep = (1, 130, 100, 5000) if nbytes <= 4 else (1, 160, 144, 1100)
    bt, m, n, k = deep if layout == "deep" else (1, 150, 130, 30) if layout == "outer" else (2, 150, 130, 200)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(17)
    a = rng.integers(info.min, info.max, (bt, m, k), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (bt, k, n), dtype=dtype, endpoint=True)
    if layout == "a-transposed":
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    if layout == "b-transposed":
        b = np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    strides = [tuple(s // a.itemsize for s in x.strides) for x in (a, b)]
    made = planner.plan(hopper, dtype, (bt, m, n, k), (0, strides[0]), (0, strides[1]))
    pairs = nbytes * (nbytes + 1) // 2
    by_horner = nbytes <= 4 and layout != "deep"
    assert ("-DWG_PLANES=1" in made.choice.external["options"]) == by_horner
    runs = 1 if by_horner else made.choice.external["values"]["splits"]
    if by_horner:
        product, summed = [f"polymm_wgmma_planes{8 * nbytes}_nk"], []
    else:
        product, summed = ["polymm_wgmma_uint8_nk"], [f"polymm_planes_sum_{nbytes}"]
    assert [x.kernel for x in made.launches] == [f"polymm_byte_planes_{nbytes}"] * 2 + product + summed
    assert f"{pairs} products of byte pairs" in made.reason
    assert ("Horner's rule" in made.reason) == by_horner and (runs == 1) == by_horner
    assert by_horner or (runs % pairs == 0 and (runs > pairs) == (layout == "deep")), (runs, made.reason)
    if layout == "outer":  # K = 30: by Horner's rule a slice of 128 per shift, not per pair; in runs, a slice per pair
        assert made.choice.external["depth"] == {2: 2, 4: 4, 8: 36}[nbytes] * 128, made.choice.external["depth"]
    flat = [np.lib.stride_tricks.as_strided(x, (x.size,), (x.itemsize,)) for x in (a, b)]  # each view's base
    buffers = {0: flat[0], 1: flat[1], 2: np.full(bt * m * n, 113, dtype)}
    buffers.update({3 + i: np.full(size, 0xAB, np.uint8) for i, size in enumerate(made.scratch)})
    _emulate(made, buffers)
    want = np.matmul(a.astype(np.uint64), b.astype(np.uint64)).astype(dtype)  # modulo 2^64, then NumPy's wrap
    np.testing.assert_array_equal(buffers[2].reshape(bt, m, n), want)


def test_byte_planes_take_products_from_their_crossover():
    """Byte planes serve a call from ``byte-planes.min_work`` multiply-adds (per call: a batch
    shares the planes' launches and copies) for its dtype, where the H200 crossover sweep put it:
    int16 from 384^3, int32 from 512^3, int64 from 768^3 (and a batch of 64 512^3 int64 products)."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401

    hopper = dataclasses.replace(H100, cc=90)

    def family(dtype, bt, n):
        row = (0, (n * n, n, 1))
        made = planner.plan(hopper, dtype, (bt, n, n, n), row, row)
        return "byte planes" in made.reason, made.ranking

    for dtype, below, above in (("int16", 256, 384), ("uint32", 384, 512), ("int64", 512, 768)):
        planes_below, ranking = family(dtype, 1, below)
        assert not planes_below and "byte-planes.min_work" in str(ranking), ranking
        assert family(dtype, 1, above)[0], dtype
    assert family("int64", 64, 512)[0]
    # a K whose segments, padded to whole runs, would need more than CUDA's 65535 blocks of 128
    # along the split kernel's grid: refused, whatever the work
    for k in (65535 * 128 + 1, 65535 * 128 - 5):  # the second is padded past the limit by its runs
        made = planner.plan(hopper, "int16", (1, 16, 16, k), (0, (16 * k, k, 1)), (0, (k * 16, 16, 1)))
        assert "byte planes" not in made.reason and "beyond the split kernel's grid" in str(made.ranking), k
    # planes too large for the scratch a product may take: 10 planes of two 40000^2 int32 operands, 32 GB
    big = (0, (40000 * 40000, 40000, 1))
    made = planner.plan(hopper, "int32", (1, 40000, 40000, 40000), big, big)
    assert "byte planes" not in made.reason and "byte-planes.scratch_bytes" in str(made.ranking)
    assert family("int32", 1, 8192)[0]  # 1.3 GB of planes


#: complex128 products run as one float64 product, (batch, M, N, K) and B's layout: either way of
#: realifying B (into scratch before Hopper, as it is read from Hopper on) takes each of them.
REALIFIED_CASES = [
    ((1, 512, 320, 256), "c"),
    ((3, 256, 256, 512), "broadcast"),
    ((2, 300, 260, 520), "k-major"),
    ((1, 48, 40, 20000), "c"),  # deep: K in slices
]


@pytest.mark.parametrize("shape, b_layout", REALIFIED_CASES)
def test_complex128_runs_as_one_float64_product_on_the_fp64_tensor_cores(shape, b_layout):
    """complex128 (A with a contiguous K axis) before Hopper, as one float64 product on the FP64
    tensor cores: B written by ``realify`` as 2K x 2N reals into the first scratch slot, A and C
    read as reals in place, the inner plan's own scratch (split-K slices) one slot up; the plan,
    run in NumPy by its argument lists, computes the complex product (poisoned outputs and scratch)."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)

    ampere = dataclasses.replace(H100, cc=80)
    bt, m, n, k = shape
    rng = np.random.default_rng(21)
    a = random_array(rng, (bt, m, k), "complex128")
    b = random_array(rng, (1 if b_layout == "broadcast" else bt, k, n), "complex128")
    b_flat = np.ascontiguousarray(b.transpose(0, 2, 1)) if b_layout == "k-major" else b
    sb = (k * n, 1, k) if b_layout == "k-major" else (k * n, n, 1)
    sb = (0, *sb[1:]) if b_layout == "broadcast" else sb
    made = planner.plan(ampere, "complex128", shape, (0, (m * k, k, 1)), (0, sb))
    assert made.dtype == np.float64 and made.choice.kernel == "polymm_dmma_ak_bn", made.choice
    assert made.reason.startswith("complex128 as one float64 product"), made.reason
    expand, product = made.launches[0], made.product
    pos = abi.buffer_positions("realify")
    assert expand.kernel == "realify" and expand.buffers == {pos["src"]: 1, pos["dst"]: 3}
    names = [name for name, _ in abi._args("regblock")]
    assert product.buffers == {
        names.index("A"): 0,
        names.index("B"): 3,
        names.index("C"): 2 if made.choice.splits == 1 else 4,
    }
    assert made.scratch[0] == (1 if b_layout == "broadcast" else bt) * 4 * k * n * 8
    if k == 20000:
        assert made.choice.splits > 1 and made.launches[-1].kernel == "sum-slices", made.choice
    buffers = {0: a.ravel().view(np.float64), 1: b_flat.ravel().view(np.float64)}
    buffers[2] = np.full(2 * bt * m * n, np.nan)
    buffers.update({3 + i: np.full(size // 8, np.nan) for i, size in enumerate(made.scratch)})
    _emulate(made, buffers)
    assert_matches(buffers[2].view(np.complex128).reshape(bt, m, n), a, b)


@pytest.mark.parametrize(
    "shape, b_layout",
    REALIFIED_CASES
    + [
        ((1, 64, 16384, 16384), "c"),  # B2 would exceed realify.most_bytes
        ((16, 64, 64, 64), "c"),  # small products (under realify.work) too: no scratch to pay for
        ((1, 256, 256, 256), "k-major"),
    ],
)
def test_complex128_reads_b_realified_on_hopper(shape, b_layout):
    """On Hopper, complex128 (A along K) runs as one float64 product without writing B2: the
    complex kernel (``polymm_dmmaz_*``, B along N or K) takes the complex ABI and reads B's
    realified blocks from B itself, so even a B whose B2 would exceed ``realify.most_bytes`` runs there,
    and products under ``realify.work`` (the planner's bar for writing B2 out) too;
    deep products in K slices (complex elements, 16 bytes apart) summed in order.  The plan, run in
    NumPy by its argument lists, computes the complex product (poisoned outputs and scratch)."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)
    from polymm_cuda import tensorcore

    hopper = dataclasses.replace(H100, cc=90)
    bt, m, n, k = shape
    rng = np.random.default_rng(23)
    sb = (k * n, 1, k) if b_layout == "k-major" else (k * n, n, 1)
    sb = (0, *sb[1:]) if b_layout == "broadcast" else sb
    made = planner.plan(hopper, "complex128", shape, (0, (m * k, k, 1)), (0, sb))
    layout = "bk" if b_layout == "k-major" else "bn"
    assert made.dtype == np.complex128 and made.choice.kernel == f"polymm_dmmaz_ak_{layout}", made.choice
    assert "B realified as it is read" in made.reason, made.reason
    assert all(x.kernel != "realify" for x in made.launches)
    ext = made.choice.external
    wide = tensorcore.dmma_wide(made.choice.kernel, hopper, (bt * made.choice.splits, m, n, k))
    bn, stages, _ = tensorcore.dmma_tile(hopper, wide)  # B along N in wide tiles where they fill their waves
    assert wide == (shape == (1, 64, 16384, 16384)), (shape, wide)
    assert ext["smem"] == tensorcore.dmma_smem(made.choice.kernel, bn, stages) and ext["k_step"] == 8
    assert ext["grid"][0] == -(-m // 64) * -(-2 * n // bn)
    assert ("-DDM_SWAP=0" in ext["options"]) == wide, ext["options"]
    if n == 16384:  # planned, not run
        assert made.scratch == []
        return
    if k == 20000 or shape == (1, 256, 256, 256):  # deep; 32 tiles in reals (4 slices of 128 complex)
        assert made.choice.splits > 1 and made.launches[-1].kernel == "sum-slices", made.choice
    a = random_array(rng, (bt, m, k), "complex128")
    b = random_array(rng, (1 if b_layout == "broadcast" else bt, k, n), "complex128")
    b_flat = np.ascontiguousarray(b.transpose(0, 2, 1)) if b_layout == "k-major" else b
    buffers = {0: a.ravel(), 1: b_flat.ravel(), 2: np.full(bt * m * n, np.nan + 1j * np.nan)}
    buffers.update({3 + i: np.full(size // 16, np.nan + 1j * np.nan) for i, size in enumerate(made.scratch)})
    _emulate(made, buffers)
    assert_matches(buffers[2].reshape(bt, m, n), a, b)


def test_complex128_stays_complex_where_realifying_gains_nothing():
    """Products of few tiles, few columns, B too large to realify in scratch before Hopper, and
    devices without the entry keep the complex kernels; A without a contiguous K axis is packed
    first."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401

    hopper = dataclasses.replace(H100, cc=90)
    for shape, sa in (
        ((1, 128, 128, 128), (128 * 128, 128, 1)),  # too few tiles for the float64 kernel
        ((1, 2048, 4, 2048), (1 << 22, 2048, 1)),  # few columns: matvec
    ):
        bt, m, n, k = shape
        made = planner.plan(hopper, "complex128", shape, (0, sa), (0, (k * n, n, 1)))
        assert made.dtype == np.complex128 and made.launches[0].kernel != "realify", made.choice
        assert "dmma" not in made.choice.kernel, made.choice
    column_a = (0, (1 << 20, 1, 1024))  # A column-major: packed, then as one float64 product
    made = planner.plan(hopper, "complex128", (1, 1024, 1024, 1024), column_a, (0, (1 << 20, 1024, 1)))
    assert made.dtype == np.float64 and [x.kernel for x in made.launches][:2] == ["pack", "realify"], made.choice
    assert "A packed K-contiguous" in made.choice.reason
    shape = (1, 64, 16384, 16384)  # the realified B would exceed REALIFY_BYTES
    made = planner.plan(
        dataclasses.replace(H100, cc=80), "complex128", shape, (0, (1 << 20, 16384, 1)), (0, (1 << 28, 16384, 1))
    )
    assert made.dtype == np.complex128 and "dmma" not in made.choice.kernel, made.choice
    ampere = dataclasses.replace(H100, cc=70)
    made = planner.plan(ampere, "complex128", (1, 1024, 1024, 1024), (0, (1 << 20, 1024, 1)), (0, (1 << 20, 1024, 1)))
    assert made.dtype == np.complex128, made.choice


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_fp64_operands_without_a_unit_stride_are_copied_for_the_tensor_cores(dtype):
    """Every other column of A and B (no unit stride on either matrix axis): the FP64 tensor cores
    would read them in place at a fraction of their rate, so ``auto`` plans them copied row-major
    (relayout) where the product is large, and the copies themselves on the FP64 tensor cores;
    transposed and reversed views, and small products, are read as they lie."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401  (registers the families)
    from polymm_cuda import tensorcore

    hopper = dataclasses.replace(H100, cc=90)
    n = 2048
    stepped = (0, (2 * n * n, 2 * n, 2))
    made = planner.plan(hopper, dtype, (1, n, n, n), stepped, stepped)
    assert "dmma" in [r.family for r in made.ranking.refusals]
    families = [c.family for c in made.ranking.candidates]
    assert (
        "relayout" in families
        and "copied row-major" in made.ranking.candidates[families.index("relayout")].choice.reason
    )
    if dtype == "float64":  # the launches are the shared kernels'; the backend copies and plans again
        assert made.relayout and made.ranking.best.family == "relayout", made.choice
    else:  # or as one float64 product: A packed and B realified first, on the FP64 tensor cores
        assert made.relayout or [x.kernel for x in made.launches][:2] == ["pack", "realify"], made.choice
    copies = planner.plan(hopper, dtype, (1, n, n, n), (0, (n * n, n, 1)), (0, (n * n, n, 1)))
    assert copies.choice.kernel.startswith("polymm_dmma") and not copies.relayout, copies.choice
    for sa, sb in (
        ((n * n, 1, n), (n * n, n, 1)),  # A transposed
        ((n * n, -n, 1), (n * n, -n, 1)),  # rows reversed
    ):
        kept = planner.plan(hopper, dtype, (1, n, n, n), (n * n - n if sa[1] < 0 else 0, sa), (0, sb))
        assert not kept.relayout and kept.choice.kernel.startswith("polymm_dmma"), (sa, kept.choice)
    small = planner.plan(hopper, dtype, (1, 64, 64, 64), (0, (2 * 64 * 64, 128, 2)), (0, (2 * 64 * 64, 128, 2)))
    assert not small.relayout
    x = np.zeros((1, 8, 16), dtype)[..., ::2]
    a, b = tensorcore.repack(np, x, x.transpose(0, 2, 1)[..., :8, :])
    assert a.strides[-1] == b.strides[-1] == x.itemsize  # both row-major: dmma reads B along N


def test_wgmma_copies_reversed_and_stepped_operands_along_their_rows():
    """Operands the copy engine cannot read (rows reversed: no negative strides; every other
    column: no unit stride) are copied first, reading along their rows: a 16-bit B with reversed
    or stepped rows of N is copied N-major for the ``kn`` kernel (a K-major copy read one element
    per lane N apart), rows of whole 16-byte words are copied a word per thread, and an 8-bit B
    (no N-major wgmma) goes through the tiled transpose, which reads along N and writes along K."""
    import dataclasses

    import polymm_cuda.backend  # noqa: F401

    hopper = dataclasses.replace(H100, cc=90)
    n = 2048
    reversed_rows = (n * n - n, (n * n, -n, 1))
    made = planner.plan(hopper, "float16", (1, n, n, n), reversed_rows, reversed_rows)
    assert [x.kernel for x in made.launches] == ["polymm_restride_16", "polymm_restride_16", "polymm_wgmma_float16_kn"]
    copy_a, copy_b = made.choice.external["before"]
    assert copy_b["values"] == dict(s_off=(n * n - n) // 8, s_b=0, s_r=-n // 8, s_c=1, ld=n // 8, R=n, C=n // 8)
    assert copy_a["values"]["s_r"] == -n // 8 and "B copied N-major first" in made.choice.reason
    stepped = (0, (2 * n * n, 2 * n, 2))  # base[..., ::2]
    made = planner.plan(hopper, "bfloat16", (1, n, n, n), stepped, stepped)
    assert [x.kernel for x in made.launches] == ["polymm_restride_2", "polymm_restride_2", "polymm_wgmma_bfloat16_kn"]
    copy_b = made.choice.external["before"][1]["values"]
    assert (copy_b["s_r"], copy_b["s_c"], copy_b["R"], copy_b["C"]) == (2 * n, 2, n, n)  # along N, K rows
    made = planner.plan(hopper, "int8", (1, n, n, n), reversed_rows, reversed_rows)
    assert [x.kernel for x in made.launches] == ["polymm_restride_16", "polymm_transpose_1", "polymm_wgmma_int8_nk"]
    assert made.launches[1].args[3] == -n  # rows of the source n elements apart, backwards
