// polymm CUDA-only FP64 tensor-core path: float64 products through `mma.sync` on `.f64`
// (sm_80 and later). Each DMMA is an exact IEEE double fused multiply-add per element, so the
// result is a float64 product like any other: the contract's float64 precision, nothing traded.
//
// Why it looks like this. Alone, every Hopper shape (m16n8k4, m16n8k8, m16n8k16) runs at 66
// TFLOP/s on an H100, m8n8k4 at half that (benchmarks/h100-2026-11-25/probe17.py). The
// first kernel here (64 x 128 tiles, one 8-byte copy per element with its address computed each time)
// reached 0.6x cuBLAS DGEMM: Nsight Compute counted 4.1 times cuBLAS's instructions for the same
// product, and the schedulers idle half the time (h100-2026-11-25/ncu18.txt). This one issues few
// (benchmarks/h100-2026-11-25/README.md has the sweeps):
//
// - Tiling. A block of DM_WARPS_M x DM_WARPS_N warps computes a DM_BM x DM_BN tile of C (default
//   2 x 2 warps of 32 x 32: 64 x 64, three blocks per SM), each warp (DM_WM / DM_TM) x (DM_WN / 8)
//   MMA tiles of DM_MMA (the host's choice on Hopper: m16n8k4 for one wave of tiles, m16n8k8
//   for more, m16n8k16 in the wide tiles below (complex128: m16n8k4); m8n8k4 before). Blocks run
//   in groups of DM_GROUP_M tile rows, so that the blocks in flight share rows of A and columns of
//   B in L2. The host may widen the warp tile along N (DM_WN 64: 64 x 128 tiles, two blocks per
//   SM) where those fill their waves (polymm_cuda.tensorcore.dmma_wide).
// - Copies. K is walked in slices of 16 through a ring of DM_STAGES shared-memory stages filled by
//   `cp.async`, DM_VA / DM_VB elements of A / B per copy (2: 16-byte copies along the operand's
//   unit-stride axis, which the host allows where that is 16-byte aligned; 1: one element each,
//   any strides). A thread's copies sit at fixed steps from its first, in the matrix and in shared
//   memory. Elements outside the matrices are zero-filled, never read.
// - Shared memory keeps each operand as it is stored: "K rows" (16 doubles; A when K is its
//   unit-stride axis, B likewise) or "outer rows" (DM_BM or DM_BN doubles along M or N), every row
//   padded by 4 doubles: the lanes of a half warp then read distinct banks, and every fragment is a
//   per-thread base plus a constant offset (no address arithmetic in the main loop). The MMA's A
//   operand is whichever of A and B^T lies in outer rows (see dm_gemm): its two rows per lane then
//   come in one 16-byte load.
//
// - complex128 (polymm_dmmaz_*, Hopper): the same kernel computes the real product of realify.c
//   (A and C read as reals, B's 2 x 2 blocks [x y; -y x]) from B as it is stored: each lane's B
//   fragment is a component of one element of B, chosen and sign-flipped by its K row's parity.
//   Writing B2 out first (what other devices do) cost a launch and 7% of the time at 1024 cubed.
//
// Fragments (row.col), with g = lane / 4 and q = lane % 4: A[g + 8 h][q + 4 j] (h < DM_TM / 8,
// j < DM_KW), B[q + 4 j][g], C[g + 8 (c / 2)][2 q + c % 2] for c < DM_R. The kernel argument list
// is the one every polymm CUDA kernel takes. No #include (ptx.cuh comes first).
//
// DM_SWAP 0: A along K and B along N are multiplied as they are (X = A in K rows; complex128: Y =
// B2 read from B's rows, a component and sign per lane), which the host picks where it ran faster
// on the H100 (float64 within one wave of tiles).

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
#elif DM_MMA == 16816
#define DM_TM 16
#define DM_TK 16
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
#ifndef DM_BK
#define DM_BK 16  // K per slice
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
#ifndef DM_SWAP
#define DM_SWAP 1  // 0: A along K and B along N multiplied as they are (X = A in K rows), not swapped
#endif
#ifndef DM_VB
#define DM_VB 1
#endif
#define DM_BM (DM_WARPS_M * DM_WM)
#define DM_BN (DM_WARPS_N * DM_WN)
#define DM_THREADS (32 * DM_WARPS_M * DM_WARPS_N)

__device__ __forceinline__ void dm_mma(double (&d)[DM_R], const double (&a)[DM_AR], const double (&b)[DM_KW]) {
#if DM_MMA == 884
    pm_dmma_884(d, a, b);
#elif DM_MMA == 1684
    pm_dmma_1684(d, a, b);
#elif DM_MMA == 16816
    pm_dmma_16816(d, a, b);
#else
    pm_dmma_1688(d, a, b);
#endif
}

// A tile in shared memory: K rows (KROWS: OUTER rows of KS) or outer rows (KS rows of OUTER), each
// padded by PAD doubles, so that the lanes of a quarter warp (16-byte loads; a half warp for 8-byte
// ones) read distinct banks; every fragment's address is a per-thread base plus a constant. KS: K
// per slice in the tile's own units (DM_BK; a complex B in outer rows holds DM_BK / 2 complex rows).
template <bool KROWS, int OUTER, int PAD, int KS = DM_BK>
struct DmLayout {
    static constexpr int PITCH = (KROWS ? KS : OUTER) + PAD;
    static constexpr int SIZE = KROWS ? OUTER * PITCH : KS * PITCH;  // doubles per stage
    // offset of element (o, k) of the tile
    static __device__ __forceinline__ int at(int o, int k) { return KROWS ? o * PITCH + k : k * PITCH + o; }
};

// Copies KS-deep K slices of an operand's OUTER x KS tile (outer rows from o0, `count` of them in
// the matrix; element (o, k) at src + o * so + k * sk) into shared memory. KROWS: stored as K
// rows; V elements per copy along the copy's contiguous axis (K for K rows). A copy's V elements
// need only be adjacent in memory, not the axis uniformly strided: a complex operand seen as reals
// is copied a complex at a time (V = 2, copies at even reals, the complex stride standing for the
// reals' step). Copy h of a thread
// sits at a fixed step from copy 0, in the matrix and in shared memory; elements outside the
// matrix are zero-filled, never read. A thread keeps each copy's source pointer (fewer
// instructions per slice) where it has at most 4 copies; with more (one element per copy) they
// would not fit the register budget, and copy h reads from copy 0's pointer plus h steps.
template <int OUTER, bool KROWS, int V, class L, int KS = DM_BK>
struct DmCopier {
    static constexpr int PER_ROW = (KROWS ? KS : OUTER) / V;    // copies per shared row
    static constexpr int COPIES = OUTER * KS / V / DM_THREADS;  // per thread and slice
    static constexpr int ROW_STEP = DM_THREADS / PER_ROW;       // shared rows between copies
    static_assert(OUTER * KS % (V * DM_THREADS) == 0 && DM_THREADS % PER_ROW == 0, "whole copies");
    static constexpr int POINTERS = COPIES <= 4 ? COPIES : 1;
    const double* p[POINTERS];  // each copy's source at the current slice (or copy 0's)
    pm_i64 step;                // elements between copies in the matrix
    int bytes[COPIES];        // what each copy reads of a whole slice (0 outside the matrix)
    pm_i64 slice;             // between slices
    unsigned s_off;           // byte offset of copy 0 in a stage
    int o, k, count;          // copy 0's coordinates in the matrix (k within the slice)
    __device__ __forceinline__ DmCopier(const double* src, pm_i64 so, pm_i64 sk, int o0, int count_, int tid)
        : count(count_) {
        const int row = tid / PER_ROW, col = (tid % PER_ROW) * V;
        o = o0 + (KROWS ? row : col);
        k = KROWS ? col : row;
        step = (pm_i64)ROW_STEP * (KROWS ? so : sk);
#pragma unroll
        for (int h = 0; h < POINTERS; ++h) p[h] = src + (pm_i64)o * so + (pm_i64)k * sk + h * step;
#pragma unroll
        for (int h = 0; h < COPIES; ++h) {
            bytes[h] = 8 * max(0, min(V, KROWS ? (o + h * ROW_STEP < count ? V : 0) : count - o));
        }
        slice = (pm_i64)KS * sk;
        s_off = 8 * (KROWS ? L::at(row, col) : L::at(col, row));
    }
    // elements of copy h inside the matrix, for the slice from k0 of K
    __device__ __forceinline__ int inside(int h, int k0, int K) const {
        const int ho = KROWS ? o + h * ROW_STEP : o, hk = k0 + (KROWS ? k : k + h * ROW_STEP);
        const int n = KROWS ? (ho < count ? K - hk : 0) : (hk < K ? count - ho : 0);
        return max(0, min(V, n));
    }
    __device__ __forceinline__ const double* source(int h) const { return POINTERS == COPIES ? p[h] : p[0] + h * step; }
    // issue the copies of the slice from k0 into the stage at shared address dst; advance. Whole
    // slices (all but a last one cut by K) take the bytes worked out once.
    __device__ __forceinline__ void copy(unsigned dst, int k0, int K) {
        if (k0 + KS <= K) {
#pragma unroll
            for (int h = 0; h < COPIES; ++h)
                pm_cp_async_part<8 * V>(dst + s_off + 8 * h * ROW_STEP * L::PITCH, source(h), bytes[h]);
        } else {
#pragma unroll
            for (int h = 0; h < COPIES; ++h) {
                const int n = inside(h, k0, K);
                pm_cp_async_part<8 * V>(dst + s_off + 8 * h * ROW_STEP * L::PITCH, source(h), 8 * n);
            }
        }
#pragma unroll
        for (int h = 0; h < POINTERS; ++h) p[h] += slice;
    }
};

// AK: A's unit-stride (or smaller) axis is K (else M); BN: B's is N (else K). The host picks them
// from the strides, and DM_VA / DM_VB from the alignment.
//
// The MMA's A operand ("X") and B operand ("Y") are A and B, or B^T and A^T (SWAP: C^T = B^T A^T
// is computed when A is K-contiguous and B N-contiguous, the common case), chosen so that X is
// stored in outer rows where the layouts allow: then a lane's two rows of X (g and g + 8 of the
// MMA, stored side by side as rows 2g and 2g + 1: the tile's rows may be numbered in any order that
// the store undoes) come in one 16-byte load. (Pairing Y's K values q and q + 4 of m16n8k8 the same
// way made every cell slower: benchmarks/h100-2026-11-25/sweeps/dmma-sweep11.)
//
// CPLX: a complex128 product as the real one C' = A' B2 (see realify.c): A' (M x 2K) and C'
// (M x 2N) are A and C read as reals; B2 (2K x 2N) has the 2 x 2 block [x y; -y x] for each
// element x + iy of B, and is never written: shared memory holds B as it is (half B2's bytes), and
// each lane reads its B2 fragment from there, its K row's parity (q's) choosing the component and
// the sign. M, N, K are C' and A''s; A's strides are given for the reals (2 sa0, 2 sa1, and sa2 for
// its K step: copied a complex at a time, two reals per copy), B's in complex elements. Needs AK
// and the Hopper MMA shapes (DM_TM == 16).
template <bool AK, bool BN, bool CPLX = false>
__device__ __forceinline__ void dm_gemm(int M, int N, int K, const double* __restrict__ A, pm_i64 sa0, pm_i64 sa1,
                                        pm_i64 sa2, const double* __restrict__ B, pm_i64 sb0, pm_i64 sb1,
                                        pm_i64 sb2, double* __restrict__ C) {
    static_assert(!CPLX || (AK && DM_TM == 16), "complex: A along K, an m16 MMA");
    constexpr bool SWAP = AK && BN && DM_SWAP;
    constexpr bool X_KROWS = SWAP ? false : AK, Y_KROWS = SWAP ? true : !BN;
    constexpr bool PAIR_X = !X_KROWS && DM_TM == 16;                 // rows g, g + 8 side by side
    constexpr int XO = SWAP ? DM_BN : DM_BM, YO = SWAP ? DM_BM : DM_BN;  // block tile along X, Y
    constexpr int XI = (SWAP ? DM_WN : DM_WM) / DM_TM, YJ = (SWAP ? DM_WM : DM_WN) / 8;  // MMA tiles
    // B's tile: N x 16 (or, complex, N / 2 complex columns x 16 reals; or 8 complex rows x N reals)
    constexpr int B_OUTER = CPLX && !BN ? DM_BN / 2 : DM_BN, B_KS = CPLX && BN ? DM_BK / 2 : DM_BK;
    typedef DmLayout<AK, DM_BM, 4> LA;
    typedef DmLayout<!BN, B_OUTER, 4, B_KS> LB;
    typedef typename pm_pick<SWAP, LB, LA>::type LX;
    typedef typename pm_pick<SWAP, LA, LB>::type LY;
    extern __shared__ __align__(16) double dm_smem[];  // DM_STAGES * (LX::SIZE + LY::SIZE)
    double* sX = dm_smem;
    double* sY = dm_smem + DM_STAGES * LX::SIZE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp / DM_WARPS_N) * DM_WM, wn0 = (warp % DM_WARPS_N) * DM_WN;
    const int wx0 = SWAP ? wn0 : wm0, wy0 = SWAP ? wm0 : wn0;
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
    DmCopier<DM_BM, AK, CPLX ? 2 : DM_VA, LA> copy_a(A + z * sa0, sa1, sa2, m0, M, tid);
    // B's element (o, k) of its tile; complex: (n'', k) (a complex row of reals) or (n, k'')
    DmCopier<B_OUTER, !BN, CPLX ? 2 : DM_VB, LB, B_KS> copy_b(
        B + z * (CPLX ? 2 : 1) * sb0, CPLX && !BN ? 2 * sb2 : sb2, CPLX && BN ? 2 * sb1 : sb1,
        CPLX && !BN ? n0 / 2 : n0, CPLX && !BN ? N / 2 : N, tid);
    const unsigned sX0 = pm_smem_addr(sX), sY0 = pm_smem_addr(sY);
    const unsigned sA0 = SWAP ? sY0 : sX0, sB0 = SWAP ? sX0 : sY0;

    double acc[XI][YJ][DM_R];
#pragma unroll
    for (int i = 0; i < XI; ++i)
#pragma unroll
        for (int j = 0; j < YJ; ++j)
#pragma unroll
            for (int c = 0; c < DM_R; ++c) acc[i][j][c] = 0.0;

    auto issue = [&](int stage, int kt) {
        copy_a.copy(sA0 + 8 * stage * LA::SIZE, kt * DM_BK, K);
        copy_b.copy(sB0 + 8 * stage * LB::SIZE, kt * B_KS, CPLX && BN ? K / 2 : K);
    };
#pragma unroll
    for (int s = 0; s < DM_STAGES - 1; ++s) {
        if (s < kt_count) issue(s, s);
        pm_cp_commit();
    }
    const int g = lane >> 2, q = lane & 3;
    // where the MMA's row r (< DM_TM) and K index k (< DM_TK) of this lane sit in the tiles
    auto xrow = [&](int h) { return PAIR_X ? 2 * g + h : g + 8 * h; };  // h: the row half
    // complex B: the lane's K values are odd (rows 2k + 1 of B2: [-y x]) where q is; B2's column
    // 2n + p is component p of B's element (p ^ 1 in the odd rows), negated in odd rows where p = 0.
    // Y = B2 (not swapped): each lane's component and sign are its own for the whole product
    const bool odd = CPLX && (q & 1);
    const long long sign = odd ? (long long)(1ull << 63) : 0, flip = !SWAP && !(g & 1) ? sign : 0;
    const double* fx = sX + (CPLX && SWAP ? LX::at(wx0 + 2 * g, q >> 1) : LX::at(wx0 + xrow(0), q));
    const double* fy = sY + (CPLX && !BN    ? LY::at(wy0 / 2 + (g >> 1), 2 * (q >> 1) + ((g ^ q) & 1))
                             : CPLX && !SWAP ? LY::at(wy0 + (g & ~1) + ((g ^ q) & 1), q >> 1)
                                             : LY::at(wy0 + g, q));
    for (int kt = 0; kt < kt_count; ++kt) {
        pm_cp_wait<DM_STAGES - 2>();
        __syncthreads();
        const int next = kt + DM_STAGES - 1;
        if (next < kt_count) issue(next % DM_STAGES, next);
        pm_cp_commit();

        const double* cX = fx + (kt % DM_STAGES) * LX::SIZE;
        const double* cY = fy + (kt % DM_STAGES) * LY::SIZE;
#pragma unroll
        for (int kk = 0; kk < DM_BK; kk += DM_TK) {
            double af[XI][DM_AR], bf[YJ][DM_KW];
#pragma unroll
            for (int i = 0; i < XI; ++i)
#pragma unroll
                for (int j = 0; j < DM_KW; ++j) {
                    if (CPLX && SWAP) {  // B2^T: (x, y) of B's element, as (-y, x) in odd K rows
                        // (the sign flipped as bits: a neg.f64 on the FP64 pipe cost 18% at 1024)
                        const double2 v = *reinterpret_cast<const double2*>(cX + LX::at(i * DM_TM, kk / 2 + 2 * j));
                        af[i][2 * j] = __longlong_as_double(__double_as_longlong(odd ? v.y : v.x) ^ sign);
                        af[i][2 * j + 1] = odd ? v.x : v.y;
                        continue;
                    }
                    const double* r = cX + LX::at(i * DM_TM, kk + 4 * j);
                    if (PAIR_X) {  // both row halves
                        const double2 v = *reinterpret_cast<const double2*>(r);
                        af[i][2 * j] = v.x;
                        af[i][2 * j + 1] = v.y;
                    } else {
#pragma unroll
                        for (int h = 0; h < DM_TM / 8; ++h) af[i][h + DM_TM / 8 * j] = r[LX::at(xrow(h) - xrow(0), 0)];
                    }
                }
#pragma unroll
            for (int j = 0; j < YJ; ++j) {
#pragma unroll
                for (int t = 0; t < DM_KW; ++t) {
                    if (CPLX && !SWAP) {  // B2: B2's columns 2n, 2n + 1 both from B's column n
                        const double v = cY[BN ? LY::at(8 * j, kk / 2 + 2 * t) : LY::at(4 * j, kk + 4 * t)];
                        bf[j][t] = __longlong_as_double(__double_as_longlong(v) ^ flip);
                    } else {
                        bf[j][t] = cY[LY::at(8 * j, kk + 4 * t)];
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < XI; ++i)
#pragma unroll
                for (int j = 0; j < YJ; ++j) dm_mma(acc[i][j], af[i], bf[j]);
        }
    }
    pm_cp_wait<0>();

    // C[m][n]: the MMA's (row, column) is (x, y), (m, n) or (n, m) when swapped. A lane holds pairs
    // along n (c and c + 1; swapped: c and c + 2, the paired rows of X): one 16-byte store each
    // where the row allows, so that a warp writes whole 128-byte lines (4096 x 32 @ 32 x 4096, all
    // stores: 78.1 -> 55.1 us, cuBLAS 53.6; benchmarks/h100-2026-11-25/session5/probe27.log).
    constexpr bool PAIR_N = SWAP ? PAIR_X : true;
    constexpr int NEXT = SWAP ? 2 : 1;  // the fragment value at n + 1
#pragma unroll
    for (int i = 0; i < XI; ++i)
#pragma unroll
        for (int j = 0; j < YJ; ++j)
#pragma unroll
            for (int c = 0; c < DM_R; ++c) {
                if (PAIR_N && (SWAP ? c >= 2 : c % 2 == 1)) continue;  // stored with its pair
                const int x = wx0 + i * DM_TM + xrow(c / 2), y = wy0 + j * 8 + 2 * q + c % 2;
                const int m = (SWAP ? y : x) + m0, n = (SWAP ? x : y) + n0;
                if (m >= M) continue;
                double* to = C + (pm_i64)m * N + n;
                if (!PAIR_N) {
                    if (n < N) to[0] = acc[i][j][c];
                } else if (n + 1 < N && (reinterpret_cast<unsigned long long>(to) & 15) == 0) {
                    *reinterpret_cast<double2*>(to) = make_double2(acc[i][j][c], acc[i][j][c + NEXT]);
                } else if (n < N) {
                    to[0] = acc[i][j][c];
                    if (n + 1 < N) to[1] = acc[i][j][c + NEXT];
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

// complex128 (CPLX above): the ABI of every polymm kernel, in complex elements (as double2, the
// pointers seen as doubles); A along K; B along N (bn) or K (bk). Hopper's MMA shapes only.
#if DM_TM == 16
#define DM_ZKERNEL(NAME, BN)                                                                             \
    extern "C" __global__ void __launch_bounds__(DM_THREADS, DM_MINB)                                    \
        NAME(int M, int N, int K, const double* __restrict__ A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1,     \
             pm_i64 sa2, const double* __restrict__ B, pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2,  \
             double* __restrict__ C, pm_i64 c_off) {                                                     \
        dm_gemm<true, BN, true>(M, 2 * N, 2 * K, A + 2 * a_off, 2 * sa0, 2 * sa1, sa2, B + 2 * b_off, sb0, \
                                sb1, sb2, C + 2 * c_off);                                                \
    }
DM_ZKERNEL(polymm_dmmaz_ak_bn, true)
DM_ZKERNEL(polymm_dmmaz_ak_bk, false)
#endif
