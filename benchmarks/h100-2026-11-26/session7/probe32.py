"""float64 on the FP64 tensor cores, the 64 x 64 tiles against the 64 x 128 ones: whole
calls of the backend (CUDA events around each call, interleaved with ``cupy.matmul``, median of
31) and GPU time (queued behind a spinning kernel, best of 3 x 10); every result checked against
cuBLAS DGEMM's.

    . .device/setup.sh && python .device/probe32.py

``probe32.log`` ran on the working tree of 4272d19 before its rule: then every float64 product of
more than one wave of 64 x 64 tiles took the wide ones (``DMMA_WIDE_WAVES = 1``; its plans name the
tiles "64x64" and "64x128" as here). The script now switches ``DMMA_WIDE_GAIN`` (0: never wide;
inf: wherever the rule's other conditions allow, so A along M and K under 256 stay in 64 x 64
tiles). :func:`compare` serves probe33 too.
"""

import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import call_and_gpu_times  # noqa: E402

from polymm_cuda import CUDABackend, tensorcore  # noqa: E402

#: (batch, M, K, N, layout): "c" row-major; "bt" B^T row-major; "at" A^T row-major
CASES = [
    (1, 1024, 1024, 1024, "c"),
    (1, 1500, 1500, 1500, "c"),
    (1, 2048, 2048, 2048, "c"),
    (1, 2048, 2048, 2048, "bt"),
    (1, 2048, 2048, 2048, "at"),
    (1, 4096, 4096, 4096, "c"),
    (1, 8192, 8192, 8192, "c"),
    (1, 8192, 4096, 256, "c"),
    (64, 512, 512, 512, "c"),
    (1, 4096, 32, 4096, "c"),
    (1, 3000, 1000, 3000, "c"),
]


def operands(dtype, bt, m, k, n, layout):
    rng = cp.random.default_rng(5)

    def draw(shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if dtype == "complex128" else x

    a = draw((bt, k, m)).transpose(0, 2, 1) if layout == "at" else draw((bt, m, k))
    b = draw((bt, n, k)).transpose(0, 2, 1) if layout == "bt" else draw((bt, k, n))
    return a, b


def compare(cases, setting: str, variants: dict, dtype: str = "float64") -> None:
    """Each case on one backend per variant (value of ``tensorcore.<setting>``; each keeps the plans
    made under it) and cuBLAS: whole calls, GPU time, the plan and its error; the setting restored."""
    default = getattr(tensorcore, setting)
    backends = {v: CUDABackend() for v in variants}
    for bt, m, k, n, layout in cases:
        a, b = operands(dtype, bt, m, k, n, layout)
        ref = cp.matmul(a, b)
        calls = {"cuBLAS": lambda: cp.matmul(a, b)}
        notes = {}
        for v, value in variants.items():
            setattr(tensorcore, setting, value)
            out = cp.full((bt, m, n), np.nan, dtype=dtype)

            def call(v=v, out=out):
                backends[v].matmul(a, b, out, "auto")

            call()
            cp.cuda.Device().synchronize()
            err = float(cp.abs(out - ref).max() / cp.abs(ref).max())
            plan = backends[v].last_plan
            opts = " ".join(o for o in plan.external["options"] if "WN" in o or "MMA" in o) if plan.external else ""
            notes[v] = f"{plan.kernel} {opts} | err {err:.1e}"
            calls[v] = call
        setattr(tensorcore, setting, default)
        times, gpu = call_and_gpu_times(calls)
        ref_call = times["cuBLAS"]
        print(
            f"== {dtype} {bt} x {m}x{k} @ {k}x{n} {layout}: cuBLAS call {ref_call:.1f} us, GPU {gpu['cuBLAS']:.1f} us"
        )
        for v in variants:
            t = times[v]
            print(
                f"  {v:7s} call {t:8.1f} us ({ref_call / t:5.2f}x)  GPU {gpu[v]:8.1f} us ({gpu['cuBLAS'] / gpu[v]:5.2f}x)"
                f"  {notes[v]}",
                flush=True,
            )
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    compare(CASES, "DMMA_WIDE_GAIN", {"64x64": 0.0, "64x128": float("inf")})
