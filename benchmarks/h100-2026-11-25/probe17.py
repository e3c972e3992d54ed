"""Probe 17 (H100, fifth session): what each FP64 tensor-core instruction can do on its own.

Every warp keeps T independent accumulators of one ``mma.sync`` f64 shape and issues them round
after round from registers (no memory traffic), on 132 x B blocks of W warps; TFLOP/s from CUDA
events. Then one product of each shape against NumPy checks the fragment layout polymm's
``kernels/dmma.cu`` assumes: A[g + 8 (r % 2)][q + 4 (r / 2)], B[q + 4 r][g],
C[g + 8 (c / 2)][2 q + c % 2] with g = lane / 4, q = lane % 4.

    . .device/setup.sh && python probe17.py
"""

import cupy as cp
import numpy as np

SHAPES = {884: (8, 8, 4), 1684: (16, 8, 4), 1688: (16, 8, 8), 16816: (16, 8, 16)}

SRC = r"""
#define M_ %(m)d
#define K_ %(k)d
#define AR (M_ * K_ / 32)
#define BR (K_ / 4)
#define CR (M_ / 4)
__device__ __forceinline__ void mma(double (&d)[CR], const double (&a)[AR], const double (&b)[BR]) {
#if M_ == 8
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%%0,%%1}, {%%2}, {%%3}, {%%0,%%1};"
                 : "+d"(d[0]), "+d"(d[1]) : "d"(a[0]), "d"(b[0]));
#elif K_ == 4
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%%0,%%1,%%2,%%3}, {%%4,%%5}, {%%6}, {%%0,%%1,%%2,%%3};"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3]) : "d"(a[0]), "d"(a[1]), "d"(b[0]));
#elif K_ == 8
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, {%%8,%%9}, {%%0,%%1,%%2,%%3};"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3]) : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7,%%8,%%9,%%10,%%11}, {%%12,%%13,%%14,%%15}, {%%0,%%1,%%2,%%3};"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
#endif
}
extern "C" __global__ void rate(double* out, int rounds) {
    double a[AR], b[BR], d[%(t)d][CR];
    for (int r = 0; r < AR; ++r) a[r] = 1e-3 * (threadIdx.x + r);
    for (int r = 0; r < BR; ++r) b[r] = 1e-3 * (threadIdx.x - r);
    for (int t = 0; t < %(t)d; ++t) for (int c = 0; c < CR; ++c) d[t][c] = 0.0;
    for (int i = 0; i < rounds; ++i) {
#pragma unroll
        for (int t = 0; t < %(t)d; ++t) mma(d[t], a, b);
    }
    double s = 0.0;
    for (int t = 0; t < %(t)d; ++t) for (int c = 0; c < CR; ++c) s += d[t][c];
    if (s == 12345.678) out[0] = s;
}
extern "C" __global__ void layout(const double* A, const double* B, double* C) {
    const int lane = threadIdx.x, g = lane / 4, q = lane %% 4;
    double a[AR], b[BR], d[CR];
    for (int r = 0; r < AR; ++r) a[r] = A[(M_ == 8 ? g : g + 8 * (r %% 2)) * K_ + q + 4 * (M_ == 8 ? 0 : r / 2)];
    for (int r = 0; r < BR; ++r) b[r] = B[(q + 4 * r) * 8 + g];
    for (int c = 0; c < CR; ++c) d[c] = 0.0;
    mma(d, a, b);
    for (int c = 0; c < CR; ++c) C[(g + 8 * (c / 2)) * 8 + 2 * q + c %% 2] = d[c];
}
"""


def main() -> None:
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    print("device", cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "SMs", sms, flush=True)
    out = cp.zeros(1)
    rng = np.random.default_rng(1)
    for shape, (m, n, k) in SHAPES.items():
        for t in (4, 8, 16):
            mod = cp.RawModule(code=SRC % {"m": m, "k": k, "t": t}, options=("-arch=sm_90",))
            fn = mod.get_function("rate")
            if t == 4:
                lay = mod.get_function("layout")
                a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
                c = cp.full((m, n), np.nan)
                lay((1,), (32,), (cp.asarray(a), cp.asarray(b), c))
                err = float(np.max(np.abs(c.get() - a @ b)))
                print(f"m{shape} layout max error {err:.1e}", flush=True)
            for warps, per_sm in ((4, 1), (4, 2), (8, 1), (8, 2), (4, 4)):
                rounds = 4096
                blocks = sms * per_sm
                fn((blocks,), (32 * warps,), (out, np.int32(rounds)))
                best = 1e9
                for _ in range(3):
                    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                    e0.record()
                    fn((blocks,), (32 * warps,), (out, np.int32(rounds)))
                    e1.record()
                    e1.synchronize()
                    best = min(best, cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
                flops = 2.0 * m * n * k * t * rounds * blocks * warps
                print(
                    f"m{shape:<5d} T={t:2d} warps/SM={warps * per_sm:2d} ({per_sm} x {warps}) "
                    f"{flops / best / 1e12:6.1f} TFLOP/s  regs {fn.num_regs}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
