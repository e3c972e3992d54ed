"""Every CUDA kernel this backend can launch compiles (nvcc, no GPU needed).

CI has no GPU but has ``nvcc``: a CUDA syntax or template error in the shared
``naive``/``tiled`` sources or in our fast kernel fails here rather than at a
user's first call.  The fast kernel's instantiations (every dtype x tile
configuration x access pattern) go through the front end and PTX generation
without optimisation, one translation unit per dtype, in parallel; the hot
float32 instantiation is also compiled fully to machine code to check that it
does not spill registers (a performance regression guard).
Skipped only when ``nvcc`` is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from polymm.backend import CONTRACT_DTYPES
from polymm_cuda import fastgemm

DTYPES = [d.name for d in CONTRACT_DTYPES]


def _nvcc():
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "bin", "nvcc").exists():
            return str(Path(root, "bin", "nvcc"))
    return None


NVCC = _nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found")
ARCH = os.environ.get("POLYMM_CUDA_TEST_ARCH", "sm_90")


def _compile(src: str, tag: str, workdir: str, extra=("--ptx", "-Xcicc", "-O0")):
    path = Path(workdir, f"{tag}.cu")
    path.write_text(src)
    out = Path(workdir, f"{tag}.out")
    cmd = [NVCC, "-std=c++17", f"-arch={ARCH}", *extra, "-o", str(out), "-x", "cu", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def _jobs(dtype):
    """(tag, source, nvcc extra args) for everything to compile for one dtype."""
    from polymm.kernels import render

    body = fastgemm.source() + "".join(fastgemm.explicit_instantiation(v) for v in fastgemm.all_variants(dtype))
    jobs = [(f"fast-{dtype}", body, ("--ptx", "-Xcicc", "-O0"))]
    for kernel in ("naive", "tiled"):
        jobs.append((f"{kernel}-{dtype}", render("cuda", kernel, dtype), ("--ptx",)))
    return jobs


def _run_all(jobs):
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            futures = {tag: pool.submit(_compile, src, tag, tmp, extra) for tag, src, extra in jobs}
            return {tag: f.result() for tag, f in futures.items()}


# One test per dtype (its three translation units compile in parallel), so
# that pytest-xdist spreads dtypes over workers without compiling anything twice.
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_compile(dtype):
    failed = {tag: log for tag, (rc, log) in _run_all(_jobs(dtype)).items() if rc != 0}
    assert not failed, "nvcc failed:\n" + "\n".join(f"--- {t}\n{log}" for t, log in failed.items())


@pytest.mark.parametrize("config,va,cp_async", [("128x128x16", 4, False), ("128x256x16", 1, True)])
def test_hot_path_does_not_spill(config, va, cp_async):
    """The float32 instantiations "auto" runs on large aligned problems keep all in registers."""
    hot = fastgemm.Variant("float32", fastgemm.CONFIG_BY_NAME[(4, config)], True, va, True, 4, cp_async)
    src = fastgemm.source() + fastgemm.explicit_instantiation(hot)
    ((rc, log),) = _run_all([("hot", src, ("-cubin", "-Xptxas", "-v"))]).values()
    assert rc == 0, log
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, f"{hot.name_expression} spills:\n{log}"


def test_every_variant_is_consistent():
    """The configurations satisfy the kernel's static assertions for the widths used."""
    import numpy as np

    for dt in DTYPES:
        w = fastgemm.vector_width(np.dtype(dt))
        size = fastgemm.DTYPE_TAGS[dt][2]
        for c in fastgemm.CONFIGS[size]:
            c.check(sorted({1, w}))
            # minb resident blocks must fit an SM's shared memory (227 KiB per block on sm_90)
            for stages in (2, c.stages):
                assert c.smem_bytes(size, True, False, stages) * c.minb <= 227 * 1024, c


@pytest.mark.parametrize("arch", ["sm_80", ARCH])
@pytest.mark.parametrize("source", ["tensorcore", "dmma"])
def test_tensor_core_kernels_compile_without_spills(arch, source):
    """Every tensor-core kernel (float16, bfloat16, int8, uint8 with the parameters ``"auto"`` uses;
    float64 on the FP64 tensor cores) builds to machine code for Ampere and Hopper with every
    accumulator in registers."""
    from polymm_cuda import tensorcore

    if source == "tensorcore":
        options = tensorcore.DEFAULT.options()
        names = [tensorcore.kernel_name(d, lay) for d, lays in tensorcore.LAYOUTS.items() for lay in lays]
    else:
        options = ()
        names = [f"polymm_dmma_{a}_{b}" for a in ("ak", "am") for b in ("bn", "bk")]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "tc.cu")
        path.write_text(tensorcore.source(source))
        cubin = str(Path(tmp, "tc.cubin"))
        cmd = [NVCC, "-std=c++17", f"-arch={arch}", "-cubin", *options, "-Xptxas", "-v", "-o", cubin, str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    for name in names:
        assert name in log, f"{name} not built:\n{log}"
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, log
