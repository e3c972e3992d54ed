"""What a PyTorch user pays: polymm.matmul on PyTorch CUDA tensors, on CuPy arrays of the same
bits, and torch.matmul, float16 and bfloat16 squares (CUDA events around single calls, best of
30; a diagnostic of the handoff, not a cliff-suite cell).

    python scripts/torch_handoff.py
"""

from __future__ import annotations

import cupy as cp
import torch

import polymm
from polymm.backend import optional_dtypes


def best_us(fn, repeats=30) -> float:
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best * 1e3


def main() -> None:
    bf16 = optional_dtypes()[0]
    for n in (2048, 4096):
        a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
        ca, cb = (cp.from_dlpack(x.view(torch.int16)).view(bf16) for x in (a, b))
        ha, hb = a.half(), b.half()
        cases = (
            ("bf16 polymm torch tensors", lambda: polymm.matmul(a, b, backend="cuda")),
            ("bf16 polymm cupy", lambda: polymm.matmul(ca, cb, backend="cuda")),
            ("bf16 torch.matmul", lambda: torch.matmul(a, b)),
            ("f16 polymm torch", lambda: polymm.matmul(ha, hb, backend="cuda")),
            ("f16 torch.matmul", lambda: torch.matmul(ha, hb)),
        )
        for label, fn in cases:
            print(f"{n} {label}: {best_us(fn):.1f} us single call", flush=True)


if __name__ == "__main__":
    main()
