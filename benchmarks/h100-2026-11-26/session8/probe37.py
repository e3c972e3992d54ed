"""The shared regblock kernel's tiles staged by asynchronous copies (``stages`` > 1: a ring filled
by ``cp.async``, one barrier per K step) against register staging (``stages`` = 1, the H100
table's float32 entry), float32 squares and column-major operands, kernels alone (sweep.py's
``ktime``) against cuBLAS (``cupy.matmul``, TF32 off) on the same operands; every result checked
against cuBLAS's.  It ran at 7ae3754, whose ``stages`` parameter (and the ring in
``kernels/regblock.c``, the ``COPY_ASYNC`` helpers of the preludes) was removed again after it:
asynchronous staging was slower on every case (session8/README.md).

    . .device/setup.sh && python .device/probe37.py [OUT.json [large]]

``large``: cuBLAS's float32 tile on the H100 (``sm80_xmma_gemm_f32f32_..._tilesize256x128x8_stage3_
warpsize4x2x1_ffma``: 256 x 128 in three stages, 256 threads of 8 x 16) and its transpose, either
staging, against the table's entry only.
"""

import itertools
import json
import sys

sys.path.insert(0, ".device")
import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from sweep import ktime  # noqa: E402

import polymm  # noqa: E402
from polymm.kernels import KernelParams, local_mem_bytes  # noqa: E402

TABLE = KernelParams(mwg=128, nwg=128, kwg=8, mdimc=16, ndimc=16, vw=4, gvw=4, pad=4, maxrreg=128, group=8)


def candidates():
    yield "table", TABLE
    for stages, kwg in itertools.product((2, 3, 4, 5), (8, 16)):
        yield f"s{stages} k{kwg}", TABLE.replace(stages=stages, kwg=kwg)
    for stages, regs in itertools.product((2, 3, 4), (0, 255)):  # 128 threads, 16 x 8 and 8 x 16
        yield f"16x8/thread s{stages} r{regs}", TABLE.replace(mdimc=8, ndimc=16, stages=stages, maxrreg=regs)
        yield f"8x16/thread s{stages} r{regs}", TABLE.replace(mdimc=16, ndimc=8, stages=stages, maxrreg=regs)
    for stages, regs in itertools.product((1, 2, 3, 4), (0, 255)):  # cuBLAS's shape: 256 x 128, 8 x 16 each
        yield f"256x128 s{stages} r{regs}", TABLE.replace(mwg=256, stages=stages, maxrreg=regs)
        yield f"128x256 s{stages} r{regs}", TABLE.replace(nwg=256, stages=stages, maxrreg=regs)
    yield "s3 pad0", TABLE.replace(stages=3, pad=0)
    yield "s3 group16", TABLE.replace(stages=3, group=16)


def main(path=None, grid="all"):
    be = polymm.get_backend("cuda")
    results = {}
    cases = [(n, "c") for n in (1024, 2048, 4096, 8192)] + [(4096, "f"), (2048, "t")]
    if grid == "large":
        cases = [(2048, "c"), (4096, "c"), (2048, "t")]
    for n, layout in cases:
        a = cp.random.standard_normal((n, n), dtype=cp.float32)
        b = cp.random.standard_normal((n, n), dtype=cp.float32)
        if layout == "f":  # both column-major
            a, b = cp.asfortranarray(a), cp.asfortranarray(b)
        elif layout == "t":  # A column-major only
            a = cp.asfortranarray(a)
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b))
        rows = []
        for name, p in candidates():
            if grid == "large" and not (name == "table" or name.startswith(("256x128", "128x256"))):
                continue
            if p.mdimc * p.ndimc > 1024 or local_mem_bytes("regblock", "float32", p) > 48 * 1024:
                continue
            out.fill(np.nan)
            try:
                t = ktime(lambda: be.launch(a[None], b[None], out[None], "regblock", p), reps=5)
            except Exception as exc:  # noqa: BLE001 - a diagnostic: report and go on
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            err = float(cp.abs(out - ref).max() / cp.abs(ref).max())
            ok = err < 1e-4
            rows.append(dict(name=name, us=t, ratio=tref / t, err=err, ok=ok, params=str(p)))
        tref2 = ktime(lambda: cp.matmul(a, b))
        key = f"float32 {n} {layout}"
        results[key] = dict(cublas_us=[tref, tref2], rows=rows)
        print(f"{key}: cuBLAS {tref:.1f} / {tref2:.1f} us", flush=True)
        for r in sorted(rows, key=lambda r: r["us"]):
            print(f"   {r['us']:9.1f} {r['ratio']:5.3f}x {'ok ' if r['ok'] else 'BAD'} {r['name']}", flush=True)
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
