"""Diagnostic (session 4 of 2026-11-25), three questions in one device call:

- ``host``: where a PyTorch bfloat16 call's host time goes (probe22 timed the stages one by one and
  they summed to 23 of the call's 34 us): the short path's stages timed cumulatively (each line
  runs every stage up to it), then the calls profiled (cProfile, top functions by own time);
  CuPy float16 and bfloat16 calls beside them (from the third run on).
- ``skinny``: the GPU's part of the tensor-core skinny cell (8192 x 4096 @ 4096 x 256) for
  float16 (CuPy) and bfloat16 (PyTorch), kernels alone behind a spinning kernel, and the plans.
- ``stages``: ``wgmma`` tile widths and pipeline depths for float16 (skinny, 2048, a batch).
- ``tiles``: regblock tiles, kernels alone, for the SIMT cells below 0.9x: complex128 256 and 512
  squares (teams splitting K were never tried for 16-byte values), float64 4096 x 32 @ 32 x 4096.

    . .device/setup.sh && python .device/probe23.py host|skinny|tiles|stages
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import _error, ktime  # noqa: E402

import polymm  # noqa: E402
from polymm import dispatch  # noqa: E402
from polymm.registry import get_backend  # noqa: E402


def per_call(fn, n=3000) -> float:
    """Host microseconds per call: best of 5 loops of ``n`` calls."""
    fn()
    cp.cuda.Device().synchronize()
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
        cp.cuda.Device().synchronize()
    return best * 1e6


def host() -> None:
    import torch

    import ml_dtypes

    impl = get_backend("cuda")
    for n in (1024, 2048):
        ca, cb = (cp.random.standard_normal((n, n), dtype=cp.float32).astype(cp.float16) for _ in range(2))
        words = (np.random.default_rng(i).standard_normal((n, n)).astype(ml_dtypes.bfloat16) for i in (1, 2))
        ba, bb = (cp.asarray(w.view(np.int16)).view(w.dtype) for w in words)
        print(f"  {'cupy.matmul (float16)':44s} {per_call(lambda: cp.matmul(ca, cb)):7.2f} us", flush=True)
        print(f"  {'polymm.matmul (CuPy float16)':44s} {per_call(lambda: polymm.matmul(ca, cb)):7.2f} us", flush=True)
        print(f"  {'polymm.matmul (CuPy bfloat16)':44s} {per_call(lambda: polymm.matmul(ba, bb)):7.2f} us", flush=True)
        ta, tb = (torch.randn(n, n, device="cuda").to(torch.bfloat16) for _ in range(2))
        polymm.matmul(ta, tb)
        native = dispatch._VIEWERS[torch.Tensor]
        print(f"n={n} plan: {impl.last_plan.kernel}", flush=True)

        def upto(stage):
            def run():
                native.same_stream(ta)
                if stage < 2:
                    return
                a, b = native.view_foreign(ta), native.view_foreign(tb)
                if stage < 3:
                    return
                result, view = native.new_foreign(ta, a, (n, n))
                if stage < 4:
                    return
                dispatch._plain_device(native, a, b, None, "auto", view)  # (the path before replays)
                return result

            return run

        rows = [
            ("torch.matmul", lambda: torch.matmul(ta, tb)),
            ("polymm.matmul", lambda: polymm.matmul(ta, tb)),
            ("dispatch._matmul_viewed", lambda: dispatch._matmul_viewed(native, ta, tb, None, "auto")),
            ("1 same_stream", upto(1)),
            ("2 + view_foreign x2", upto(2)),
            ("3 + new_foreign", upto(3)),
            ("4 + _matmul_plain", upto(4)),
        ]
        for name, fn in rows:
            print(f"  {name:44s} {per_call(fn):7.2f} us", flush=True)
    cp.cuda.Device().synchronize()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(3000):
        polymm.matmul(ta, tb)
    profile.disable()
    cp.cuda.Device().synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(30)
    print(text.getvalue())


def skinny() -> None:
    import torch

    impl = get_backend("cuda")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((8192, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 256)).astype(np.float32)
    ca, cb = cp.asarray(a, cp.float16), cp.asarray(b, cp.float16)
    ta, tb = (torch.as_tensor(x, device="cuda").to(torch.bfloat16) for x in (a, b))
    for name, ours, ref in (
        ("float16 (cupy)", lambda: polymm.matmul(ca, cb), lambda: cp.matmul(ca, cb)),
        ("bfloat16 (torch)", lambda: polymm.matmul(ta, tb), lambda: torch.matmul(ta, tb)),
    ):
        ours()
        plan = impl.last_plan
        t_ours, t_ref = ktime(ours), ktime(ref)
        host_ours, host_ref = per_call(ours, 500), per_call(ref, 500)
        print(
            f"{name}: GPU alone ours {t_ours:7.1f} us, reference {t_ref:7.1f} us ({t_ref / t_ours:.2f}x); "
            f"host per call {host_ours:.1f} / {host_ref:.1f} us; plan {plan.kernel} {plan.reason}",
            flush=True,
        )
    print(polymm.explain((8192, 4096), (4096, 256), dtype="float16", backend="cuda"), flush=True)


def _tiles(dtype: str):
    """(mwg, nwg, kwg, mdimc, ndimc, kteams) to try for ``dtype``."""
    if dtype == "complex128":
        shapes = [(16, 16, 4, 4), (16, 16, 8, 8), (32, 32, 8, 8), (32, 32, 16, 16), (64, 64, 16, 16)]
        return [(m, n, k, md, nd, t) for m, n, md, nd in shapes for k in (8, 16) for t in (1, 2, 4, 8)]
    shapes = [(64, 64, 8, 8), (64, 64, 16, 16), (128, 64, 16, 16), (64, 128, 16, 16), (128, 128, 16, 16)]
    shapes += [(32, 64, 8, 16), (32, 32, 8, 8), (128, 128, 32, 16)]
    return [(m, n, k, md, nd, 1) for m, n, md, nd in shapes for k in (8, 16, 32)]


def tiles() -> None:
    from polymm.kernels import KernelParams, local_mem_bytes

    be = get_backend("cuda")
    rng = np.random.default_rng(7)
    cases = [("complex128", (256, 256), (256, 256)), ("complex128", (512, 512), (512, 512))]
    cases += [("float64", (4096, 32), (32, 4096))]
    for dtype, sa, sb in cases:
        dt = np.dtype(dtype)
        a, b = (rng.standard_normal(s) + (1j * rng.standard_normal(s) if dt.kind == "c" else 0) for s in (sa, sb))
        a, b = cp.asarray(a.astype(dt)), cp.asarray(b.astype(dt))
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b))
        tauto = ktime(lambda: be.matmul(a[None], b[None], out[None], "auto"))
        print(f"{dtype} {sa} @ {sb}: cuBLAS {tref:.1f} us, auto {tauto:.1f} us ({be.last_plan.reason})", flush=True)
        rows = []
        for mwg, nwg, kwg, mdimc, ndimc, teams in _tiles(dtype):
            wm, wn = mwg // mdimc, nwg // ndimc
            p = KernelParams(
                mwg=mwg, nwg=nwg, kwg=kwg, mdimc=mdimc, ndimc=ndimc, vw=min(2, wm, wn), gvw=2, pad=0,
                maxrreg=128 if wm * wn >= 32 else 0, kteams=teams,
            )  # fmt: skip
            try:
                p.validate("regblock")
            except ValueError:
                continue
            if mdimc * ndimc * teams > 1024 or local_mem_bytes("regblock", dt, p) > 48 * 1024:
                continue
            out.fill(np.nan)
            t = ktime(lambda: be.launch(a[None], b[None], out[None], "regblock", p), reps=5)
            err = _error(out, ref)
            if not err < 1e-12:
                print("   BAD", p, err, flush=True)
                continue
            rows.append((t, f"{mwg}x{nwg}x{kwg} t{mdimc}x{ndimc} kt{teams}"))
        rows.sort()
        for t, what in rows[:10]:
            print(f"   {t:8.1f} us {tref / t:5.2f}x cuBLAS  {what}", flush=True)


def stages() -> None:
    """wgmma tile widths and pipeline depths (``wgmma.width`` and ``wgmma.STAGES`` replaced),
    kernels alone, float16: the skinny cell, a 2048 square and a 64 x 512 batch."""
    from polymm_cuda import wgmma

    be = get_backend("cuda")
    rng = np.random.default_rng(9)
    width, depth = wgmma.width, wgmma.STAGES
    for sa, sb in (((8192, 4096), (4096, 256)), ((2048, 2048), (2048, 2048)), ((64, 512, 512), (64, 512, 512))):
        a, b = (cp.asarray(rng.standard_normal(s).astype(np.float16)) for s in (sa, sb))
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b))
        a3, b3, o3 = (x if x.ndim == 3 else x[None] for x in (a, b, out))
        be._plans.clear()
        tauto = ktime(lambda: be.matmul(a3, b3, o3, "auto"))
        print(f"float16 {sa} @ {sb}: cuBLAS {tref:.1f} us, auto {tauto:.1f} us ({be.last_plan.kernel})", flush=True)
        for bn, st in ((256, 4), (128, 4), (128, 5), (128, 6), (64, 4), (64, 6), (64, 8)):
            if st * (wgmma.BM + bn) * wgmma.ROW + 1024 + 16 * st > 227 * 1024:
                continue
            wgmma.width, wgmma.STAGES = (lambda shape, sms, bn=bn: bn), st
            be._plans.clear()
            out.fill(np.nan)
            try:
                t = ktime(lambda: be.matmul(a3, b3, o3, "auto"), reps=5)
                err = _error(out, ref)
            except Exception as e:  # noqa: BLE001 - a configuration that does not build or launch
                print(f"   bn {bn} stages {st}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            print(f"   bn {bn:3d} stages {st}: {t:8.1f} us {tref / t:5.2f}x cuBLAS  err {err:.1e}", flush=True)
        wgmma.width, wgmma.STAGES = width, depth
        be._plans.clear()


if __name__ == "__main__":
    {"host": host, "skinny": skinny, "tiles": tiles, "stages": stages}[sys.argv[1]]()
