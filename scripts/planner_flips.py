#!/usr/bin/env python
"""The products whose plan the cost model changes, and what that costs: a check of the planner.

``cases`` lists, on a model H100 (:data:`polymm.tools.explain.MODEL_DEVICES`), the products of a
spread of shapes and layouts whose plan differs between the cost model's ranking and the ranking
with every tensor-core family preferred (``POLYMM_PREFER``: the order the planner had before the
cost model). ``time`` runs on a GPU, one mode per process: each listed product as a user calls
it (``polymm.matmul`` on CuPy arrays, CUDA events around the whole call, median of 25 after
warm-up), the kernel that ran and the largest error against a float64 product.

    python scripts/planner_flips.py cases CASES.json
    python scripts/planner_flips.py time cost CASES.json OUT-cost.json      # alternate the two modes,
    python scripts/planner_flips.py time prefer CASES.json OUT-prefer.json  # in fresh processes
"""

from __future__ import annotations

import json
import os
import sys

TENSOR_CORES = "wgmma,mma-sync,relayout,tf32"
DTYPES = [("float16", "default"), ("int8", "default"), ("uint8", "default"), ("float32", "tf32"), ("float32", "tf32x3")]


def _shapes(seed=5):
    import numpy as np

    rng = np.random.default_rng(seed)
    found = {
        (b, s, s, s)
        for s in (16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024)
        for b in (1, 2)
    }
    for _ in range(300):
        b = int(rng.choice([1, 1, 1, 2, 4, 16]))
        m, n = (
            int(x) for x in rng.choice([8, 16, 24, 32, 40, 64, 100, 128, 136, 200, 256, 300, 512, 1000, 2048, 4096], 2)
        )
        k = int(rng.choice([8, 16, 64, 72, 128, 136, 256, 520, 1032, 4096, 16384, 65536]))
        if b * m * n * k <= 2**34:
            found.add((b, m, n, k))
    return sorted(found)


def _layout(name, b, m, n, k):
    """(A's and B's element offsets and strides) of a layout as :func:`_operands` makes it."""
    row_a, row_b = (m * k, k, 1), (k * n, n, 1)
    return {
        "C": ((0, row_a), (0, row_b)),
        "AT": ((0, (m * k, 1, m)), (0, row_b)),
        "BT": ((0, row_a), (0, (k * n, 1, k))),
        "TT": ((0, (m * k, 1, m)), (0, (k * n, 1, k))),
        "off": ((1, (m * (k + 1), k + 1, 1)), (1, (k * (n + 1), n + 1, 1))),  # rows one longer, from the second
    }[name]


def cases(path):
    import numpy as np

    import polymm_cuda.backend  # noqa: F401  (registers CUDA's kernel families)
    from polymm.kernels import planner
    from polymm.precision import use_precision
    from polymm.tools.explain import _model_device

    device = _model_device("H100", "cuda")
    found = []
    for dtype, mode in DTYPES:
        for shape in _shapes():
            for layout in ("C", "AT", "BT", "TT", "off"):
                a, b = _layout(layout, *shape)
                picks = []
                for prefer in ("", TENSOR_CORES):
                    os.environ["POLYMM_PREFER"] = prefer
                    with use_precision(mode):
                        made = planner.plan(device, np.dtype(dtype), shape, a, b)
                    picks.append(made.choice.kernel + ("+relayout" if made.relayout else ""))
                if picks[0] != picks[1]:
                    found.append(
                        dict(dtype=dtype, precision=mode, shape=shape, layout=layout, cost=picks[0], prefer=picks[1])
                    )
    os.environ.pop("POLYMM_PREFER")
    with open(path, "w") as f:
        json.dump(found, f)
    print(f"{len(found)} products plan differently; written to {path}")


def _operands(cp, rng, dtype, layout, b, m, n, k):
    def make(rows, cols, transposed=False):
        x = cp.asarray(rng.integers(-3, 4, size=(b, cols, rows) if transposed else (b, rows, cols))).astype(dtype)
        return x.transpose(0, 2, 1) if transposed else x

    if layout == "off":
        return make(m, k + 1)[:, :, 1:], make(k, n + 1)[:, :, 1:]
    return make(m, k, layout in ("AT", "TT")), make(k, n, layout in ("BT", "TT"))


def time(mode, cases_path, out):
    if mode == "prefer":
        os.environ["POLYMM_PREFER"] = TENSOR_CORES
    import cupy as cp
    import numpy as np

    import polymm

    backend = polymm.get_backend("cuda")
    rng = np.random.default_rng(1)
    results = {}
    for case in json.load(open(cases_path)):
        b, m, n, k = case["shape"]
        x1, x2 = _operands(cp, rng, case["dtype"], case["layout"], b, m, n, k)
        key = f"{case['dtype']}|{case['precision']}|{tuple(case['shape'])}|{case['layout']}"
        with polymm.use_precision(case["precision"]):
            got = polymm.matmul(x1, x2)
            kernel = backend.last_plan.kernel
            err = 0.0
            if got.dtype.kind == "f":
                want = cp.matmul(x1.astype(cp.float64), x2.astype(cp.float64))
                err = float(cp.max(cp.abs(got - want)) / (float(cp.max(cp.abs(want))) or 1.0))
            start, end, times = cp.cuda.Event(), cp.cuda.Event(), []
            for i in range(28):
                start.record()
                polymm.matmul(x1, x2)
                end.record()
                end.synchronize()
                if i >= 3:
                    times.append(cp.cuda.get_elapsed_time(start, end) * 1e3)
        results[key] = {"kernel": kernel, "median_us": float(np.median(times)), "best_us": min(times), "err": err}
    with open(out, "w") as f:
        json.dump(results, f)
    print(f"{mode}: {len(results)} products timed; written to {out}")


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or ["--help"]
    if command == "cases" and len(rest) == 1:
        cases(*rest)
    elif command == "time" and len(rest) == 3 and rest[0] in ("cost", "prefer"):
        time(*rest)
    else:
        sys.exit(__doc__)
