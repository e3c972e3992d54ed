"""Strided views on a CUDA GPU: polymm on the view, on contiguous copies, the copies alone, and the reference.

    python scripts/gpu_views_probe.py OUT.json        # on a machine with CuPy and an NVIDIA GPU

For each (dtype, size, layout) below: ``polymm.matmul`` on views of that layout (``step``: every
other column; ``negative``: rows reversed; ``transposed``, ``fortran``, ``c``), on their
contiguous copies made inside the timed call, on those copies made beforehand, the copies alone,
and the reference (``cupy.matmul`` on the views; PyTorch on the copies for bfloat16), each the
best of ``polymm.tools.timing.measure`` with CUDA events, and the plan's reason. It tells a planner
that reads a view in place from one that should copy it first (issue 30).
"""

import json
import sys

import numpy as np
import cupy as cp
import polymm
from polymm.tools import timing


def views(base, layout):
    if layout == "negative":
        return base[::-1, :]
    if layout == "step":
        return base[:, ::2]
    if layout == "transposed":
        return base.T
    if layout == "fortran":
        return cp.asfortranarray(base)
    return base


def main(path: str) -> None:
    ev = timing.cuda_clock()

    def t(fn):
        return timing.measure(fn, ev, budget=0.6).best * 1e3

    rows = []
    for dtype, n, layout in [
        ("complex128", 2048, "step"),
        ("complex128", 2048, "c"),
        ("bfloat16", 4096, "negative"),
        ("bfloat16", 4096, "step"),
        ("bfloat16", 4096, "c"),
        ("float16", 4096, "negative"),
        ("complex64", 2048, "step"),
        ("float64", 2048, "step"),
        ("int32", 2048, "transposed"),
        ("int32", 2048, "c"),
        ("float32", 2048, "negative"),
    ]:
        import ml_dtypes

        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
        rng = np.random.default_rng(0)
        shape = (n, 2 * n) if layout == "step" else (n, n)

        def mk():
            x = rng.standard_normal(shape).astype(np.float32)
            if dt.kind == "c":
                x = x + 1j * rng.standard_normal(shape).astype(np.float32)
            if dt.kind == "i":
                x = np.rint(x * 20)
            x = x.astype(dt)
            if dtype == "bfloat16":
                return cp.asarray(x.view(np.int16)).view(dt)
            return cp.asarray(x)

        A0, B0 = mk(), mk()
        A, B = views(A0, layout), views(B0, layout)
        out = cp.empty((n, n), cp.int16).view(dt) if dtype == "bfloat16" else cp.empty((n, n), dt)
        polymm.matmul(A, B, out=out)
        cp.cuda.Device().synchronize()
        plan = polymm.get_backend("cuda").last_plan

        def contig(x):
            if dtype == "bfloat16":
                return cp.ascontiguousarray(x.view(cp.int16)).view(dt)
            return cp.ascontiguousarray(x)

        Ac, Bc = contig(A), contig(B)
        row = {
            "dtype": dtype,
            "n": n,
            "layout": layout,
            "plan": f"{plan.kernel}: {plan.reason}"[:300],
            "view_ms": t(lambda: polymm.matmul(A, B, out=out)),
            "copies_then_contig_ms": t(lambda: polymm.matmul(contig(A), contig(B), out=out)),
            "contig_ms": t(lambda: polymm.matmul(Ac, Bc, out=out)),
            "copy_ms": t(lambda: (contig(A), contig(B))),
        }
        if dtype != "bfloat16":
            try:
                row["cupy_view_ms"] = t(lambda: cp.matmul(A, B))
            except Exception as e:
                row["cupy_view_ms"] = repr(e)[:80]
        else:
            import torch

            At = torch.from_dlpack(Ac.view(cp.int16)).view(torch.bfloat16)
            Bt = torch.from_dlpack(Bc.view(cp.int16)).view(torch.bfloat16)
            row["torch_contig_ms"] = t(lambda: torch.matmul(At, Bt))
        print(json.dumps(row), flush=True)
        rows.append(row)
    json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
