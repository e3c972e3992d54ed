"""The shared regblock kernel before and after its loads walk K by pointer (interior blocks,
whole K steps: no bounds checks, no offsets recomputed each step), float32 squares and
column-major operands with the H100 table's tile, kernels alone (sweep.py's ``ktime``) against
cuBLAS on the same operands, the two versions interleaved twice; every result checked against
cuBLAS's. ``regblock_before.c``: the kernel body of the tree before (``git show
a319d70:polymm/kernels/regblock.c``), copied into ``.device/``.

    . .device/setup.sh && python .device/probe39.py
"""

import sys

sys.path.insert(0, ".device")
import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from sweep import ktime  # noqa: E402

import polymm  # noqa: E402
import polymm.kernels as kernels  # noqa: E402
from polymm.kernels import KernelParams  # noqa: E402

TABLE = KernelParams(mwg=128, nwg=128, kwg=8, mdimc=16, ndimc=16, vw=4, gvw=4, pad=4, maxrreg=128, group=8)
READ = kernels._read
BEFORE = open(".device/regblock_before.c").read()


def use(version, be):
    kernels._read = READ if version == "after" else (lambda f: BEFORE if f == "regblock.c" else READ(f))
    be._kernels.clear()


def main():
    be = polymm.get_backend("cuda")
    for n, layout in [(2048, "c"), (4096, "c"), (8192, "c"), (4096, "f"), (2048, "t"), (4095, "c")]:
        a = cp.random.standard_normal((n, n), dtype=cp.float32)
        b = cp.random.standard_normal((n, n), dtype=cp.float32)
        if layout == "f":
            a, b = cp.asfortranarray(a), cp.asfortranarray(b)
        elif layout == "t":
            a = cp.asfortranarray(a)
        ref = cp.matmul(a, b)
        out = cp.empty_like(ref)
        times = {"before": [], "after": [], "cublas": []}
        for _ in range(2):
            times["cublas"].append(ktime(lambda: cp.matmul(a, b)))
            for version in ("before", "after"):
                use(version, be)
                out.fill(np.nan)
                times[version].append(ktime(lambda: be.launch(a[None], b[None], out[None], "regblock", TABLE), reps=5))
                err = float(cp.abs(out - ref).max() / cp.abs(ref).max())
                assert err < 1e-4, (version, n, layout, err)
        ref_t = min(times["cublas"])
        line = " ".join(f"{v} {min(t):8.1f} us ({ref_t / min(t):.3f}x)" for v, t in times.items() if v != "cublas")
        print(f"float32 {n} {layout}: cuBLAS {ref_t:8.1f} us; {line}", flush=True)
    use("after", be)


if __name__ == "__main__":
    main()
