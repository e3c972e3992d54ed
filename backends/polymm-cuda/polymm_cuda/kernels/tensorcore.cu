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
// No #include: NVRTC (CuPy RawModule) and nvcc compile the same text; the element types are
// raw 16-bit words, and PTX converts the float32 results (round to nearest even).

typedef long long pm_i64;
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
#define TC_BK 32
#define TC_THREADS 256
#define TC_NI (TC_WN / 8)                      // 8-column MMA tiles per warp
#define TC_B_CHUNKS (TC_BN / 8)                // 16-byte chunks per B row
#define TC_B_ROWS (TC_THREADS / TC_B_CHUNKS)   // B rows one pass of the block copies
#define TC_A_STAGE (TC_BM * TC_BK)  // elements
#define TC_B_STAGE (TC_BK * TC_BN)

__device__ __forceinline__ unsigned tc_smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n" : "=r"(r) : "l"(p));
    return r;
}

// 16 bytes global -> shared; bytes past `valid` (0 or 16) are zero-filled.
__device__ __forceinline__ void tc_cp16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void tc_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void tc_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void tc_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void tc_ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// The two input formats differ only in the MMA's type suffix and the final rounding.
struct tc_f16 {
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        unsigned r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
};
struct tc_bf16 {
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        unsigned r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
};

// Swizzled element offsets inside one stage.
__device__ __forceinline__ int tc_a_off(int row, int chunk) {  // row < 128, chunk < 4
    return row * TC_BK + ((chunk ^ ((row >> 1) & 3)) << 3);
}
__device__ __forceinline__ int tc_b_off(int k, int chunk) {  // k < 32, chunk < TC_B_CHUNKS
    return k * TC_BN + ((chunk ^ (k & 7)) << 3);
}

template <class T>
__device__ __forceinline__ void tc_gemm(int M, int N, int K, const pm_u16* __restrict__ A, pm_i64 a_off,
                                        pm_i64 sa0, pm_i64 sa1, pm_i64 sa2, const pm_u16* __restrict__ B,
                                        pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2, pm_u16* __restrict__ C,
                                        pm_i64 c_off) {
    extern __shared__ __align__(16) unsigned char tc_smem[];
    pm_u16* sA = (pm_u16*)tc_smem;
    pm_u16* sB = sA + TC_STAGES * TC_A_STAGE;
    (void)sa2;
    (void)sb2;  // unit strides: checked by the host

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

    // Each thread copies two 16-byte chunks of A (rows r, r + 64) and TC_BK / TC_B_ROWS of B per slice.
    const int a_row = tid >> 2, a_chunk = tid & 3;
    const int b_k = tid / TC_B_CHUNKS, b_chunk = tid % TC_B_CHUNKS;
    const int kt_count = (K + TC_BK - 1) / TC_BK;

    auto load_slice = [&](int stage, int kt) {
        const int k0 = kt * TC_BK;
        pm_u16* dA = sA + stage * TC_A_STAGE;
        pm_u16* dB = sB + stage * TC_B_STAGE;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = a_row + h * 64, gm = m0 + r, gk = k0 + a_chunk * 8;
            const bool ok = gm < M && gk < K;
            const pm_u16* src = ok ? A + gm * sa1 + gk : A;
            tc_cp16(tc_smem_addr(dA + tc_a_off(r, a_chunk)), src, ok);
        }
#pragma unroll
        for (int h = 0; h < TC_BK / TC_B_ROWS; ++h) {
            const int kk = b_k + h * TC_B_ROWS, gk = k0 + kk, gn = n0 + b_chunk * 8;
            const bool ok = gk < K && gn < N;
            const pm_u16* src = ok ? B + gk * sb1 + gn : B;
            tc_cp16(tc_smem_addr(dB + tc_b_off(kk, b_chunk)), src, ok);
        }
    };

    float acc[4][TC_NI][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < TC_NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < TC_STAGES - 1; ++s) {
        if (s < kt_count) load_slice(s, s);
        tc_commit();
    }

    // ldmatrix addresses: lane l gives row l % 16 (A) or k row l % 8 + 8 * ((l / 8) % 2) (B).
    const int a_lrow = lane & 15, a_lchunk = lane >> 4;
    const int b_lk = (lane & 7) + ((lane >> 3) & 1) * 8, b_lchunk = lane >> 4;

    for (int kt = 0; kt < kt_count; ++kt) {
        tc_wait<TC_STAGES - 2>();
        __syncthreads();
        const int next = kt + TC_STAGES - 1;
        if (next < kt_count) load_slice(next % TC_STAGES, next);
        tc_commit();

        const pm_u16* cA = sA + (kt % TC_STAGES) * TC_A_STAGE;
        const pm_u16* cB = sB + (kt % TC_STAGES) * TC_B_STAGE;
#pragma unroll
        for (int ks = 0; ks < TC_BK / 16; ++ks) {
            unsigned af[4][4], bf[TC_NI / 2][4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = wm * 64 + i * 16 + a_lrow;
                tc_ldsm_x4(af[i], tc_smem_addr(cA + tc_a_off(r, ks * 2 + a_lchunk)));
            }
#pragma unroll
            for (int j = 0; j < TC_NI / 2; ++j) {
                const int chunk = (wn * TC_WN + j * 16) / 8 + b_lchunk;
                tc_ldsm_x4_t(bf[j], tc_smem_addr(cB + tc_b_off(ks * 16 + b_lk, chunk)));
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < TC_NI; ++j) T::mma(acc[i][j], af[i], bf[j >> 1][(j & 1) * 2], bf[j >> 1][(j & 1) * 2 + 1]);
        }
    }
    tc_wait<0>();

    // Accumulator e of MMA tile (i, j): row lane / 4 (+ 8 for e >= 2), columns 2 * (lane % 4) + {0, 1}.
    const int g = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < TC_NI; ++j) {
            const int col = n0 + wn * TC_WN + j * 8 + c2;
            if (col >= N) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * 64 + i * 16 + g + h * 8;
                if (row < M)
                    *(unsigned*)(C + (pm_i64)row * N + col) = T::pack(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
    }
}

#define TC_KERNEL(NAME, T)                                                                                     \
    extern "C" __global__ void __launch_bounds__(TC_THREADS)                                                   \
        NAME(int M, int N, int K, const pm_u16* __restrict__ A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1,           \
             pm_i64 sa2, const pm_u16* __restrict__ B, pm_i64 b_off, pm_i64 sb0, pm_i64 sb1, pm_i64 sb2,        \
             pm_u16* __restrict__ C, pm_i64 c_off) {                                                           \
        tc_gemm<T>(M, N, K, A, a_off, sa0, sa1, sa2, B, b_off, sb0, sb1, sb2, C, c_off);                        \
    }
TC_KERNEL(polymm_tc_float16, tc_f16)
TC_KERNEL(polymm_tc_bfloat16, tc_bf16)
