"""complex128 whole calls and GPU time with the wide unswapped tiles (``polymm_cuda.tensorcore.
DMMAZ_WIDE_UNSWAPPED``) on and off, against ``cupy.matmul`` (ZGEMM), the two settings measured in
turn twice (sweep.py's ``call_and_gpu_times``: medians of 31 whole calls, GPU time best of 3 x 10).

    . .device/setup.sh && python .device/probe43.py
"""

import sys

sys.path.insert(0, ".device")
import cupy as cp  # noqa: E402
from sweep import call_and_gpu_times  # noqa: E402

import polymm  # noqa: E402
from polymm.registry import _replays  # noqa: E402
from polymm_cuda import tensorcore  # noqa: E402

CASES = [  # (batch, M, K, N)
    (1, 1024, 1024, 1024),
    (1, 2048, 2048, 2048),
    (64, 512, 512, 512),
    (1, 8192, 4096, 256),
    (1, 3000, 3000, 3000),
    (8, 1024, 1024, 1024),
]


def main():
    be = polymm.get_backend("cuda")
    rng = cp.random.default_rng(5)
    for bt, m, k, n in CASES:
        shape_a, shape_b = ((bt, m, k), (bt, k, n)) if bt > 1 else ((m, k), (k, n))
        a = rng.standard_normal(shape_a) + 1j * rng.standard_normal(shape_a)
        b = rng.standard_normal(shape_b) + 1j * rng.standard_normal(shape_b)
        ref = cp.matmul(a, b)
        rows = {}
        for _ in range(2):
            for wide in (False, True):
                tensorcore.DMMAZ_WIDE_UNSWAPPED = wide
                be._plans.clear()
                _replays.clear()  # the front door's replayed products too
                c = polymm.matmul(a, b)
                assert float(cp.abs(c - ref).max() / cp.abs(ref).max()) < 1e-13
                reason = be.last_plan.reason
                assert ("64 x 128" in reason) == wide, reason  # every case here takes them when allowed
                calls, gpu = call_and_gpu_times(
                    {"cupy": lambda: cp.matmul(a, b), "polymm": lambda: polymm.matmul(a, b)}
                )
                rows.setdefault(wide, []).append((calls["polymm"], calls["cupy"], gpu["polymm"], gpu["cupy"], reason))
        print(f"== complex128 {bt} x {m}x{k} @ {k}x{n}", flush=True)
        for wide, rs in rows.items():
            for call, ref_call, g, ref_g, reason in rs:
                print(
                    f"  {'wide unswapped' if wide else '64 x 64 swapped':16s} call {call:9.1f} us ({ref_call / call:.3f}x)"
                    f"  GPU {g:9.1f} us ({ref_g / g:.3f}x)  [{reason[:60]}]",
                    flush=True,
                )


if __name__ == "__main__":
    main()
