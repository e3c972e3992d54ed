// polymm CUDA-only Hopper path (sm_90a): float16 and bfloat16 products with float32 accumulation,
// float32 products read as TF32 (the "tf32" and "tf32x3" precision modes), and int8 and uint8
// products with int32 accumulation (the low byte stored: NumPy's wrap-around), on the warp-group
// tensor-core instruction `wgmma`, fed by the bulk tensor copy engine (TMA).
//
// A persistent grid (one block per SM at most) of 384 threads = three warp groups; each block
// computes 128 x WG_BN tiles of C in turn:
//   - warp group 0 is the producer: one thread walks K in slices of 128 bytes (64 half-precision
//     or 32 float32 elements) and asks the copy engine for the A tile (128 rows) and the B tile
//     (WG_BN columns) of each slice, into a ring of
//     WG_STAGES shared-memory stages; each copy completes on the stage's "full" barrier;
//   - warp groups 1 and 2 are the consumers: each multiplies its 64 rows of A by the whole B tile
//     (four `wgmma.m64nWG_BNk16`, `k8` for TF32, `k32` for 8-bit integers, per slice, accumulators
//     in registers), then
//     arrives on the stage's
//     "empty" barrier so the producer may refill it.
// The producer gives registers back (`setmaxnreg.dec`) and the consumers take them.
//
// Shared-memory layout. The copy engine writes 128-byte rows in the 128-byte swizzle (the 16-byte
// chunk index XORed with the row index mod 8), the layout `wgmma` reads without bank conflicts.
// A is K-major: 128 rows of 128 bytes; its descriptor advances 32 bytes per k step. B is either
// K-major too (B_KMAJOR: B^T row-major, as for x1 @ x2.T; WG_BN rows of 128 bytes) or, for 2-byte
// types only, N-major as B is usually stored (WG_BN / 64 chunks of 64 k-rows x 64 columns, read
// with `wgmma`'s transpose bit; a k16 step is 16 rows = 2048 bytes further, and the chunks are
// 8192 bytes apart). TF32 and the 8-bit types have no transpose bit: they read B as stored through
// registers (below), or the host hands them K-major copies.
//
// TF32 (KIND 2). "tf32": one product of the float32 operands; the tensor cores read their top 19
// bits. "tf32x3" (SEGMENTS 3): the host has split each operand x into parts hi = tf32(x) and
// lo = tf32(x - hi) (kernels/tf32_split.cu), stored one after the other along the maps' third
// dimension (part p of batch entry z at p * entries + z); the K loop runs three times over,
// a_hi b_lo, then a_lo b_hi, then a_hi b_hi, into the same accumulators (the small products
// first, polymm.testing.emulation's order).
//
// TF32 ("tf32" only) and 8-bit types with B N-major (B_KMAJOR false, SWAP): wgmma reads them from
// shared memory K-major only, but takes A's fragment from registers in any order. So the block
// computes a tile of C^T = B^T A^T: 128 columns of C (the rows of C^T: B^T's fragments, loaded
// into registers from B's tile as the copy engine wrote it, N-major; 8-bit ones transposed on the
// way by ldmatrix.trans and byte permutes) by WG_BN rows of C (A's tile, K-major, as wgmma's
// shared operand), and stores it transposed. No copy of B is made; as for any operand read where
// it lies, the tensor cores take the top 19 bits of each float32.
//
// Byte planes (WG_PLANES, PLANES 2 or 4: kernels/byte_planes.cu, polymm_cuda.planes): 16- and
// 32-bit integer products as uint8 ones. A and B are their operands' byte planes side by side
// along K, K-major, one segment of `splits` bytes per byte pair (i, j), the pairs of one shift
// i + j together and padded to whole slices, the highest shift first. C = sum over shifts t of
// 256^t S_t modulo 2^(8 PLANES), S_t the shift's uint8 products, by Horner's rule in the
// accumulators: where a shift's slices end, the MMAs in flight retire and the int32 sums are
// shifted left by a byte before the next shift's are added (int32 arithmetic wraps, and only the
// low bytes are kept: 16 bits stored for PLANES 2, 32 for 4). No workspace and no second pass.
//
// Edges: the copy engine zero-fills what lies outside the matrix (M, N and the K tail), so the
// main loop has no bounds checks; the stores check rows and columns.
//
// Contract with the host (polymm_cuda.wgmma checks it, else another kernel runs): the tensor maps
// describe A as (K, M, parts x batch) and B as (N, K, batch) [or (K, N, parts x batch) when
// K-major], a box of 128 bytes x 128 rows (A) and 64 x 64 [128 bytes x WG_BN] (B) [SWAP: 128
// bytes x WG_BN rows (A) and 128 bytes x 128 / itemsize K-rows (B)], 128-byte
// swizzle; C is C-contiguous (M x N per batch entry). After the two maps comes the argument list
// every polymm CUDA kernel takes; only the sizes, the batch strides (0: a broadcast operand, one
// entry in the map), C and the batch count are read. The grid is one-dimensional: blocks walk the
// tiles of every batch entry, so a batch of small products keeps the ring as full as one large one.

typedef unsigned short pm_u16;

#ifndef WG_BN
#define WG_BN 256
#endif
#ifndef WG_STAGES
#define WG_STAGES 4
#endif
#ifndef WG_GROUP_M
#define WG_GROUP_M 8
#endif
// WG_SPLIT 1: split-K. Each tile's K slices are cut into `splits` runs of slices, each a tile of
// its own (so a deep product on few tiles fills the SMs); run p stores its partial sums, as the
// accumulators hold them (float32, or int32 for the 8-bit types), at (p * batch + z) * M * N in
// the workspace passed as C, and kernels/wgmma_sum.cu adds the runs in order into C.
#ifndef WG_SPLIT
#define WG_SPLIT 0
#endif
// WG_PLANES 1: this module holds the byte-plane kernels (polymm_wgmma_planes<bits>_nk) instead of
// the others (their first call compiles only what it runs).
#ifndef WG_PLANES
#define WG_PLANES 0
#endif
// WG_BM 64 (tiles of at most 64 rows: M <= 64, as in batches of small products): each consumer
// warp group takes tiles of its own, every other one of the block's, from a ring of its own (half
// the stages), instead of both sharing a 128-row tile whose second half lies outside the matrix.
// Not with SWAP (its consumers split a tile's columns, not its rows).
#ifndef WG_BM
#define WG_BM 128
#endif
#define WG_RINGS (WG_BM == 64 ? 2 : 1)
#define WG_RING (WG_STAGES / WG_RINGS)  // stages per ring
#define WG_ROW 128  // bytes of K per slice: one 128-byte swizzle span
#define WG_THREADS 384
#define WG_A_BYTES (WG_BM * WG_ROW)
#define WG_B_BYTES (WG_BN * WG_ROW)
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)
#define WG_ACC (WG_BN / 2)  // float32 accumulators per consumer thread: 64 x WG_BN / 128

// A CUtensorMap (128 opaque bytes, 64-byte aligned), passed by value as a __grid_constant__.
struct __align__(64) pm_tmap {
    unsigned long long w[16];
};

__device__ __forceinline__ void wg_bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void wg_bar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}
__device__ __forceinline__ void wg_bar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrive, and tell the barrier that `bytes` more will land through the copy engine.
__device__ __forceinline__ void wg_bar_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// One box of a 3-D tensor map at coordinates (c0 innermost, c1, c2) into shared memory at `dst`.
__device__ __forceinline__ void wg_tma_load(unsigned dst, const pm_tmap* map, unsigned bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];\n" ::"r"(dst),
        "l"((unsigned long long)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, 128-byte swizzle.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous MMAs.
__device__ __forceinline__ void wg_hold(float (&d)[WG_ACC]) {
#pragma unroll
    for (int i = 0; i < WG_ACC; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <typename R, int S>
__device__ __forceinline__ void wg_hold(R (&d)[S]) {
#pragma unroll
    for (int i = 0; i < S; ++i) asm volatile("" : "+r"(d[i])::"memory");
}
// The accumulator type of a KIND: float32, or int32 for the 8-bit integers (whose low byte is
// NumPy's wrapped result).
template <int KIND>
struct wg_acc {
    typedef float type;
};
template <>
struct wg_acc<3> {
    typedef int type;
};
template <>
struct wg_acc<4> {
    typedef int type;
};

// wg_mma_<f16|bf16>_<transpose B>(d, desc A, desc B): d += A B for one 64 x WG_BN x 16 step; these
// `wgmma.mma_async` wrappers (WG_BN / 2 accumulator operands) are rendered from wgmma_mma.cuh.in
// by polymm_cuda.wgmma ahead of this text.

// The stores of C. Accumulator 4j + e of a consumer thread sits at row 16 * warp + lane / 4
// (+ 8 for e >= 2), column 8j + 2 (lane % 4) + e % 2: the four lanes of a quad share a row and
// hold 2 columns each of every 8-column group. Stored as they lie, a warp would write 8 rows x
// 16 bytes (f16) per instruction, half of each 32-byte sector, and C's stores cost 8 us of a
// 32 us 2048 float16 product on the H100. So for each run of four groups the quad first trades
// pairs (two exchanges, lane bits against group bits) until lane q holds group q whole: one
// 8-element store per lane, whole sectors per row.

// A pair of results as stored, in one or two 32-bit words (float32: two). KIND 5: int32
// accumulators stored whole (split-K's partial sums of the 8-bit types, 32-bit byte-plane
// products); KIND 6: their low 16 bits (16-bit byte-plane products).
template <int KIND>
struct wg_pair {
    static constexpr int WORDS = KIND == 2 || KIND == 5 ? 2 : 1;
};

template <int KIND, typename ACC>
__device__ __forceinline__ void wg_pack(ACC lo, ACC hi, unsigned (&w)[wg_pair<KIND>::WORDS]) {
    if constexpr (KIND == 2) {
        w[0] = __float_as_uint(lo), w[1] = __float_as_uint(hi);
    } else if constexpr (KIND == 5) {
        w[0] = (unsigned)lo, w[1] = (unsigned)hi;
    } else if constexpr (KIND == 6) {  // the low halves: wrap-around, as NumPy's
        w[0] = ((unsigned)lo & 0xffffu) | ((unsigned)hi << 16);
    } else if constexpr (KIND >= 3) {  // the low bytes: wrap-around, as NumPy's
        w[0] = (lo & 0xff) | ((hi & 0xff) << 8);
    } else {
        w[0] = KIND == 1 ? pm_pack_bf16(lo, hi) : pm_pack_f16(lo, hi);
    }
}

// Element e (0..7) of a group held whole: slot e / 2, half e % 2.
template <int KIND, typename T>
__device__ __forceinline__ T wg_element(const unsigned (&v)[4][wg_pair<KIND>::WORDS], int e) {
    const unsigned w = v[e >> 1][wg_pair<KIND>::WORDS == 2 ? (e & 1) : 0];
    if constexpr (KIND == 2) return __uint_as_float(w);
    else if constexpr (KIND == 5) return (T)(int)w;
    else if constexpr (KIND == 3 || KIND == 4) return (T)((w >> (8 * (e & 1))) & 0xff);
    else return (T)(w >> (16 * (e & 1)));
}

template <int KIND, typename ACC, typename T>
__device__ __forceinline__ void wg_store(const ACC (&d)[WG_ACC], T* Cz, int M, int N, int row_base, int n0, int q,
                                         bool vector) {
    constexpr int W = wg_pair<KIND>::WORDS;
#pragma unroll
    for (int j0 = 0; j0 < WG_BN / 8; j0 += 4) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            unsigned v[4][W];
#pragma unroll
            for (int g = 0; g < 4; ++g) wg_pack<KIND>(d[4 * (j0 + g) + 2 * h], d[4 * (j0 + g) + 2 * h + 1], v[g]);
            // lane q slot i := lane i's group q (every lane takes part, whatever its bounds)
#pragma unroll
            for (int bit = 2; bit >= 1; bit >>= 1) {
#pragma unroll
                for (int lo = 0; lo < 4; ++lo) {
                    if (lo & bit) continue;
                    const int hi = lo | bit;
#pragma unroll
                    for (int x = 0; x < W; ++x) {
                        const unsigned got = __shfl_xor_sync(0xffffffffu, (q & bit) ? v[lo][x] : v[hi][x], bit);
                        if (q & bit) v[lo][x] = got; else v[hi][x] = got;
                    }
                }
            }
            const int row = row_base + 8 * h, col = n0 + 8 * (j0 + q);
            if (row >= M || col >= N) continue;
            T* dst = Cz + (pm_i64)row * N + col;
            if (vector && col + 8 <= N) {
                if constexpr (KIND == 2 || KIND == 5) {
                    *(uint4*)dst = make_uint4(v[0][0], v[0][1], v[1][0], v[1][1]);
                    *(uint4*)(dst + 4) = make_uint4(v[2][0], v[2][1], v[3][0], v[3][1]);
                } else if constexpr (KIND == 3 || KIND == 4) {
                    *(uint2*)dst = make_uint2(v[0][0] | (v[1][0] << 16), v[2][0] | (v[3][0] << 16));
                } else {
                    *(uint4*)dst = make_uint4(v[0][0], v[1][0], v[2][0], v[3][0]);
                }
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    if (col + e < N) dst[e] = wg_element<KIND, T>(v, e);
            }
        }
    }
}

// Two neighbouring 32-bit words of shared memory.
__device__ __forceinline__ void wg_lds2(unsigned addr, unsigned& x, unsigned& y) {
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(x), "=r"(y) : "r"(addr) : "memory");
}

// The stores of a tile of C^T (B N-major, read through registers): accumulator 4j + e holds
// C[m][n + e / 2] for m = m_base + 8j + e % 2; the pair of columns n, n + 1 is one store (8 bytes
// of float32: a warp's stores cover two whole 32-byte sectors of each of four rows; 2 bytes of
// 8-bit results).
template <int KIND, typename ACC, typename T>
__device__ __forceinline__ void wg_store_t(const ACC (&d)[WG_ACC], T* Cz, int M, int N, int n, int m_base, bool pairs) {
    if (n >= N) return;
#pragma unroll
    for (int j = 0; j < WG_BN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int m = m_base + 8 * j + e;
            if (m >= M) continue;
            T* dst = Cz + (pm_i64)m * N + n;
            if (pairs && n + 1 < N) {
                if constexpr (KIND == 2) *(float2*)dst = make_float2(d[4 * j + e], d[4 * j + 2 + e]);
                else if constexpr (KIND == 5) *(int2*)dst = make_int2(d[4 * j + e], d[4 * j + 2 + e]);
                else *(unsigned short*)dst = (unsigned short)((d[4 * j + e] & 0xff) | ((d[4 * j + 2 + e] & 0xff) << 8));
            } else {
                dst[0] = (T)d[4 * j + e];
                if (n + 1 < N) dst[1] = (T)d[4 * j + 2 + e];
            }
        }
    }
}

// Tile `tile` of C (row-major over the tile grid, in groups of WG_GROUP_M tile rows, so the tiles
// computed at once share panels of A and B in L2): its first row and column.
__device__ __forceinline__ void wg_tile(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
    const int per_group = WG_GROUP_M * tiles_n, first = (tile / per_group) * WG_GROUP_M;
    const int rows = min(tiles_m - first, WG_GROUP_M);
    m0 = (first + (tile % per_group) % rows) * WG_BM;
    n0 = ((tile % per_group) / rows) * WG_BN;
}

// KIND: 0 float16, 1 bfloat16, 2 TF32 (float32 storage), 3 int8, 4 uint8; SEGMENTS: 1, or 3 for "tf32x3";
// PLANES: 0, or the bytes of a byte-plane product's result (KIND 4).
template <int KIND, bool B_KMAJOR, int SEGMENTS, int PLANES, typename T>
__device__ __forceinline__ void wg_gemm(const pm_tmap* ta, const pm_tmap* tb, int M, int N, int K, pm_i64 a_sb,
                                        pm_i64 b_sb, T* __restrict__ C, pm_i64 c_off, int batch, int splits) {
    // TF32 and 8-bit types with B N-major: a tile of C^T, B^T's fragments from registers (see the
    // top of the file)
    constexpr bool SWAP = KIND >= 2 && !B_KMAJOR;
    typedef typename wg_acc<KIND>::type ACC;
    static_assert(SEGMENTS == 1 || (KIND == 2 && !SWAP), "three products are the TF32 split, K-major");
    static_assert(PLANES == 0 || (KIND == 4 && !SWAP && !WG_SPLIT), "byte planes are uint8, K-major, unsplit");
    static_assert(WG_RINGS == 1 || (!SWAP && WG_STAGES % 2 == 0), "64-row tiles: rows of C, two rings");
    // bytes per operand element (T is C's type: wider than the operands' for byte planes)
    constexpr int ISZ = KIND >= 3 ? 1 : KIND == 2 ? 4 : 2;
    static_assert(PLANES > 0 || sizeof(T) == ISZ, "operands and C share their type but for byte planes");
    constexpr int BK = WG_ROW / ISZ;  // elements of K per slice
    extern __shared__ unsigned char wg_raw[];
    // 128-byte swizzle atoms are 1024 bytes: align the ring to that.
    const unsigned raw = pm_smem_addr(wg_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    const unsigned bars = ring + WG_STAGES * WG_STAGE_BYTES;  // full[s] at +8s, empty[s] at +8(WG_STAGES+s)

    const int tid = threadIdx.x, wg = tid >> 7;
    // tiles of 128 rows by WG_BN columns of C, or of C^T (rows along N) when SWAP
    const int rows = SWAP ? N : M, cols = SWAP ? M : N;
    const int tiles_m = (rows + WG_BM - 1) / WG_BM, tiles_n = (cols + WG_BN - 1) / WG_BN, per_entry = tiles_m * tiles_n;
    const int parts = WG_SPLIT ? splits : 1;  // runs of K slices (split-K), each a tile of its own
    const int tiles = per_entry * batch * parts;  // of every batch entry, one after the other, per run
    const int kt_count = (K + BK - 1) / BK, kt_run = (kt_count + parts - 1) / parts;
    // The K slices of a tile (run `part`: slices kt_run * part on; none past the end), and where
    // its batch entry, rows and columns lie.
    auto locate = [&](int tile, int& part, int& z, int& r0, int& c0, int& kt0, int& count) {
        part = tile / (per_entry * batch);
        const int rest = tile - part * per_entry * batch;
        z = rest / per_entry;
        wg_tile(rest - z * per_entry, tiles_m, tiles_n, r0, c0);
        kt0 = part * kt_run;
        count = max(0, min(kt_count - kt0, kt_run));
    };

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < WG_STAGES; ++s) {
            wg_bar_init(bars + 8 * s, 1);
            wg_bar_init(bars + 8 * (WG_STAGES + s), 3 - WG_RINGS);  // the consumers of its tiles
        }
        asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    // Persistent blocks: block b takes tiles b, b + gridDim.x, ... (of all batch entries). Both roles
    // walk the same sequence of K slices, counted by `it` across tiles, so the ring's stage and
    // phase carry on from one tile to the next, and the producer fills the next tile's first
    // stages while the consumers store the last one. With two rings (WG_BM 64) the block's tiles
    // alternate between them, each ring counting its own slices.
    if (wg == 0) {  // producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            // entries per part along the maps' third dimension (the split parts of "tf32x3")
            const int a_entries = a_sb ? batch : 1, b_entries = b_sb ? batch : 1;
            int its[WG_RINGS] = {};
            for (int tile = blockIdx.x, local = 0; tile < tiles; tile += gridDim.x, ++local) {
                int part, z, r0, c0, kt0, run;
                locate(tile, part, z, r0, c0, kt0, run);
                const int za = a_sb ? z : 0, zb = b_sb ? z : 0, slices = SEGMENTS * run;
                const int first = (local % WG_RINGS) * WG_RING;  // the ring of this tile
                int& it = its[local % WG_RINGS];
                for (int j = 0; j < slices; ++j, ++it) {
                    const int seg = SEGMENTS == 1 ? 0 : j / run, kt = kt0 + j - seg * run;
                    const int ca = (seg == 1) * a_entries + za, cb = (SEGMENTS == 3 && seg == 0) * b_entries + zb;
                    const int s = first + it % WG_RING;
                    if (it >= WG_RING) wg_bar_wait(bars + 8 * (WG_STAGES + s), ((it / WG_RING) - 1) & 1);
                    const unsigned full = bars + 8 * s, a_dst = ring + s * WG_STAGE_BYTES, b_dst = a_dst + WG_A_BYTES;
                    wg_bar_expect(full, WG_STAGE_BYTES);
                    if constexpr (SWAP) {  // B's 128 columns in boxes of 128 bytes (the fragments' source), A's rows
#pragma unroll
                        for (int c = 0; c < ISZ; ++c)
                            wg_tma_load(a_dst + c * WG_ROW * BK, tb, full, r0 + BK * c, kt * BK, cb);
                        wg_tma_load(b_dst, ta, full, kt * BK, c0, ca);
                    } else {
                        wg_tma_load(a_dst, ta, full, kt * BK, r0, ca);
                        if (B_KMAJOR) {
                            wg_tma_load(b_dst, tb, full, kt * BK, c0, cb);
                        } else {
#pragma unroll
                            for (int c = 0; c < WG_BN / 64; ++c)
                                wg_tma_load(b_dst + c * 8192, tb, full, c0 + c * 64, kt * BK, zb);
                        }
                    }
                }
            }
        }
        return;
    }

    // consumers
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    // rows of the tile this warp group multiplies, and the ring it reads (two: its own tiles)
    const int row0 = WG_RINGS == 1 ? (wg - 1) * 64 : 0, first = WG_RINGS == 1 ? 0 : (wg - 1) * WG_RING;
    const int t = tid & 127, warp = t >> 5, lane = t & 31;
    C += c_off;
    // split-K: the partial sums, as the accumulators hold them, in the workspace passed as C
    ACC* const W = reinterpret_cast<ACC*>(C);
    typedef typename pm_pick<WG_SPLIT, ACC, T>::type OUT;
    constexpr int STORED = WG_SPLIT ? (KIND >= 3 ? 5 : 2) : PLANES == 2 ? 6 : PLANES == 4 ? 5 : KIND;  // how wg_store packs an OUT pair
    OUT* const out = WG_SPLIT ? (OUT*)W : (OUT*)C;
    // every entry's C starts as aligned as the first when N is a multiple of 8
    const bool vector = ((N & 7) == 0) && ((((unsigned long long)out) & (8 * sizeof(OUT) - 1)) == 0);
    // SWAP: fragment rows g and g + 8 of this thread (g = lane / 4) are columns n and n + 1 of C,
    // n = r0 + n_in.
    // TF32: n_in chosen so that one 8-byte load fetches both, and so that the loads of a half-warp
    // (k = q or q + 4, q = lane % 4, each 128-byte k-row swizzled by k % 8) meet every bank once.
    // frag0/frag1: their byte offsets in a stage for k = q and q + 4 (+ 1024 per k8 step).
    // 8-bit: a fragment word holds 4 K values of one column, which lie in 4 k-rows of the stage. One
    // `ldmatrix.x4.trans` gives this thread, of 16 columns (the warp's 16-byte chunk of each row),
    // columns 2g and 2g + 1 of two k-rows per matrix: matrices X and Y hold k-rows PI and SIGMA of
    // the k32 step's first 16, X' and Y' of its last 16, and two byte permutes make the four words
    // (column 2g: fragment row g, 2g + 1: row g + 8). PI = 0 1 4 5 10 11 14 15 and SIGMA = 2 3 6 7
    // 8 9 12 13 give thread q k-rows 4q .. 4q + 3 between them, and the eight rows of one matrix
    // distinct residues mod 8: distinct 16-byte bank groups under the copy engine's swizzle.
    const int g = lane >> 2, q = lane & 3, chunk = 2 * (wg - 1) + (warp >> 1);
    const int cw = 4 * (wg - 1) + warp;  // 8-bit: this warp's 16-byte chunk of a k-row
    const int n_in = KIND == 2 ? 32 * chunk + 16 * ((g >> 1) & 1) + 8 * (warp & 1) + 4 * (g >> 2) + 2 * (g & 1)
                               : 16 * cw + 2 * g;
    const unsigned frag0 = chunk * 4096 + q * 128 + ((((n_in & 31) >> 2) ^ q) << 4) + ((n_in & 3) << 2);
    const unsigned frag1 = chunk * 4096 + (q + 4) * 128 + ((((n_in & 31) >> 2) ^ (q + 4)) << 4) + ((n_in & 3) << 2);
    const int mat = lane >> 3, r8 = lane & 7;
    const int k_row = 4 * (r8 >> 1) + (r8 & 1) + 2 * ((mat & 1) ^ (r8 >> 2)) + 16 * (mat >> 1);
    const unsigned frag8 = k_row * WG_ROW + ((cw ^ (k_row & 7)) << 4);
    // X holds k-rows 4q, 4q + 1 of this thread for q < 2, Y for q >= 2
    const unsigned even = q < 2 ? 0x6420u : 0x2064u, odd = q < 2 ? 0x7531u : 0x3175u;
    const bool pairs = (N % 2 == 0) && ((((unsigned long long)out) & (2 * sizeof(OUT) - 1)) == 0);
    int it = 0;
    ACC d[WG_ACC];
    unsigned fr[16];  // SWAP: B^T's fragments for the four k steps of a slice
    for (int tile = blockIdx.x + (first ? gridDim.x : 0); tile < tiles; tile += WG_RINGS * gridDim.x) {
        int part, z, r0, c0, kt0, run;
        locate(tile, part, z, r0, c0, kt0, run);
        (void)kt0;
        const int slices = SEGMENTS * run;
        OUT* Cz = out + ((pm_i64)part * batch + z) * M * N;
#pragma unroll
        for (int i = 0; i < WG_ACC; ++i) d[i] = 0;
        // byte planes: the slice where the current shift's segments end (`splits` is the bytes of K
        // per segment; a shift of `group` segments, padded to whole slices)
        const int seg = PLANES ? splits : 0;
        int group = PLANES, boundary = (PLANES * seg + BK - 1) / BK;
        for (int j = 0; j < slices; ++j, ++it) {
            if constexpr (PLANES > 0) {
                if (j == boundary) {  // Horner's step: C = 256 C + the next shift's products
                    wg_wait<0>();
                    wg_hold(d);
#pragma unroll
                    for (int i = 0; i < WG_ACC; ++i) d[i] = (int)((unsigned)d[i] << 8);
                    --group;
                    boundary += (group * seg + BK - 1) / BK;
                }
            }
            const int s = first + it % WG_RING;
            wg_bar_wait(bars + 8 * s, (it / WG_RING) & 1);
            const unsigned stage = ring + s * WG_STAGE_BYTES, a_base = stage + row0 * 128, b_base = stage + WG_A_BYTES;
            if constexpr (SWAP && KIND == 2) {
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    wg_lds2(stage + frag0 + 1024 * k, fr[4 * k], fr[4 * k + 1]);
                    wg_lds2(stage + frag1 + 1024 * k, fr[4 * k + 2], fr[4 * k + 3]);
                }
                wg_hold(fr);
            } else if constexpr (SWAP) {
#pragma unroll
                for (int k = 0; k < 4; ++k) {  // k32 steps: 32 k-rows of 128 bytes apart
                    unsigned x[4];
                    pm_ldsm_x4_t(x, stage + frag8 + 4096 * k);
                    fr[4 * k] = __byte_perm(x[0], x[1], even);
                    fr[4 * k + 1] = __byte_perm(x[0], x[1], odd);
                    fr[4 * k + 2] = __byte_perm(x[2], x[3], even);
                    fr[4 * k + 3] = __byte_perm(x[2], x[3], odd);
                }
                wg_hold(fr);
            }
            wg_hold(d);
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; ++k) {  // four steps of 32 bytes: k16 (2-byte types), k8 (TF32), k32 (8-bit)
                const unsigned long long da = wg_desc(a_base + k * 32, 16, 1024);
                if constexpr (SWAP) {
                    const unsigned long long db = wg_desc(b_base + k * 32, 16, 1024);
                    if constexpr (KIND == 2) wg_mma_tf32_rs(d, fr[4 * k], fr[4 * k + 1], fr[4 * k + 2], fr[4 * k + 3], db);
                    else if constexpr (KIND == 3) wg_mma_s8_rs(d, fr[4 * k], fr[4 * k + 1], fr[4 * k + 2], fr[4 * k + 3], db);
                    else wg_mma_u8_rs(d, fr[4 * k], fr[4 * k + 1], fr[4 * k + 2], fr[4 * k + 3], db);
                } else if constexpr (KIND == 2) {
                    wg_mma_tf32_0(d, da, wg_desc(b_base + k * 32, 16, 1024));
                } else if constexpr (KIND == 3) {
                    wg_mma_s8_0(d, da, wg_desc(b_base + k * 32, 16, 1024));
                } else if constexpr (KIND == 4) {
                    wg_mma_u8_0(d, da, wg_desc(b_base + k * 32, 16, 1024));
                } else if constexpr (B_KMAJOR) {
                    const unsigned long long db = wg_desc(b_base + k * 32, 16, 1024);
                    if constexpr (KIND == 1) wg_mma_bf16_0(d, da, db); else wg_mma_f16_0(d, da, db);
                } else {
                    const unsigned long long db = wg_desc(b_base + k * 2048, 8192, 1024);
                    if constexpr (KIND == 1) wg_mma_bf16_1(d, da, db); else wg_mma_f16_1(d, da, db);
                }
            }
            wg_commit();
            if constexpr (SWAP) {
                // No register an MMA in flight reads may be written (ptxas would serialize every
                // MMA), so a slice's MMAs retire before the next slice's fragments load; the other
                // consumer warp group's MMAs keep the tensor cores busy meanwhile.
                wg_wait<0>();
                wg_hold(d);
                if (t == 0) wg_bar_arrive(bars + 8 * (WG_STAGES + s));
            } else {
                // The MMAs of the slice before this one are done once at most one group is in
                // flight: its stage goes back to the producer while this slice's run.
                wg_wait<1>();
                wg_hold(d);
                if (j > 0 && t == 0) wg_bar_arrive(bars + 8 * (WG_STAGES + first + (it - 1) % WG_RING));
            }
        }
        wg_wait<0>();
        wg_hold(d);
        if (!SWAP && slices > 0 && t == 0) wg_bar_arrive(bars + 8 * (WG_STAGES + first + (it - 1) % WG_RING));

        if constexpr (SWAP) wg_store_t<STORED>(d, Cz, M, N, r0 + n_in, c0 + 2 * q, pairs);
        else wg_store<STORED>(d, Cz, M, N, r0 + row0 + 16 * warp + (lane >> 2), c0, lane & 3, vector);
    }
}

// The two tensor maps, then the argument list every polymm CUDA kernel takes, then the batch count
// and `splits`: the runs of split-K (WG_SPLIT; else 1), or a byte-plane product's bytes of K per
// byte pair (WG_PLANES) (polymm_cuda.abi's WGMMA list).
#define WG_KERNEL_OF(NAME, KIND, B_KMAJOR, SEGMENTS, PLANES, T)                                          \
    extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)                                          \
        NAME(const __grid_constant__ pm_tmap ta, const __grid_constant__ pm_tmap tb, int M, int N, int K,  \
             const T* A, pm_i64 a_off, pm_i64 sa0, pm_i64 sa1, pm_i64 sa2, const T* B, pm_i64 b_off,       \
             pm_i64 sb0, pm_i64 sb1, pm_i64 sb2, T* __restrict__ C, pm_i64 c_off, int batch, int splits) { \
        (void)A, (void)a_off, (void)sa1, (void)sa2, (void)B, (void)b_off, (void)sb1, (void)sb2;          \
        wg_gemm<KIND, B_KMAJOR, SEGMENTS, PLANES>(&ta, &tb, M, N, K, sa0, sb0, C, c_off, batch, splits); \
    }
#define WG_KERNEL(NAME, KIND, B_KMAJOR, SEGMENTS, T) WG_KERNEL_OF(NAME, KIND, B_KMAJOR, SEGMENTS, 0, T)
#if WG_PLANES
WG_KERNEL_OF(polymm_wgmma_planes16_nk, 4, true, 1, 2, pm_u16)
WG_KERNEL_OF(polymm_wgmma_planes32_nk, 4, true, 1, 4, unsigned)
#else
WG_KERNEL(polymm_wgmma_float16_kn, 0, false, 1, pm_u16)
WG_KERNEL(polymm_wgmma_float16_nk, 0, true, 1, pm_u16)
WG_KERNEL(polymm_wgmma_bfloat16_kn, 1, false, 1, pm_u16)
WG_KERNEL(polymm_wgmma_bfloat16_nk, 1, true, 1, pm_u16)
WG_KERNEL(polymm_wgmma_tf32_nk, 2, true, 1, float)
WG_KERNEL(polymm_wgmma_tf32x3_nk, 2, true, 3, float)
WG_KERNEL(polymm_wgmma_int8_nk, 3, true, 1, signed char)
WG_KERNEL(polymm_wgmma_uint8_nk, 4, true, 1, unsigned char)
#if WG_RINGS == 1  // the swapped forms (tiles of C^T) split a tile's columns between the consumers
WG_KERNEL(polymm_wgmma_tf32_kn, 2, false, 1, float)
WG_KERNEL(polymm_wgmma_int8_kn, 3, false, 1, signed char)
WG_KERNEL(polymm_wgmma_uint8_kn, 4, false, 1, unsigned char)
#endif
#endif
