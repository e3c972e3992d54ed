// polymm CUDA-only FP64 tensor-core path: float64 products through `mma.sync` on `.f64`
// (sm_80 and later). Each DMMA is an exact IEEE double fused multiply-add per element, so the
// result is a float64 product like any other: the contract's float64 precision, nothing traded.
//
// Shapes (DM_MMA): m8n8k4 (884, the only one before sm_90) or Hopper's m16n8k4 (1684) and
// m16n8k8 (1688). Kernels alone on the H100 (2026-11-24, benchmarks/h100-2026-11-24/sweeps/
// sweep.py dmma-shapes), against cuBLAS DGEMM at 2048 / 4096 / 8192: m8n8k4 0.40x / 0.42x / 0.44x,
// m16n8k4 0.59x / 0.61x / 0.58x, m16n8k8 0.54x / 0.50x / 0.43x (it spills under the two-block
// register budget; with one block per SM neither m16n8 shape passes 0.53x). Default: 1684 on
// sm_90 and later, 884 before. m16n8k4 spills 16-36 bytes (not accumulators) with the K loop
// unrolled whole, and is still faster than unrolled by two without spills (0.59-0.61x against
// 0.53-0.55x, sweep.py dmma-unroll).
//
// Tiling. A block of 256 threads (8 warps, 2 x 4) computes a 64 x 128 tile of C; each warp a
// 32 x 32 sub-tile as (32 / DM_TM) x 4 MMA tiles of DM_TM x 8 (32 double accumulators per
// thread). K is walked in slices of 16 through a ring of DM_STAGES shared-memory stages filled by
// 8-byte `cp.async` copies, one element each: any strides (transposed, negative, sliced) are read
// in place, and the threads of a warp walk the operand's unit-stride axis when it has one (DM_AK /
// DM_BN say which), so the copies coalesce.
//
// Fragments (row.col), with g = lane / 4 and q = lane % 4: a lane holds A[g + 8 (r % 2)][q + 4 (r / 2)]
// for r < DM_AR, B[q + 4 r][g] for r < DM_BR and C[g + 8 (c / 2)][2 q + c % 2] for c < DM_R (the
// m8n8k4 layout is the case of one A, one B and two C values). Shared rows are padded by 4
// doubles, so that the 16 lanes of each half-warp read 16 different bank pairs.
//
// Two blocks per SM (launch bounds: 128 registers, no spills; 2 x 81 KiB of shared memory).
// The kernel argument list is the one every polymm CUDA kernel takes. No #include
// (async_copy.cuh comes first).

#ifndef DM_MMA
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DM_MMA 1684
#else
#define DM_MMA 884
#endif
#endif
#if DM_MMA == 884
#define DM_TM 8
#define DM_TK 4
#elif DM_MMA == 1684
#define DM_TM 16
#define DM_TK 4
#else
#define DM_TM 16
#define DM_TK 8
#endif
#define DM_AR (DM_TM * DM_TK / 32)  // A values per lane and MMA: 1, 2 or 4
#define DM_BR (DM_TK / 4)           // B values: 1 or 2
#define DM_R (DM_TM / 4)            // C values: 2 or 4
#ifndef DM_WM
#define DM_WM 32  // rows of C per warp; 64 (128-row blocks, one per SM) was no faster (sweep.py dmma-warps)
#endif
#define DM_I (DM_WM / DM_TM)        // MMA tiles along M per warp
#ifndef DM_MINB
#define DM_MINB 2  // blocks per SM the register budget is cut for
#endif

#define DM_BM (2 * DM_WM)
#define DM_BN 128
#define DM_BK 16
#define DM_THREADS 256
#ifndef DM_STAGES
#define DM_STAGES 3
#endif
#define DM_APAD (DM_BK + 4)  // A stored [m][k]
#define DM_BPAD (DM_BN + 4)  // B stored [k][n]
#define DM_A_STAGE (DM_BM * DM_APAD)
#define DM_B_STAGE (DM_BK * DM_BPAD)

__device__ __forceinline__ void dm_mma(double (&d)[DM_R], const double (&a)[DM_AR], const double (&b)[DM_BR]) {
#if DM_MMA == 884
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a[0]), "d"(b[0]));
#elif DM_MMA == 1684
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]));
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#endif
}

// AK: A is read with consecutive threads along K (else along M); BN: B with consecutive threads
// along N (else along K). The host picks them from the strides.
template <bool AK, bool BN>
__device__ __forceinline__ void dm_gemm(int M, int N, int K, const double* __restrict__ A, pm_i64 sa0, pm_i64 sa1,
                                        pm_i64 sa2, const double* __restrict__ B, pm_i64 sb0, pm_i64 sb1,
                                        pm_i64 sb2, double* __restrict__ C) {
    extern __shared__ __align__(16) double dm_smem[];  // DM_STAGES * (A stage + B stage): 81 KiB
    double* sA = dm_smem;
    double* sB = dm_smem + DM_STAGES * DM_A_STAGE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps: 32 x 32 each
    const int m0 = blockIdx.y * DM_BM, n0 = blockIdx.x * DM_BN;
    const pm_i64 z = blockIdx.z;
    A += z * sa0;
    B += z * sb0;
    C += z * (pm_i64)M * N;
    const int kt_count = (K + DM_BK - 1) / DM_BK;

    auto load_slice = [&](int stage, int kt) {
        const int k0 = kt * DM_BK;
        const unsigned dA = pm_smem_addr(sA + stage * DM_A_STAGE);
        const unsigned dB = pm_smem_addr(sB + stage * DM_B_STAGE);
#pragma unroll
        for (int h = 0; h < DM_BM * DM_BK / DM_THREADS; ++h) {  // 4 (or 8) elements of A each
            const int e = tid + h * DM_THREADS;
            const int r = AK ? e / DM_BK : e % DM_BM, c = AK ? e % DM_BK : e / DM_BM;
            const int gm = m0 + r, gk = k0 + c;
            const bool ok = gm < M && gk < K;
            pm_cp_async<8>(dA + (r * DM_APAD + c) * 8, ok ? A + gm * sa1 + gk * sa2 : A, ok);
        }
#pragma unroll
        for (int h = 0; h < DM_BK * DM_BN / DM_THREADS; ++h) {  // 8 elements of B each
            const int e = tid + h * DM_THREADS;
            const int r = BN ? e / DM_BN : e % DM_BK, c = BN ? e % DM_BN : e / DM_BK;
            const int gk = k0 + r, gn = n0 + c;
            const bool ok = gk < K && gn < N;
            pm_cp_async<8>(dB + (r * DM_BPAD + c) * 8, ok ? B + gk * sb1 + gn * sb2 : B, ok);
        }
    };

    double acc[DM_I][4][DM_R];
#pragma unroll
    for (int i = 0; i < DM_I; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < DM_R; ++c) acc[i][j][c] = 0.0;

#pragma unroll
    for (int s = 0; s < DM_STAGES - 1; ++s) {
        if (s < kt_count) load_slice(s, s);
        pm_cp_commit();
    }
    const int g = lane >> 2, q = lane & 3;
    for (int kt = 0; kt < kt_count; ++kt) {
        pm_cp_wait<DM_STAGES - 2>();
        __syncthreads();
        const int next = kt + DM_STAGES - 1;
        if (next < kt_count) load_slice(next % DM_STAGES, next);
        pm_cp_commit();

        const double* cA = sA + (kt % DM_STAGES) * DM_A_STAGE + (wm * DM_WM + g) * DM_APAD + q;
        const double* cB = sB + (kt % DM_STAGES) * DM_B_STAGE + q * DM_BPAD + wn * 32 + g;
#pragma unroll
        for (int ks = 0; ks < DM_BK; ks += DM_TK) {
            double af[DM_I][DM_AR], bf[4][DM_BR];
#pragma unroll
            for (int i = 0; i < DM_I; ++i)
#pragma unroll
                for (int r = 0; r < DM_AR; ++r) af[i][r] = cA[(i * DM_TM + 8 * (r % 2)) * DM_APAD + ks + 4 * (r / 2)];
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int r = 0; r < DM_BR; ++r) bf[j][r] = cB[(ks + 4 * r) * DM_BPAD + j * 8];
#pragma unroll
            for (int i = 0; i < DM_I; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) dm_mma(acc[i][j], af[i], bf[j]);
        }
    }
    pm_cp_wait<0>();

#pragma unroll
    for (int i = 0; i < DM_I; ++i) {
#pragma unroll
        for (int h = 0; h < DM_R / 2; ++h) {  // the 8-row halves of a 16-row tile
            const int row = m0 + wm * DM_WM + i * DM_TM + 8 * h + g;
            if (row >= M) continue;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int col = n0 + wn * 32 + j * 8 + 2 * q;
                if (col < N) C[(pm_i64)row * N + col] = acc[i][j][2 * h];
                if (col + 1 < N) C[(pm_i64)row * N + col + 1] = acc[i][j][2 * h + 1];
            }
        }
    }
}

#define DM_KERNEL(NAME, AK, BN)                                                                          \
    extern "C" __global__ void __launch_bounds__(DM_THREADS, DM_MINB)                                           \
        NAME(int M, int N, int K, const double* __restrict__ A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1,     \
             pm_i64 sa2, const double* __restrict__ B, pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2,  \
             double* __restrict__ C, pm_i64 c_off) {                                                     \
        dm_gemm<AK, BN>(M, N, K, A + a_off, sa0, sa1, sa2, B + b_off, sb0, sb1, sb2, C + c_off);          \
    }
DM_KERNEL(polymm_dmma_ak_bn, true, true)
DM_KERNEL(polymm_dmma_ak_bk, true, false)
DM_KERNEL(polymm_dmma_am_bn, false, true)
DM_KERNEL(polymm_dmma_am_bk, false, false)
