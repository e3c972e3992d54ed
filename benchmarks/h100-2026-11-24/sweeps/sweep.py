"""Diagnostic sweeps behind the H100 table entries of 2026-11-24: kernels alone (a spin kernel keeps
the GPU busy while the host enqueues, so CUDA events time the kernels, not the host), against
cuBLAS (``cupy.matmul``, TF32 off) on the same operands, every result checked against cuBLAS's.

    . .device/setup.sh && python sweep.py GRID OUT.json

``GRID`` (the JSON beside this script of the same name holds that run):

- ``small`` (``sweep7-small.json``, 2026-11-24, the third session): small squares, float32 128 and
  256, complex64 and float64 256, tiles of 16-64 with teams splitting K;
- regblock, float32 squares, each candidate through ``CUDABackend.launch``:
  ``teams`` (``sweep4-f32.json``: teams splitting K, bands, padding; 256-4096),
  ``microtiles`` (``sweep5-f32.json``: 8 x 16 and 16 x 8 micro-tiles; 2048-8192),
  ``transposed`` (``sweep6-f32.json``: column-major operands read in place; 1000, 1024);
- ``kernels/dmma.cu``, float64 squares 1024-8192, launched directly:
  ``dmma-shapes`` (``dmma-sweep.json``: m8n8k4, m16n8k4, m16n8k8, one or two blocks per SM),
  ``dmma-unroll`` (``dmma-sweep2.json``: m16n8k4's K loop unrolled whole or by two),
  ``dmma-warps`` (``dmma-sweep3.json``: 32 x 32 or 64 x 32 warp tiles);
  ``dmma-k16`` (``../../h100-2026-11-25/sweeps/dmma-sweep4.json``: m16n8k16, which only the
  variant of the first kernel it ran with knew; that kernel is gone, ``dmma_sweep.py`` there
  sweeps the one that replaced it).

``sweep2-f32.json`` and ``sweep3-f32.json`` came from grids over two regblock parameters tried and
removed the same night (double-buffered tiles, warp shapes); the README says what they found.
"""

from __future__ import annotations

import itertools
import json
import sys

import cupy as cp
import numpy as np

_SPIN = cp.RawKernel(
    r"""extern "C" __global__ void spin(long long c){ long long t=clock64(); while(clock64()-t<c); }""", "spin"
)


def ktime(f, reps=10, cycles=20_000_000) -> float:
    """Best of three: microseconds per call of ``f`` queued behind a spinning kernel."""
    f()
    cp.cuda.Device().synchronize()
    best = 1e9
    for _ in range(3):
        _SPIN((1,), (1,), (np.int64(cycles),))
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps):
            f()
        e1.record()
        e1.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(e0, e1) / reps * 1e3)
    return best


def call_time(f) -> float:
    """Microseconds of one call of ``f`` between two CUDA events: the whole call, host side included."""
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    f()
    e1.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) * 1e3


def call_and_gpu_times(calls: dict, reps: int = 31) -> tuple[dict, dict]:
    """Per named call: the median of ``reps`` whole calls (:func:`call_time`, the calls
    interleaved) and the GPU time (:func:`ktime`, best of 3 x 10), in microseconds."""
    times = {c: [] for c in calls}
    for f in calls.values():
        f()
    for _ in range(reps):
        for c, f in calls.items():
            times[c].append(call_time(f))
    return {c: float(np.median(t)) for c, t in times.items()}, {c: ktime(f, reps=10) for c, f in calls.items()}


def _error(c, ref) -> float:
    return float(cp.abs(c - ref).max() / cp.abs(ref).max())


# ---- regblock ------------------------------------------------------------------------------


def _regblock_grid(grid: str, n: int):
    """(mwg, nwg, mdimc, ndimc), kwg, kteams, group, pad, maxrreg (None: 128 for 8 x 8 and larger)."""
    if grid == "teams":
        if n >= 2048:
            return itertools.product([(128, 128, 16, 16)], (8,), (1, 2), (8,), (0, 4), (None,))
        if n >= 1000:
            tiles = [(64, 128, 8, 16), (64, 64, 8, 8), (128, 128, 16, 16), (64, 64, 16, 16)]
            return itertools.product(tiles, (8, 16), (1, 2, 4), (0, 8), (4,), (None,))
        tiles = [(64, 64, 8, 8), (64, 64, 16, 16), (32, 32, 8, 8), (64, 128, 8, 16)]
        return itertools.product(tiles, (8, 16), (1, 2, 4), (0,), (0, 4), (None,))
    if grid == "microtiles":
        tiles = [(128, 128, 16, 16), (128, 256, 16, 16), (256, 128, 16, 16), (128, 128, 8, 16), (128, 128, 16, 8)]
        return itertools.product(tiles, (8, 16), (1,), (8,), (4,), (0, 128, 255))
    if grid == "transposed":
        tiles = [(64, 128, 8, 16), (128, 64, 16, 8), (64, 64, 8, 8)]
        return itertools.product(tiles, (8, 16), (2, 4), (0, 8), (0, 4), (None,))
    if grid == "small":
        tiles = [(16, 16, 8, 8), (32, 32, 8, 8), (16, 16, 4, 4), (32, 32, 16, 16), (64, 64, 8, 8)]
        return itertools.product(tiles, (8, 16), (1, 2, 4, 8), (0,), (0, 4), (None,))
    raise SystemExit(f"unknown grid {grid!r}")


_REGBLOCK_SIZES = {
    "teams": (256, 512, 1000, 1024, 2048, 4096),
    "microtiles": (2048, 4096, 8192),
    "transposed": (1024, 1000),
    "small": (128, 256, ("complex64", 256), ("float64", 256)),
}


def regblock(grid: str) -> dict:
    import polymm
    from polymm.kernels import KernelParams, local_mem_bytes

    be = polymm.get_backend("cuda")
    results = {}
    for size in _REGBLOCK_SIZES[grid]:
        dtype, n = size if isinstance(size, tuple) else ("float32", size)
        a = cp.random.standard_normal((n, n)).astype(dtype)
        b = cp.random.standard_normal((n, n)).astype(dtype)
        if grid == "transposed":
            a, b = a.T, b.T
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b))
        tauto = ktime(lambda: be.matmul(a[None], b[None], out[None], "auto"))
        rows = []
        for (mwg, nwg, mdimc, ndimc), kwg, teams, group, pad, regs in _regblock_grid(grid, n):
            wm, wn = mwg // mdimc, nwg // ndimc
            if regs is None:
                regs = 128 if wm * wn >= 32 else 0
            elif (wm * wn == 64) != (regs == 128):
                continue  # 8 x 8 micro-tiles take the table's cap, larger ones none or 255
            p = KernelParams(
                mwg=mwg, nwg=nwg, kwg=kwg, mdimc=mdimc, ndimc=ndimc, vw=min(4 if dtype == "float32" else 2, wm, wn),
                gvw=4 if dtype == "float32" else 2, pad=pad,
                maxrreg=regs, kteams=teams, group=group,
            )  # fmt: skip
            try:
                p.validate("regblock")
            except ValueError:
                continue
            if mdimc * ndimc * teams > 1024 or local_mem_bytes("regblock", dtype, p) > 48 * 1024:
                continue
            out.fill(np.nan)
            t = ktime(lambda: be.launch(a[None], b[None], out[None], "regblock", p), reps=5)
            err = _error(out, ref)
            if not err < 1e-4:
                print("BAD", p, err)
                continue
            rows.append((t, p))
        rows.sort(key=lambda r: r[0])
        results[f"{dtype} {n}"] = {"cublas_us": tref, "auto_us": tauto, "best": [(t, str(p)) for t, p in rows[:10]]}
        print(f"{dtype} {n}: cuBLAS {tref:8.1f} us, auto {tauto:8.1f} us", flush=True)
        for t, p in rows[:8]:
            what = f"{p.mwg}x{p.nwg}x{p.kwg} t{p.mdimc}x{p.ndimc} kt{p.kteams} g{p.group} pad{p.pad} r{p.maxrreg}"
            print(f"   {t:8.1f} {tref / t:5.2f}x {what}", flush=True)
    return results


# ---- dmma ----------------------------------------------------------------------------------

_DMMA_CONFIGS = {  # (DM_MMA, DM_MINB, DM_WM, DM_STAGES, K loop unrolled by: 0 = whole)
    "dmma-shapes": [(mma, minb, 32, 3, 0) for mma in (884, 1684, 1688) for minb in (2, 1)],
    "dmma-unroll": [(1684, 2, 32, 3, 0), (1684, 2, 32, 3, 2)],
    "dmma-k16": [
        (1684, 2, 32, 3, 0),
        (16816, 1, 32, 3, 0),
        (16816, 1, 32, 4, 0),
        (16816, 2, 32, 3, 0),
        (16816, 1, 64, 3, 0),
        (16816, 1, 64, 4, 0),
    ],
    "dmma-warps": [
        (1684, 2, 32, 3, 0),
        (1684, 1, 64, 3, 0),
        (1684, 1, 64, 4, 0),
        (1688, 1, 64, 3, 0),
        (1688, 1, 64, 4, 0),
    ],
}


def dmma(grid: str) -> dict:
    from polymm_cuda import tensorcore

    base = tensorcore.source("dmma")
    loop = "        for (int ks = 0; ks < DM_BK; ks += DM_TK) {"
    i64 = np.int64
    results = {}
    for n in (1024, 2048, 4096, 8192):
        a = cp.random.standard_normal((n, n))
        b = cp.random.standard_normal((n, n))
        ref = cp.matmul(a, b)
        c = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b), reps=5)
        row = {"cublas_us": tref}
        for mma, minb, wm, stages, unroll in _DMMA_CONFIGS[grid]:
            src = base.replace("#pragma unroll\n" + loop, f"#pragma unroll {unroll}\n" + loop) if unroll else base
            opts = ("-std=c++17", f"-DDM_MMA={mma}", f"-DDM_MINB={minb}", f"-DDM_WM={wm}", f"-DDM_STAGES={stages}")
            fn = cp.RawModule(code=src, options=opts).get_function("polymm_dmma_ak_bn")
            smem = stages * (2 * wm * 20 + 16 * 132) * 8
            fn.max_dynamic_shared_size_bytes = smem
            sizes = (np.int32(n),) * 3
            args = (*sizes, a, i64(0), i64(0), i64(n), i64(1), b, i64(0), i64(0), i64(n), i64(1), c, i64(0))
            c.fill(np.nan)
            t = ktime(lambda: fn((n // 128, n // (2 * wm), 1), (256, 1, 1), args, shared_mem=smem), reps=5)
            err = _error(c, ref)
            key = f"m{mma}/minb{minb}/wm{wm}/st{stages}/unroll{unroll or 'all'}"
            row[key] = (t, err, fn.num_regs, fn.local_size_bytes)
            print(
                f"n={n} {key:32s} {t:9.1f} us, {tref / t:4.2f}x cuBLAS ({tref:.1f}), err {err:.1e}, "
                f"regs {fn.num_regs}, local {fn.local_size_bytes}",
                flush=True,
            )
        results[n] = row
    return results


if __name__ == "__main__":
    grid, path = sys.argv[1], sys.argv[2]
    found = dmma(grid) if grid.startswith("dmma") else regblock(grid)
    with open(path, "w") as f:
        json.dump(found, f, indent=1)
