"""The float64 kernel (``kernels/dmma.cu``) rewritten in the fifth session: tile shapes, K slices,
copy widths and layouts, launched directly, timed alone (behind a spinning kernel) against cuBLAS
DGEMM (``cupy.matmul``) on the same operands; every result checked against cuBLAS's.

    . .device/setup.sh && python dmma_sweep.py OUT.json [config ...]
"""

import json
import sys

import cupy as cp
import numpy as np

sys.path.insert(0, ".device")
from sweep import _error, ktime  # noqa: E402

from polymm_cuda import tensorcore  # noqa: E402

#: name -> -D options (besides the copy widths): MMA shape, warps, warp tile, stages, blocks per SM
CONFIGS = {
    "pairs-1688-s4": dict(DM_MMA=1688),
    "pairs-1684-s4": dict(DM_MMA=1684),
    "pairs-1688-s3": dict(DM_MMA=1688, DM_STAGES=3),
    "pairs-1688-128x64-s3-b2": dict(DM_MMA=1688, DM_WM=64, DM_STAGES=3, DM_MINB=2),
    "pairs-1688-64x128-s3-b2": dict(DM_MMA=1688, DM_WN=64, DM_STAGES=3, DM_MINB=2),
}


def smem(o: dict, layout: str) -> int:
    """Bytes of shared memory (``tensorcore.dmma_smem`` for any tile)."""
    wm, wn, bk = o.get("DM_WM", 32), o.get("DM_WN", 32), o.get("DM_BK", 16)
    bm, bn = o.get("DM_WARPS_M", 2) * wm, o.get("DM_WARPS_N", 2) * wn
    a = bm * (bk + 4) if layout.startswith("ak") else bk * (bm + 4)
    b = bk * (bn + 4) if layout.endswith("bn") else bn * (bk + 4)
    return o.get("DM_STAGES", 4) * (a + b) * 8


def run(name: str, o: dict, n: int, layout: str, vec: int, ops, ref, tref, out) -> dict:
    wm, wn = o.get("DM_WM", 32), o.get("DM_WN", 32)
    bm, bn = o.get("DM_WARPS_M", 2) * wm, o.get("DM_WARPS_N", 2) * wn
    threads = 32 * o.get("DM_WARPS_M", 2) * o.get("DM_WARPS_N", 2)
    opts = ("-std=c++17", *(f"-D{k}={v}" for k, v in o.items()), f"-DDM_VA={vec}", f"-DDM_VB={vec}")
    fn = cp.RawModule(code=tensorcore.source("dmma"), options=opts).get_function(f"polymm_dmma_{layout}")
    fn.max_dynamic_shared_size_bytes = smem(o, layout)
    (a, sa), (b, sb) = ops
    i64 = np.int64
    args = (*(np.int32(n),) * 3, a, i64(0), i64(0), *map(i64, sa), b, i64(0), i64(0), *map(i64, sb), out, i64(0))
    out.fill(np.nan)
    grid = (-(-n // bn) * -(-n // bm), 1, 1) if o.get("DM_GROUP_M", 16) else (-(-n // bn), -(-n // bm), 1)
    t = ktime(lambda: fn(grid, (threads, 1, 1), args, shared_mem=smem(o, layout)), reps=5)
    err = _error(out, ref)
    row = {"us": t, "ratio": tref / t, "err": err, "regs": fn.num_regs, "local": fn.local_size_bytes}
    print(
        f"n={n:5d} {name:26s} {layout} v{vec} {t:9.1f} us {tref / t:5.2f}x cuBLAS ({tref:.1f}) err {err:.1e} "
        f"regs {fn.num_regs} local {fn.local_size_bytes}",
        flush=True,
    )
    return row


def main() -> None:
    path, names = sys.argv[1], sys.argv[2:] or list(CONFIGS)
    results = {}
    for n in (1000, 1024, 2048, 4096, 8192):
        a = cp.random.standard_normal((n, n))
        b = cp.random.standard_normal((n, n))
        at, bt = cp.ascontiguousarray(a.T), cp.ascontiguousarray(b.T)  # at.T is a, read M-contiguous
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        tref = ktime(lambda: cp.matmul(a, b), reps=5)
        layouts = {
            "ak_bn": ((a, (n, 1)), (b, (n, 1))),
            "ak_bk": ((a, (n, 1)), (bt, (1, n))),
            "am_bn": ((at, (1, n)), (b, (n, 1))),
            "am_bk": ((at, (1, n)), (bt, (1, n))),
        }
        rows = {"cublas_us": tref}
        for name in names:
            o = CONFIGS[name]
            for vec in (2,) if n % 2 == 0 else (1,):
                rows[f"{name}/ak_bn/v{vec}"] = run(name, o, n, "ak_bn", vec, layouts["ak_bn"], ref, tref, out)
        if n in (1000, 2048):  # every layout
            for lay in ("ak_bk", "am_bn", "am_bk"):
                for vec in (2, 1) if n % 2 == 0 else (1,):
                    for name in names[:2]:  # both MMA shapes: their shared layouts differ
                        rows[f"{name}/{lay}/v{vec}"] = run(
                            name, CONFIGS[name], n, lay, vec, layouts[lay], ref, tref, out
                        )
        results[n] = rows
        cp.get_default_memory_pool().free_all_blocks()
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
