"""Diagnostic (session 3 of 2026-11-25): where the host's time goes in one call on the wgmma path
(float16 1024: the GPU's part, 7.6 us, is shorter than the host's, so the loop is host-bound).
Each line times a loop of 3000 calls of one stage (stages nest: each includes the ones below it),
as microseconds per call, best of 5 loops; ``polymm.matmul`` on CuPy arrays and on PyTorch
bfloat16 tensors, against ``cupy.matmul`` / ``torch.matmul`` and a bare launch."""

from __future__ import annotations

import time

import cupy as cp
import numpy as np
import torch

import polymm
from polymm import dispatch
from polymm.arrays import PLAIN_TYPES
from polymm.registry import get_backend


def per_call(fn, n=3000) -> float:
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


def show(name, fn):
    print(f"{name:58s} {per_call(fn):6.2f} us", flush=True)


n = 1024
rng = np.random.default_rng(3)
a, b = (cp.asarray(rng.standard_normal((n, n)).astype(np.float16)) for _ in range(2))
out = cp.empty((n, n), np.float16)
polymm.matmul(a, b)  # registers CuPy's adapter for the short path
kind = PLAIN_TYPES[cp.ndarray]
impl = get_backend("cuda")
print("plan:", impl.last_plan.kernel)
show("cupy.matmul", lambda: cp.matmul(a, b))
show("polymm.matmul", lambda: polymm.matmul(a, b))
show("dispatch._matmul_plain", lambda: dispatch._matmul_plain(kind, a, b, None, "auto"))
show("  cupy.empty", lambda: cp.empty((n, n), np.float16))
show("  kind.empty", lambda: kind.empty((n, n), np.dtype(np.float16), like=a))
show(
    "  dispatch._plain_operand x2", lambda: (dispatch._plain_operand(a, 2, True), dispatch._plain_operand(b, 2, False))
)
oa, ob, oc = (kind.operand(x, (1, n, n), (0, n, 1)) for x in (a, b, out))
show("  kind.operand x3", lambda: [kind.operand(x, (1, n, n), (0, n, 1)) for x in (a, b, out)])
show("  get_backend(selected_backend)", lambda: get_backend(dispatch.selected_backend(None, "cupy")))
show("  impl.matmul (operands made)", lambda: impl.matmul(oa, ob, oc, "auto"))
dev = 0
show("    impl._planned", lambda: impl._planned(dev, oa, ob, "auto", repack=True))
found = impl._planned(dev, oa, ob, "auto", repack=True)
show("    impl._run", lambda: impl._run(dev, found, oa, ob, oc))
steps = found[0]
isz = 2
buffers = [np.uint64(oa.buffer.data.ptr), np.uint64(ob.buffer.data.ptr), np.uint64(oc.buffer.data.ptr)]
show("      impl._enqueue", lambda: impl._enqueue(steps, buffers))
stream = cp.cuda.get_current_stream().ptr
maps = steps[0].maps[1] if steps[0].maps else ()
show("        Prepared.__call__", lambda: steps[0].prepared(buffers, stream, maps))
show("        cupy.cuda.get_current_stream().ptr", lambda: cp.cuda.get_current_stream().ptr)
show("        runtime.getDevice()", lambda: cp.cuda.runtime.getDevice())
show("  three np.uint64 of addresses", lambda: [np.uint64(x.buffer.data.ptr) for x in (oa, ob, oc)])
show("  polymm.precision.current()", polymm.precision.current)

ta, tb = (torch.randn(n, n, device="cuda").to(torch.bfloat16) for _ in range(2))
polymm.matmul(ta, tb)
print("plan:", impl.last_plan.kernel)
native = dispatch._VIEWERS[torch.Tensor]
show("torch.matmul (bfloat16)", lambda: torch.matmul(ta, tb))
show("polymm.matmul (torch bfloat16)", lambda: polymm.matmul(ta, tb))
show("  native.same_stream", lambda: native.same_stream(ta))
show("  native.view_foreign x2", lambda: (native.view_foreign(ta), native.view_foreign(tb)))
show("  ta.new_empty", lambda: ta.new_empty((n, n)))
va, vb = native.view_foreign(ta), native.view_foreign(tb)
vr = native.view_foreign(ta.new_empty((n, n)))
show("  dispatch._matmul_plain (views)", lambda: dispatch._matmul_plain(native, va, vb, None, "auto", out=vr))
