"""Worst relative error against K of each precision mode on this GPU, as JSON (the measured points
of docs/figures/precision.png, over the NumPy emulation and the documented bounds).

    POLYMM_CUDA_TF32_MIN_WORK=0 POLYMM_PREFER=tf32 python scripts/precision_error.py OUT.json

``POLYMM_CUDA_TF32_MIN_WORK=0`` lets the tensor-core paths offer the small-K products too and
``POLYMM_PREFER=tf32`` makes them win (by default those run on the SIMT kernels in float32, which
says nothing about TF32).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

import cupy as cp
import numpy as np

import polymm
from polymm.precision import PRECISIONS


def main(path: str) -> None:
    rng = np.random.default_rng(2026)
    ks = [2**p for p in range(3, 15)]
    rows = {mode: [] for mode in PRECISIONS}
    kernels = {mode: [] for mode in PRECISIONS}
    impl = polymm.get_backend("cuda")
    for k in ks:
        a = rng.standard_normal((256, k)).astype(np.float32)
        b = rng.standard_normal((k, 256)).astype(np.float32)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        da, db = cp.asarray(a), cp.asarray(b)
        for mode in PRECISIONS:
            got = cp.asnumpy(polymm.matmul(da, db, backend="cuda", precision=mode))
            rows[mode].append(float((np.abs(got - exact) / scale).max()))
            kernels[mode].append(impl.last_plan.kernel)
    doc = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": impl.devices()[0],
        "command": "POLYMM_CUDA_TF32_MIN_WORK=0 POLYMM_PREFER=tf32 python scripts/precision_error.py OUT.json",
        "shape": "(256, K) @ (K, 256), standard normal float32",
        "k": ks,
        "worst_relative_error": rows,
        "kernel": kernels,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    for mode in PRECISIONS:
        print(mode, " ".join(f"{e:.2e}" for e in rows[mode]), kernels[mode][-1])


if __name__ == "__main__":
    main(sys.argv[1])
