"""Diagnostic (kernel only): tiles for transposed (column-major) operands, read in place, and
bands of 8 block rows, against cuBLAS on the same transposed views, per size, on this GPU."""

import itertools
import sys
import json
import time
import numpy as np
import cupy as cp
import polymm
from polymm.kernels import KernelParams, local_mem_bytes

spin = cp.RawKernel(
    r"""extern "C" __global__ void spin(long long c){ long long t=clock64(); while(clock64()-t<c); }""", "spin"
)
be = polymm.get_backend("cuda")


def ktime(f, reps=10, cycles=20_000_000):
    f()
    cp.cuda.Device().synchronize()
    best = 1e9
    for _ in range(3):
        spin((1,), (1,), (np.int64(cycles),))
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps):
            f()
        e1.record()
        e1.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(e0, e1) / reps * 1e3)
    return best


def cands(dt, n):
    out = []
    grid = itertools.product([(64, 128, 8, 16), (128, 64, 16, 8), (64, 64, 8, 8)], (8, 16), (2, 4), (0, 8), (0, 4))
    for (mwg, nwg, mdimc, ndimc), kwg, teams, group, pad in grid:
        wm, wn = mwg // mdimc, nwg // ndimc
        p = KernelParams(
            mwg=mwg,
            nwg=nwg,
            kwg=kwg,
            mdimc=mdimc,
            ndimc=ndimc,
            vw=min(4, wm, wn),
            gvw=4,
            pad=pad,
            maxrreg=128 if wm * wn >= 32 else 0,
            kteams=teams,
            group=group,
        )
        try:
            p.validate("regblock")
        except ValueError:
            continue
        if mdimc * ndimc * teams > 1024 or local_mem_bytes("regblock", dt, p) > 48 * 1024:
            continue
        out.append(p)
    return out


shapes = {"float32": [1024, 1000]}
which = sys.argv[1].split(",") if len(sys.argv) > 1 else list(shapes)
results = {}
t0 = time.time()
for dt in which:
    for n in shapes[dt]:
        cs = cands(dt, n)
        if dt == "complex64":
            a = (cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))).astype(dt)
            b = (cp.random.standard_normal((n, n)) + 1j * cp.random.standard_normal((n, n))).astype(dt)
        else:
            a = cp.random.standard_normal((n, n)).astype(dt).T
            b = cp.random.standard_normal((n, n)).astype(dt).T
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b))
        rows = []
        for p in cs:
            try:
                out.fill(np.nan)
                t = ktime(lambda: be.launch(a[None], b[None], out[None], "regblock", p), reps=5)
                err = float(cp.abs(out - ref).max() / cp.abs(ref).max())
            except Exception as exc:
                print("ERR", p, exc)
                continue
            if not err < 1e-4:
                print("BAD", p, err)
                continue
            rows.append((t, p))
        rows.sort(key=lambda r: r[0])
        key = f"{dt} {n}"
        base = [
            t
            for t, p in rows
            if p.kteams == 1
            and p.group == 0
            and p.kwg == 8
            and (p.mwg, p.nwg, p.mdimc) in ((128, 128, 16), (64, 64, 8))
            and p.pad == 0
        ]
        results[key] = {"cublas_us": tref, "table_like_us": base[:1], "best": [(t, str(p)) for t, p in rows[:10]]}
        print(f"{key}: cublas {tref:8.1f} us, plain table-like {base[:1]} ({time.time() - t0:.0f}s)", flush=True)
        for t, p in rows[:8]:
            print(
                f"   {t:8.1f} {tref / t:5.2f}x {p.mwg}x{p.nwg}x{p.kwg} t{p.mdimc}x{p.ndimc} vw{p.vw} kt{p.kteams} g{p.group} pad{p.pad} r{p.maxrreg}",
                flush=True,
            )
json.dump(results, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/sweep2.json", "w"), indent=1)
