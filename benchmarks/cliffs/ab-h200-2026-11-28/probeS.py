"""Probe S (session 21; probe R's harness on the split A/B cells): old tree vs new, whole calls, CUDA events, the reference in the same process."""

import json
import sys
import numpy as np
import cupy as cp
import polymm
from polymm.tools.explain import explain


def t_ev(f, calls=12):
    for _ in range(3):
        f()
    cp.cuda.runtime.deviceSynchronize()
    ts = []
    for _ in range(calls):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    return float(np.median(ts))


tree = sys.argv[1]
rows = []


def emit(**row):
    row["tree"] = tree
    print(json.dumps(row), flush=True)


for m, n, k in [(256, 256, 65536), (64, 64, 65536)]:
    a = cp.random.standard_normal((m, k)) + 1j * cp.random.standard_normal((m, k))
    b = cp.random.standard_normal((k, n)) + 1j * cp.random.standard_normal((k, n))
    reason = explain((m, k), (k, n), "complex128", backend="cuda").reason
    c = polymm.matmul(a, b)
    want = cp.matmul(a, b)
    err = float(cp.abs(c - want).max() / cp.abs(want).max())
    ours = min(t_ev(lambda: polymm.matmul(a, b)), t_ev(lambda: polymm.matmul(a, b)))
    ref = min(t_ev(lambda: cp.matmul(a, b)), t_ev(lambda: cp.matmul(a, b)))
    emit(part="complex128", m=m, n=n, k=k, ours_us=ours, ref_us=ref, ratio=ref / ours, err=err, reason=reason)

for dtype, (m, n, k) in [
    ("int16", (2048, 2048, 2048)),
    ("int32", (2048, 2048, 2048)),
    ("int64", (2048, 2048, 2048)),
    ("int16", (8192, 8192, 32)),
    ("int32", (8192, 8192, 32)),
    ("int32", (2048, 2048, 100)),
    ("int16", (4096, 4096, 30)),
    ("int32", (4096, 4096, 4096)),
    ("int16", (64, 512, 512)),
    ("int32", (32768, 256, 1024)),
]:
    info = np.iinfo(dtype)
    a = cp.random.randint(int(info.min), int(info.max), (m, k), dtype=np.int64).astype(dtype)
    b = cp.random.randint(int(info.min), int(info.max), (k, n), dtype=np.int64).astype(dtype)
    reason = explain((m, k), (k, n), dtype, backend="cuda").reason
    c = polymm.matmul(a, b)
    want = cp.matmul(a, b)
    same = bool((c == want).all())
    ours = min(t_ev(lambda: polymm.matmul(a, b)), t_ev(lambda: polymm.matmul(a, b)))
    ref = min(t_ev(lambda: cp.matmul(a, b)), t_ev(lambda: cp.matmul(a, b)))
    emit(part=dtype, m=m, n=n, k=k, ours_us=ours, ref_us=ref, ratio=ref / ours, exact=same, reason=reason)
