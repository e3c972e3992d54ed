// polymm CUDA-only FP64 tensor-core path: float64 products through `mma.sync.m8n8k4.f64`
// (sm_80 and later). Each DMMA is an exact IEEE double fused multiply-add per element, so the
// result is a float64 product like any other: the contract's float64 precision, nothing traded.
//
// Tiling. A block of 256 threads (8 warps, 2 x 4) computes a 64 x 128 tile of C; each warp a
// 32 x 32 sub-tile as 4 x 4 DMMA tiles of 8 x 8 (32 double accumulators per thread). K is walked
// in slices of 16 through a ring of DM_STAGES shared-memory stages filled by 8-byte `cp.async`
// copies, one element each: any strides (transposed, negative, sliced) are read in place, and
// the threads of a warp walk the operand's unit-stride axis when it has one (DM_AK / DM_BN say
// which), so the copies coalesce.
//
// Fragments of m8n8k4 (row.col): lane l holds A[l / 4][l % 4], B[l % 4][l / 4] and
// C[l / 4][2 (l % 4) + {0, 1}]. Shared rows are padded by 4 doubles, so that the 16 lanes of
// each half-warp read 16 different bank pairs.
//
// Two blocks per SM (launch bounds: 128 registers, no spills; 2 x 81 KiB of shared memory).
// The kernel argument list is the one every polymm CUDA kernel takes. No #include
// (async_copy.cuh comes first).

#define DM_BM 64
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

__device__ __forceinline__ void dm_mma(double (&d)[2], double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a), "d"(b));
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
        for (int h = 0; h < DM_BM * DM_BK / DM_THREADS; ++h) {  // 4 elements of A each
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

    double acc[4][4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = 0.0;

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

        const double* cA = sA + (kt % DM_STAGES) * DM_A_STAGE + (wm * 32 + g) * DM_APAD + q;
        const double* cB = sB + (kt % DM_STAGES) * DM_B_STAGE + q * DM_BPAD + wn * 32 + g;
#pragma unroll
        for (int ks = 0; ks < DM_BK; ks += 4) {
            double af[4], bf[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) af[i] = cA[i * 8 * DM_APAD + ks];
#pragma unroll
            for (int j = 0; j < 4; ++j) bf[j] = cB[ks * DM_BPAD + j * 8];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) dm_mma(acc[i][j], af[i], bf[j]);
        }
    }
    pm_cp_wait<0>();

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int row = m0 + wm * 32 + i * 8 + g;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = n0 + wn * 32 + j * 8 + 2 * q;
            if (col < N) C[(pm_i64)row * N + col] = acc[i][j][0];
            if (col + 1 < N) C[(pm_i64)row * N + col + 1] = acc[i][j][1];
        }
    }
}

#define DM_KERNEL(NAME, AK, BN)                                                                          \
    extern "C" __global__ void __launch_bounds__(DM_THREADS, 2)                                           \
        NAME(int M, int N, int K, const double* __restrict__ A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1,     \
             pm_i64 sa2, const double* __restrict__ B, pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2,  \
             double* __restrict__ C, pm_i64 c_off) {                                                     \
        dm_gemm<AK, BN>(M, N, K, A + a_off, sa0, sa1, sa2, B + b_off, sb0, sb1, sb2, C + c_off);          \
    }
DM_KERNEL(polymm_dmma_ak_bn, true, true)
DM_KERNEL(polymm_dmma_ak_bk, true, false)
DM_KERNEL(polymm_dmma_am_bn, false, true)
DM_KERNEL(polymm_dmma_am_bk, false, false)
