// polymm CUDA-only tensor-core path: float16 and bfloat16 products with float32 accumulation,
// through the warp-level `mma.sync.m16n8k16` instruction (sm_80 and later; Hopper runs it too,
// at a fraction of what its warp-group `wgmma` reaches).
//
// Tiling. A block of 256 threads (8 warps, 2 x 4) computes a 128 x 4*WN tile of C; each warp a
// 64 x WN sub-tile as 4 x WN/8 MMA tiles of 16 x 8 (WN = 32: 64 float32 accumulators per thread). K is
// walked in slices of 32 through a ring of STAGES shared-memory stages filled by `cp.async`
// (16-byte copies, straight from global memory, zero-filled past the matrix edges), so the
// loads of slice k+STAGES-1 fly while slice k is multiplied.
//
// Fragments. `ldmatrix.x4` gives each thread its A fragment (two 8 x 8 matrices of rows, two
// of k) and `ldmatrix.x4.trans` its B fragments for two 8-column MMA tiles, read from B stored
// k-major as in global memory. Shared rows are swizzled (the 16-byte chunk index XORed with
// bits of the row) so that the eight rows one `ldmatrix` phase reads fall in eight different
// bank groups: A rows are 64 bytes (4 chunks, XOR with (row / 2) % 4), B rows 8 * WN bytes (XOR
// of the chunk's low three bits with row % 8).
//
// Contract with the host (polymm_cuda.tensorcore.plan checks it, else the SIMT kernel runs):
// A and B are unit-stride along K and N respectively, every row and batch stride, offset and
// base address is a multiple of 8 elements (16 bytes), and K and N are multiples of 8; M is
// free. C is C-contiguous (M x N per batch entry). The kernel argument list is the one every
// polymm CUDA kernel takes: sizes, then (buffer, element offset, element strides) per operand.
//
// No #include (ptx.cuh comes first): NVRTC (CuPy RawModule) and nvcc compile the same
// text; the element types are raw 16-bit words, and PTX converts the float32 results (round to
// nearest even).

typedef unsigned short pm_u16;

// Tile parameters (compile-time; the host passes -D to choose): warp tile 64 x TC_WN, block
// tile 128 x (4 * TC_WN), TC_STAGES slices in flight, and TC_GROUP_M > 0 orders the blocks in
// groups of that many tile rows (so the blocks running at once share panels of A and B in L2).
#ifndef TC_WN
#define TC_WN 32
#endif
#ifndef TC_STAGES
#define TC_STAGES 3
#endif
#ifndef TC_GROUP_M
#define TC_GROUP_M 0
#endif
#define TC_BM 128
#define TC_BN (4 * TC_WN)
#define TC_KB 64                               // bytes of K per slice: 32 x 16-bit, 64 x 8-bit
#define TC_BK16 32                             // the same slice in 16-bit elements
#define TC_THREADS 256
#define TC_NI (TC_WN / 8)                      // 8-column MMA tiles per warp
#define TC_B_CHUNKS (TC_BN / 8)                // 16-byte chunks per k-major B row (16-bit)
#define TC_B_ROWS (TC_THREADS / TC_B_CHUNKS)   // k-major B rows one pass of the block copies
#define TC_A_STAGE (TC_BM * TC_KB)             // bytes
#define TC_B_STAGE (TC_BN * TC_KB)

// The two 16-bit input formats differ only in the MMA's type and the final rounding (ptx.cuh).
#define TC_HMMA(NAME, MMA, PACK)                                                                        \
    struct NAME {                                                                                       \
        typedef pm_u16 S;                                                                               \
        typedef float Acc;                                                                              \
        static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0,   \
                                                   unsigned b1) {                                       \
            MMA(d, a, b0, b1);                                                                          \
        }                                                                                               \
        static __device__ __forceinline__ unsigned pack(float lo, float hi) { return PACK(lo, hi); }    \
        static __device__ __forceinline__ S one(float x) { return (S)(pack(x, 0.f) & 0xffffu); }        \
    };
TC_HMMA(tc_f16, pm_mma_f16, pm_pack_f16)
TC_HMMA(tc_bf16, pm_mma_bf16, pm_pack_bf16)

// 8-bit integers: m16n8k32 with int32 accumulation; the int32 sum wraps modulo 2^32 and its low
// byte is exactly NumPy's int8 / uint8 result (which wraps modulo 2^8).
#define TC_IMMA(NAME, ST, MMA)                                                                          \
    struct NAME {                                                                                       \
        typedef ST S;                                                                                   \
        typedef int Acc;                                                                                \
        static __device__ __forceinline__ void mma(int (&d)[4], const unsigned (&a)[4], unsigned b0,     \
                                                   unsigned b1) {                                       \
            MMA(d, a, b0, b1);                                                                          \
        }                                                                                               \
        static __device__ __forceinline__ unsigned short pack(int lo, int hi) {                         \
            return (unsigned short)((lo & 0xff) | ((hi & 0xff) << 8));                                  \
        }                                                                                               \
        static __device__ __forceinline__ S one(int x) { return (S)x; }                                 \
    };
TC_IMMA(tc_s8, signed char, pm_mma_s8)
TC_IMMA(tc_u8, unsigned char, pm_mma_u8)

// Swizzled byte offsets inside one stage. Rows of one K slice (64 bytes: 4 chunks of 16) for A,
// and for B stored n-major; B stored k-major (float16 as it comes) has rows of 2 * TC_BN bytes.
__device__ __forceinline__ int tc_row_off(int row, int chunk) {
    return row * TC_KB + ((chunk ^ ((row >> 1) & 3)) << 4);
}
__device__ __forceinline__ int tc_kmajor_off(int k, int chunk) {
    return k * (2 * TC_BN) + ((chunk ^ (k & 7)) << 4);
}

// One block's tile. B_NMAJOR: B is read along K (its stride along K is 1: B^T is row-major, as
// for x1 @ x2.T); otherwise along N (16-bit types only: ldmatrix.trans transposes 16-bit words).
template <class T, bool B_NMAJOR>
__device__ __forceinline__ void tc_gemm(int M, int N, int K, const typename T::S* __restrict__ A, pm_i64 a_off,
                                        pm_i64 sa0, pm_i64 sa1, const typename T::S* __restrict__ B,
                                        pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2,
                                        typename T::S* __restrict__ C, pm_i64 c_off) {
    typedef typename T::S S;
    typedef typename T::Acc Acc;
    const int CH = 16 / (int)sizeof(S);  // elements per 16-byte chunk
    extern __shared__ __align__(16) unsigned char tc_smem[];
    unsigned char* sA = tc_smem;
    unsigned char* sB = tc_smem + TC_STAGES * TC_A_STAGE;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps: 64 x TC_WN each
#if TC_GROUP_M > 0
    // 1-D grid: consecutive blocks walk down TC_GROUP_M tile rows, then to the next column.
    const int tiles_m = (M + TC_BM - 1) / TC_BM, tiles_n = (N + TC_BN - 1) / TC_BN;
    const int pid = blockIdx.x, per_group = TC_GROUP_M * tiles_n, first = (pid / per_group) * TC_GROUP_M;
    const int rows = min(tiles_m - first, TC_GROUP_M);
    const int m0 = (first + (pid % per_group) % rows) * TC_BM, n0 = ((pid % per_group) / rows) * TC_BN;
#else
    const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;
#endif
    const pm_i64 z = blockIdx.z;
    A += a_off + z * sa0;
    B += b_off + z * sb0;
    C += c_off + z * (pm_i64)M * N;

    const int kt_count = (K + TC_KB / (int)sizeof(S) - 1) / (TC_KB / (int)sizeof(S));
    auto load_slice = [&](int stage, int kt) {
        const int k0 = kt * (TC_KB / (int)sizeof(S));
        const unsigned dA = pm_smem_addr(sA + stage * TC_A_STAGE);
        const unsigned dB = pm_smem_addr(sB + stage * TC_B_STAGE);
#pragma unroll
        for (int h = 0; h < TC_BM * 4 / TC_THREADS; ++h) {  // A: 128 rows x 4 chunks
            const int r = (tid >> 2) + h * (TC_THREADS / 4), c = tid & 3, gm = m0 + r, gk = k0 + c * CH;
            const bool ok = gm < M && gk < K;
            pm_cp_async<16>(dA + tc_row_off(r, c), ok ? A + gm * sa1 + gk : A, ok);
        }
        if (B_NMAJOR) {
#pragma unroll
            for (int h = 0; h < TC_BN * 4 / TC_THREADS; ++h) {  // B^T: TC_BN rows x 4 chunks
                const int r = (tid >> 2) + h * (TC_THREADS / 4), c = tid & 3, gn = n0 + r, gk = k0 + c * CH;
                const bool ok = gn < N && gk < K;
                pm_cp_async<16>(dB + tc_row_off(r, c), ok ? B + gn * sb2 + gk : B, ok);
            }
        } else {
#pragma unroll
            for (int h = 0; h < TC_BK16 / TC_B_ROWS; ++h) {  // B: 32 k rows x TC_BN / 8 chunks
                const int kk = tid / TC_B_CHUNKS + h * TC_B_ROWS, c = tid % TC_B_CHUNKS;
                const int gk = k0 + kk, gn = n0 + c * 8;
                const bool ok = gk < K && gn < N;
                pm_cp_async<16>(dB + tc_kmajor_off(kk, c), ok ? B + gk * sb1 + gn : B, ok);
            }
        }
    };

    Acc acc[4][TC_NI][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < TC_NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;

#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; ++s) {
        if (s < kt_count) load_slice(s, s);
        pm_cp_commit();
    }

    for (int kt = 0; kt < kt_count; ++kt) {
        pm_cp_wait<TC_STAGES - 2>();
        __syncthreads();
        const int next = kt + TC_STAGES - 1;
        if (next < kt_count) load_slice(next % TC_STAGES, next);
        pm_cp_commit();

        const unsigned cA = pm_smem_addr(sA + (kt % TC_STAGES) * TC_A_STAGE);
        const unsigned cB = pm_smem_addr(sB + (kt % TC_STAGES) * TC_B_STAGE);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {  // two MMA K steps of 32 bytes per slice
            unsigned af[4][4], bf[TC_NI / 2][4];
            // A (and B^T): lanes 0-15 give rows 0-15 of the first chunk, lanes 16-31 of the second.
#pragma unroll
            for (int i = 0; i < 4; ++i)
                pm_ldsm_x4(af[i], cA + tc_row_off(wm * 64 + i * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
            for (int j = 0; j < TC_NI / 2; ++j) {
                if (B_NMAJOR)  // matrices: (n 0-7, chunk 0), (n 0-7, chunk 1), (n 8-15, chunk 0), (n 8-15, chunk 1)
                    pm_ldsm_x4(bf[j], cB + tc_row_off(wn * TC_WN + j * 16 + (lane & 7) + (lane >> 4) * 8,
                                                      ks * 2 + ((lane >> 3) & 1)));
                else  // matrices: (k 0-7, n chunk 0), (k 8-15, n chunk 0), (k 0-7, chunk 1), (k 8-15, chunk 1)
                    pm_ldsm_x4_t(bf[j], cB + tc_kmajor_off(ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                           (wn * TC_WN + j * 16) / 8 + (lane >> 4)));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < TC_NI; ++j)
                    T::mma(acc[i][j], af[i], bf[j >> 1][(j & 1) * 2], bf[j >> 1][(j & 1) * 2 + 1]);
        }
    }
    pm_cp_wait<0>();

    // Accumulator e of MMA tile (i, j): row lane / 4 (+ 8 for e >= 2), columns 2 * (lane % 4) + {0, 1}.
    const int g = lane >> 2, c2 = (lane & 3) * 2;
    const bool pairs = (N & 1) == 0;  // two neighbours per aligned store
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < TC_NI; ++j) {
            const int col = n0 + wn * TC_WN + j * 8 + c2;
            if (col >= N) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * 64 + i * 16 + g + h * 8;
                if (row >= M) continue;
                S* dst = C + (pm_i64)row * N + col;
                if (pairs) {
                    *(decltype(T::pack(acc[i][j][0], acc[i][j][0]))*)dst = T::pack(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                } else {
                    dst[0] = T::one(acc[i][j][2 * h]);
                    if (col + 1 < N) dst[1] = T::one(acc[i][j][2 * h + 1]);
                }
            }
        }
    }
}

// The argument list every polymm CUDA kernel takes: sizes, then (buffer, element offset,
// element strides) per operand; the unit strides the host checked are not read.
#define TC_KERNEL(NAME, T, B_NMAJOR)                                                                   \
    extern "C" __global__ void __launch_bounds__(TC_THREADS)                                           \
        NAME(int M, int N, int K, const T::S* __restrict__ A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1,     \
             pm_i64 sa2, const T::S* __restrict__ B, pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2, \
             T::S* __restrict__ C, pm_i64 c_off) {                                                     \
        (void)sa2;                                                                                     \
        tc_gemm<T, B_NMAJOR>(M, N, K, A, a_off, sa0, sa1, B, b_off, sb0, sb1, sb2, C, c_off);           \
    }
TC_KERNEL(polymm_tc_float16_kn, tc_f16, false)
TC_KERNEL(polymm_tc_float16_nk, tc_f16, true)
TC_KERNEL(polymm_tc_bfloat16_kn, tc_bf16, false)
TC_KERNEL(polymm_tc_bfloat16_nk, tc_bf16, true)
TC_KERNEL(polymm_tc_int8_nk, tc_s8, true)
TC_KERNEL(polymm_tc_uint8_nk, tc_u8, true)
