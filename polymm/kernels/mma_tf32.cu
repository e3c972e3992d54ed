/* mma_tf32: float32 products on the TF32 tensor cores with mma.sync.m16n8k8 (sm_80 and up).
 *
 * Not planned: compiled in CI (nvcc, backends/polymm-cuda/tests/test_compile.py) and checked on
 * the H100 by backends/polymm-cuda/tests/test_device.py, but no backend runs it (on Hopper the
 * CUDA backend runs the precision modes on wgmma: polymm_cuda/wgmma.py).
 *
 * PM_MMA_SPLIT 0, precision "tf32": each float32 input rounded to TF32 (cvt.rna: to nearest, ties
 *   away from zero; the error bound is that of rounding to nearest even), one product
 *   per step, float32 accumulation.
 * PM_MMA_SPLIT 1, precision "tf32x3": each input x split into big = tf32(x) and
 *   small = tf32(x - big); per step big*small + small*big first, then big*big, all into one
 *   float32 accumulator (small*small is below float32's rounding).  polymm.precision documents
 *   the error bound of each mode; polymm.testing.emulation is this arithmetic in NumPy.
 *
 * Interface: the shared kernel signature for float32 (polymm/kernels/__init__.py), any
 * strides: C[b, m, n] = sum_k A[b, m, k] * B[b, k, n], batch = blockIdx.z, C contiguous.
 *
 * Block: 256 threads = 8 warps as 2 (M) x 4 (N) over a 64 x 64 tile of C; each warp owns
 * 32 x 16 = 2 x 2 fragments of 16 x 8.  One K step of 8 per stage, staged in shared memory
 * with zero fill outside the matrices (any size).  Fragment layout of m16n8k8 (PTX ISA,
 * "Matrix Fragments for mma.m16n8k8"): with g = lane / 4 and t = lane % 4,
 *   A (16 x 8, row): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
 *   B (8 x 8, col):  b0 (t, g), b1 (t + 4, g)
 *   C (16 x 8):      c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1) */
#ifndef PM_MMA_SPLIT
#define PM_MMA_SPLIT 0
#endif
#define MMA_BM 64
#define MMA_BN 64
#define MMA_BK 8
#define MMA_PAD 4 /* shared rows padded against bank conflicts of the fragment loads */

__device__ __forceinline__ unsigned pm_to_tf32(float x) {
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
}

/* x as TF32: big = tf32(x); with the split, small = tf32(x - big) too (else small is unused). */
__device__ __forceinline__ void pm_tf32_parts(float x, unsigned& big, unsigned& small) {
    big = pm_to_tf32(x);
    small = PM_MMA_SPLIT ? pm_to_tf32(x - __uint_as_float(big)) : 0u;
}

__device__ __forceinline__ void pm_mma_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ __launch_bounds__(256) void polymm_mma_tf32(
    const int M, const int N, const int K,
    const float* __restrict__ A, const long long a_off, const long long a_sb, const long long a_sm,
    const long long a_sk,
    const float* __restrict__ B, const long long b_off, const long long b_sb, const long long b_sk,
    const long long b_sn,
    float* __restrict__ C, const long long c_off)
{
    __shared__ float tile_a[MMA_BM][MMA_BK + MMA_PAD];
    __shared__ float tile_b[MMA_BK][MMA_BN + MMA_PAD];
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int warp_m = (warp >> 2) * 32, warp_n = (warp & 3) * 16;
    const int m0 = blockIdx.y * MMA_BM, n0 = blockIdx.x * MMA_BN;
    const long long batch = blockIdx.z;
    const float* a_base = A + a_off + batch * a_sb;
    const float* b_base = B + b_off + batch * b_sb;

    float acc[2][2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += MMA_BK) {
        /* 512 elements of each tile, two per thread; A along K fastest, B along N fastest */
#pragma unroll
        for (int e = tid; e < MMA_BM * MMA_BK; e += 256) {
            const int r = e / MMA_BK, kk = e % MMA_BK;
            const int m = m0 + r, k = k0 + kk;
            tile_a[r][kk] = (m < M && k < K) ? a_base[(long long)m * a_sm + (long long)k * a_sk] : 0.0f;
        }
#pragma unroll
        for (int e = tid; e < MMA_BK * MMA_BN; e += 256) {
            const int kk = e / MMA_BN, c = e % MMA_BN;
            const int k = k0 + kk, n = n0 + c;
            tile_b[kk][c] = (k < K && n < N) ? b_base[(long long)k * b_sk + (long long)n * b_sn] : 0.0f;
        }
        __syncthreads();
        unsigned a_big[2][4], b_big[2][2], a_small[2][4], b_small[2][2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int r = warp_m + i * 16 + g;
            pm_tf32_parts(tile_a[r][t], a_big[i][0], a_small[i][0]);
            pm_tf32_parts(tile_a[r + 8][t], a_big[i][1], a_small[i][1]);
            pm_tf32_parts(tile_a[r][t + 4], a_big[i][2], a_small[i][2]);
            pm_tf32_parts(tile_a[r + 8][t + 4], a_big[i][3], a_small[i][3]);
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int c = warp_n + j * 8 + g;
            pm_tf32_parts(tile_b[t][c], b_big[j][0], b_small[j][0]);
            pm_tf32_parts(tile_b[t + 4][c], b_big[j][1], b_small[j][1]);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
#if PM_MMA_SPLIT
                pm_mma_tf32(acc[i][j], a_big[i], b_small[j]);
                pm_mma_tf32(acc[i][j], a_small[i], b_big[j]);
#endif
                pm_mma_tf32(acc[i][j], a_big[i], b_big[j]);
            }
        __syncthreads();
    }

    float* c_base = C + c_off + batch * (long long)M * N;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int m = m0 + warp_m + i * 16 + g + (r >= 2 ? 8 : 0);
                const int n = n0 + warp_n + j * 8 + 2 * t + (r & 1);
                if (m < M && n < N) c_base[(long long)m * N + n] = acc[i][j][r];
            }
}
