// polymm CUDA-only FP64 tensor-core path: float64 products through `mma.sync` on `.f64`
// (sm_80 and later). Each DMMA is an exact IEEE double fused multiply-add per element, so the
// result is a float64 product like any other: the contract's float64 precision, nothing traded.
//
// Why it looks like this. Alone, every Hopper shape (m16n8k4, m16n8k8, m16n8k16) runs at 66
// TFLOP/s on an H100, m8n8k4 at half that (benchmarks/h100-2026-11-25/probe17.py). The
// first kernel here (64 x 128 tiles, one 8-byte copy per element with its address computed each time)
// reached 0.6x cuBLAS DGEMM: Nsight Compute counted 4.1 times cuBLAS's instructions for the same
// product, and the schedulers idle half the time (h100-2026-11-25/ncu18.txt). This one issues few
// (its README has the sweeps):
//
// - Tiling. A block of DM_WARPS_M x DM_WARPS_N warps computes a DM_BM x DM_BN tile of C (default
//   2 x 2 warps of 32 x 32: 64 x 64, three blocks per SM), each warp (DM_WM / DM_TM) x (DM_WN / 8)
//   MMA tiles of m16n8k8 (Hopper; m8n8k4 before). Blocks run in groups of DM_GROUP_M tile rows, so
//   that the blocks in flight share rows of A and columns of B in L2.
// - Copies. K is walked in slices of 16 through a ring of DM_STAGES shared-memory stages filled by
//   `cp.async`, DM_VA / DM_VB elements of A / B per copy (2: 16-byte copies along the operand's
//   unit-stride axis, which the host allows where that is 16-byte aligned; 1: one element each,
//   any strides). A thread's copies sit at fixed steps from its first, in the matrix and in shared
//   memory. Elements outside the matrices are zero-filled, never read.
// - Shared memory keeps each operand as it is stored: "K rows" (16 doubles; A when K is its
//   unit-stride axis, B likewise) or "outer rows" (DM_BM or DM_BN doubles along M or N), every row
//   padded by 4 doubles: the lanes of a half warp then read distinct banks, and every fragment is a
//   per-thread base plus a constant offset (no address arithmetic in the main loop).
//
// Fragments (row.col), with g = lane / 4 and q = lane % 4: A[g + 8 h][q + 4 j] (h < DM_TM / 8,
// j < DM_KW), B[q + 4 j][g], C[g + 8 (c / 2)][2 q + c % 2] for c < DM_R. The kernel argument list
// is the one every polymm CUDA kernel takes. No #include (async_copy.cuh comes first).

#ifndef DM_MMA
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DM_MMA 1688
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
#define DM_KW (DM_TK / 4)             // K values per lane and MMA (q + 4 j, j < DM_KW): 1 or 2
#define DM_AR (DM_TM / 8 * DM_KW)     // A values per lane and MMA
#define DM_R (DM_TM / 4)              // C values per lane and MMA
#ifndef DM_WARPS_M
#define DM_WARPS_M 2
#endif
#ifndef DM_WARPS_N
#define DM_WARPS_N 2
#endif
#ifndef DM_WM
#define DM_WM 32
#endif
#ifndef DM_WN
#define DM_WN 32
#endif
#ifndef DM_STAGES
#define DM_STAGES 4
#endif
#ifndef DM_MINB
#define DM_MINB 3  // blocks per SM the register budget is cut for
#endif
#ifndef DM_GROUP_M
#define DM_GROUP_M 16  // 0: a grid of (tiles along N, tiles along M); else a 1-D grid in groups of rows
#endif
#ifndef DM_VA
#define DM_VA 1
#endif
#ifndef DM_VB
#define DM_VB 1
#endif
#define DM_MI (DM_WM / DM_TM)  // MMA tiles along M per warp
#define DM_NJ (DM_WN / 8)      // along N
#define DM_BM (DM_WARPS_M * DM_WM)
#define DM_BN (DM_WARPS_N * DM_WN)
#define DM_BK 16
#define DM_THREADS (32 * DM_WARPS_M * DM_WARPS_N)

__device__ __forceinline__ void dm_mma(double (&d)[DM_R], const double (&a)[DM_AR], const double (&b)[DM_KW]) {
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

// Shared rows are padded (DM_PK / dm_pitch_outer) so that the lanes of a quarter warp (16-byte
// loads; a half warp for 8-byte ones) read distinct banks, and every fragment's address is a
// per-thread base plus a constant.
template <bool KROWS, int OUTER>
struct DmLayout {
    static constexpr int PITCH = (KROWS ? DM_BK : OUTER) + 4;
    static constexpr int SIZE = KROWS ? OUTER * PITCH : DM_BK * PITCH;  // doubles per stage
    // offset of element (o, k) of the tile
    static __device__ __forceinline__ int at(int o, int k) { return KROWS ? o * PITCH + k : k * PITCH + o; }
};

// Copies 16-deep K slices of an operand's OUTER x 16 tile (outer rows from o0, `count` of them in
// the matrix; element (o, k) at src + o * so + k * sk) into shared memory. KROWS: stored as K
// rows; V elements per copy along the copy's contiguous axis (K for K rows). Copy h of a thread
// sits at a fixed step from copy 0, in the matrix and in shared memory; elements outside the
// matrix are zero-filled, never read.
template <int OUTER, bool KROWS, int V>
struct DmCopier {
    static constexpr int PER_ROW = (KROWS ? DM_BK : OUTER) / V;  // copies per shared row
    static constexpr int COPIES = OUTER * DM_BK / V / DM_THREADS;  // per thread and slice
    static constexpr int ROW_STEP = DM_THREADS / PER_ROW;          // shared rows between copies
    static_assert(OUTER * DM_BK % (V * DM_THREADS) == 0 && DM_THREADS % PER_ROW == 0, "whole copies");
    typedef DmLayout<KROWS, OUTER> L;
    const double* p;  // copy 0 at the current slice
    pm_i64 step;      // between copies
    pm_i64 slice;     // between slices
    unsigned s_off;   // byte offset of copy 0 in a stage
    int o, k, count;  // copy 0's coordinates in the matrix (k within the slice)
    __device__ __forceinline__ DmCopier(const double* src, pm_i64 so, pm_i64 sk, int o0, int count_, int tid)
        : count(count_) {
        const int row = tid / PER_ROW, col = (tid % PER_ROW) * V;
        o = o0 + (KROWS ? row : col);
        k = KROWS ? col : row;
        p = src + (pm_i64)o * so + (pm_i64)k * sk;
        step = (pm_i64)ROW_STEP * (KROWS ? so : sk);
        slice = (pm_i64)DM_BK * sk;
        s_off = 8 * (KROWS ? L::at(row, col) : L::at(col, row));
    }
    // elements of copy h inside the matrix, for the slice from k0 of K
    __device__ __forceinline__ int inside(int h, int k0, int K) const {
        const int ho = KROWS ? o + h * ROW_STEP : o, hk = k0 + (KROWS ? k : k + h * ROW_STEP);
        const int n = KROWS ? (ho < count ? K - hk : 0) : (hk < K ? count - ho : 0);
        return max(0, min(V, n));
    }
    // issue the copies of the slice from k0 into the stage at shared address dst; advance
    __device__ __forceinline__ void copy(unsigned dst, int k0, int K) {
#pragma unroll
        for (int h = 0; h < COPIES; ++h) {
            const int n = inside(h, k0, K);
            const double* from = n ? p + h * step : p;
            pm_cp_async_part<8 * V>(dst + s_off + 8 * h * ROW_STEP * L::PITCH, from, 8 * n);
        }
        p += slice;
    }
};

// AK: A's unit-stride (or smaller) axis is K (else M); BN: B's is N (else K). The host picks them
// from the strides, and DM_VA / DM_VB from the alignment.
template <bool AK, bool BN>
__device__ __forceinline__ void dm_gemm(int M, int N, int K, const double* __restrict__ A, pm_i64 sa0, pm_i64 sa1,
                                        pm_i64 sa2, const double* __restrict__ B, pm_i64 sb0, pm_i64 sb1,
                                        pm_i64 sb2, double* __restrict__ C) {
    typedef DmLayout<AK, DM_BM> LA;
    typedef DmLayout<!BN, DM_BN> LB;
    extern __shared__ __align__(16) double dm_smem[];  // DM_STAGES * (LA::SIZE + LB::SIZE)
    double* sA = dm_smem;
    double* sB = dm_smem + DM_STAGES * LA::SIZE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / DM_WARPS_N) * DM_WM, wn0 = (warp % DM_WARPS_N) * DM_WN;
#if DM_GROUP_M
    // blocks in groups of DM_GROUP_M tile rows, column by column: a wave of blocks shares rows of A
    // and columns of B in L2 (a plain row-major order re-reads all of B every few tile rows)
    const int tiles_m = (M + DM_BM - 1) / DM_BM, tiles_n = (N + DM_BN - 1) / DM_BN;
    const int pid = blockIdx.x, per_group = DM_GROUP_M * tiles_n, first = pid / per_group * DM_GROUP_M;
    const int rows = min(tiles_m - first, DM_GROUP_M);
    const int m0 = (first + pid % per_group % rows) * DM_BM, n0 = (pid % per_group / rows) * DM_BN;
#else
    const int m0 = blockIdx.y * DM_BM, n0 = blockIdx.x * DM_BN;
#endif
    const pm_i64 z = blockIdx.z;
    C += z * (pm_i64)M * N;
    const int kt_count = (K + DM_BK - 1) / DM_BK;
    DmCopier<DM_BM, AK, DM_VA> copy_a(A + z * sa0, sa1, sa2, m0, M, tid);
    DmCopier<DM_BN, !BN, DM_VB> copy_b(B + z * sb0, sb2, sb1, n0, N, tid);
    const unsigned sA0 = pm_smem_addr(sA), sB0 = pm_smem_addr(sB);

    double acc[DM_MI][DM_NJ][DM_R];
#pragma unroll
    for (int i = 0; i < DM_MI; ++i)
#pragma unroll
        for (int j = 0; j < DM_NJ; ++j)
#pragma unroll
            for (int c = 0; c < DM_R; ++c) acc[i][j][c] = 0.0;

#pragma unroll
    for (int s = 0; s < DM_STAGES - 1; ++s) {
        if (s < kt_count) {
            copy_a.copy(sA0 + 8 * s * LA::SIZE, s * DM_BK, K);
            copy_b.copy(sB0 + 8 * s * LB::SIZE, s * DM_BK, K);
        }
        pm_cp_commit();
    }
    const int g = lane >> 2, q = lane & 3;
    // this lane's first A and B values in a stage; every other one is a constant away
    const int fa = LA::at(wm0 + g, q), fb = LB::at(wn0 + g, q);
    for (int kt = 0; kt < kt_count; ++kt) {
        pm_cp_wait<DM_STAGES - 2>();
        __syncthreads();
        const int next = kt + DM_STAGES - 1;
        if (next < kt_count) {
            const int ns = next % DM_STAGES;
            copy_a.copy(sA0 + 8 * ns * LA::SIZE, next * DM_BK, K);
            copy_b.copy(sB0 + 8 * ns * LB::SIZE, next * DM_BK, K);
        }
        pm_cp_commit();

        const int stage = kt % DM_STAGES;
        const double* cA = sA + stage * LA::SIZE + fa;
        const double* cB = sB + stage * LB::SIZE + fb;
#pragma unroll
        for (int kk = 0; kk < DM_BK; kk += DM_TK) {
            double af[DM_MI][DM_AR], bf[DM_NJ][DM_KW];
#pragma unroll
            for (int i = 0; i < DM_MI; ++i)
#pragma unroll
                for (int h = 0; h < DM_TM / 8; ++h) {
                    const double* r = cA + LA::at(i * DM_TM + 8 * h, kk);
#pragma unroll
                    for (int j = 0; j < DM_KW; ++j) af[i][h + DM_TM / 8 * j] = r[LA::at(0, 4 * j)];
                }
#pragma unroll
            for (int j = 0; j < DM_NJ; ++j) {
                const double* r = cB + LB::at(8 * j, kk);
#pragma unroll
                for (int t = 0; t < DM_KW; ++t) bf[j][t] = r[LB::at(0, 4 * t)];
            }
#pragma unroll
            for (int i = 0; i < DM_MI; ++i)
#pragma unroll
                for (int j = 0; j < DM_NJ; ++j) dm_mma(acc[i][j], af[i], bf[j]);
        }
    }
    pm_cp_wait<0>();

#pragma unroll
    for (int i = 0; i < DM_MI; ++i) {
#pragma unroll
        for (int h = 0; h < DM_R / 2; ++h) {  // the 8-row halves of a 16-row tile
            const int row = m0 + wm0 + i * DM_TM + 8 * h + g;
            if (row >= M) continue;
#pragma unroll
            for (int j = 0; j < DM_NJ; ++j) {
                const int col = n0 + wn0 + j * 8 + 2 * q;
                if (col < N) C[(pm_i64)row * N + col] = acc[i][j][2 * h];
                if (col + 1 < N) C[(pm_i64)row * N + col + 1] = acc[i][j][2 * h + 1];
            }
        }
    }
}

#define DM_KERNEL(NAME, AK, BN)                                                                          \
    extern "C" __global__ void __launch_bounds__(DM_THREADS, DM_MINB)                                    \
        NAME(int M, int N, int K, const double* __restrict__ A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1,     \
             pm_i64 sa2, const double* __restrict__ B, pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2,  \
             double* __restrict__ C, pm_i64 c_off) {                                                     \
        dm_gemm<AK, BN>(M, N, K, A + a_off, sa0, sa1, sa2, B + b_off, sb0, sb1, sb2, C + c_off);          \
    }
DM_KERNEL(polymm_dmma_ak_bn, true, true)
DM_KERNEL(polymm_dmma_ak_bk, true, false)
DM_KERNEL(polymm_dmma_am_bn, false, true)
DM_KERNEL(polymm_dmma_am_bk, false, false)
