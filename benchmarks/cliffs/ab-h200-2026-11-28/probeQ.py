"""Probe Q (session 21): tf32 at N = 4 mod 8, dmma slice counts on deep K, bf16 batch-small."""

import json
import sys
import numpy as np
import cupy as cp
import polymm
from polymm.tools.explain import explain


def t_ev(f, calls=15):
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


mode = sys.argv[1]
out = []
if mode == "tf32":
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    for m, n, k in [
        (4096, 4096, 4096),
        (4092, 4092, 4092),
        (4092, 4096, 4096),
        (4096, 4092, 4096),
        (4096, 4096, 4092),
        (4093, 4093, 4093),
        (2044, 2044, 2044),
        (2048, 2048, 2048),
        (8188, 8188, 8188),
    ]:
        a = cp.random.standard_normal((m, k), dtype=cp.float32)
        b = cp.random.standard_normal((k, n), dtype=cp.float32)
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        with polymm.use_precision("tf32"):
            reason = explain((m, k), (k, n), "float32", backend="cuda").reason
            ours = t_ev(lambda: polymm.matmul(a, b))
            ours2 = t_ev(lambda: polymm.matmul(a, b))
        ref = t_ev(lambda: torch.matmul(ta, tb))
        ours = min(ours, ours2)
        row = dict(m=m, n=n, k=k, ours_us=ours, torch_us=ref, ratio=ref / ours, reason=reason)
        print(json.dumps(row), flush=True)
        out.append(row)
elif mode == "dmma":
    S = int(sys.argv[2])
    import polymm_cuda.tensorcore as tc

    if S:
        tc.dmma_splits = lambda shape, device: S
    for dtype, (m, n, k) in [
        ("complex128", (256, 256, 65536)),
        ("float64", (256, 256, 65536)),
        ("complex128", (256, 256, 32768)),
        ("float64", (128, 128, 65536)),
    ]:
        if dtype == "complex128":
            a = cp.random.standard_normal((m, k)) + 1j * cp.random.standard_normal((m, k))
            b = cp.random.standard_normal((k, n)) + 1j * cp.random.standard_normal((k, n))
        else:
            a = cp.random.standard_normal((m, k))
            b = cp.random.standard_normal((k, n))
        reason = explain((m, k), (k, n), dtype, backend="cuda").reason
        c = polymm.matmul(a, b)
        want = cp.matmul(a, b)
        err = float(cp.abs(c - want).max() / cp.abs(want).max())
        ours = min(t_ev(lambda: polymm.matmul(a, b)), t_ev(lambda: polymm.matmul(a, b)))
        ref = min(t_ev(lambda: cp.matmul(a, b)), t_ev(lambda: cp.matmul(a, b)))
        row = dict(S=S, dtype=dtype, m=m, n=n, k=k, ours_us=ours, ref_us=ref, ratio=ref / ours, err=err, reason=reason)
        print(json.dumps(row), flush=True)
elif mode == "bf16":
    import torch
    import ml_dtypes

    for shape in [(8192, 64, 64), (4096, 128, 128), (16384, 32, 32)]:
        bt, n, _ = shape
        ta = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        tb = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        a = cp.asarray(ta.view(torch.int16)).view(ml_dtypes.bfloat16) if False else ta
        reason = explain(shape, shape, "bfloat16", backend="cuda").reason
        ours = min(t_ev(lambda: polymm.matmul(ta, tb)), t_ev(lambda: polymm.matmul(ta, tb)))
        ref = min(t_ev(lambda: torch.matmul(ta, tb)), t_ev(lambda: torch.matmul(ta, tb)))
        row = dict(shape=shape, ours_us=ours, torch_us=ref, ratio=ref / ours, reason=reason)
        print(json.dumps(row), flush=True)
