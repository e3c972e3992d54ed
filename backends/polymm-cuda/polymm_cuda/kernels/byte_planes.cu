// polymm CUDA-only: 16-, 32- and 64-bit integer products on the 8-bit tensor cores, by byte planes.
//
// NumPy's integer product wraps modulo 2^w (w = 8 NB bits, NB bytes per element). Cut each operand
// into its NB bytes, read as unsigned (two's complement: the same residues): a = sum_i a_i 256^i,
// b = sum_j b_j 256^j. Then, modulo 2^w, a b = sum over i + j < NB of 256^(i+j) a_i b_j: the
// pairs whose shift i + j reaches NB vanish. So C = sum over those pairs ("segments") of
// 256^(i+j) (A_i B_j), each A_i B_j a uint8 product on the tensor cores (kernels/wgmma.cu).
// There are NB (NB + 1) / 2 segments (3, 10, 36), the highest shift first (t = NB - 1, .., 0;
// within a shift, i = 0 up to t, j = t - i): the order kernels/wgmma.cu's WG_PLANES products
// take them in, by Horner's rule, for NB = 2 and 4 where no run is cut.
//
// polymm_byte_planes_<NB>: an operand (R rows of KK along K, any strides: A's rows, or B's columns)
// as K-major rows of its planes side by side: segment s, the pair (i, t - i), holds KK bytes from
// start(t, i) = (the shifts above t, each padded to whole BP_TK) + i seg, zeros from KK to seg
// and from the end of a shift's segments to its padding; row r of batch entry b at P[(b R + r) ld
// + start(t, i) + k]. The one product then runs over K' = ld: by Horner's rule into C
// (WG_PLANES; seg = KK rounded up to 32, so a shallow product's pairs of one shift share its slices:
// an outer product of K = 32 int32s takes 4 slices of 128, not 10), or split into S runs of seg (a
// multiple of BP_TK, so the shifts need no padding; or `per` runs per segment: each segment of seg
// = per x the run's depth), each run's int32 sums apart in a workspace (WG_SPLIT), for 64-bit
// results and deep products on few tiles. polymm_cuda.planes.starts computes the same layout.
// A 32 x 128 tile goes through shared memory, read along the input's contiguous axis and written
// along K, four bytes per thread: both sides coalesce.
//
// polymm_planes_sum_<NB>: C[c_off + e] = sum over the runs of W[run count + e] << 8 shift(run),
// in NB-byte unsigned arithmetic (32-bit for NB = 2; wrapping is the point). A segment's sum is
// exact while its run is at most 66051 deep (255^2 x 66051 < 2^32), which the planner keeps for
// NB = 8; for 2 and 4 only its residue modulo 2^32 matters.
//
// Argument lists: polymm_cuda.abi (BYTE_PLANES, PLANES_SUM); launches: polymm_cuda.planes.

#define BP_ROWS 32  // rows per block
#define BP_TK 128   // K per block: the tile's columns, four per thread on the way out
#define BP_TY 8     // block (32, 8)

// Segment s of S (the highest shift first): its shift t and A's byte i (B's: t - i).
__device__ __forceinline__ void bp_pair(int s, int S, int& t, int& i) {
    const int u = S - 1 - s;  // counted from the lowest shift, where shift t holds u = t (t + 1) / 2 .. + t
    t = 0;
    while ((t + 1) * (t + 2) / 2 <= u) ++t;
    i = t - (u - t * (t + 1) / 2);
}

// Four bytes of plane `bits / 8` of four consecutive elements, as one word.
template <typename U>
__device__ __forceinline__ unsigned bp_word(U x0, U x1, U x2, U x3, int bits) {
    return (unsigned)((x0 >> bits) & 0xffu) | (unsigned)((x1 >> bits) & 0xffu) << 8 |
           (unsigned)((x2 >> bits) & 0xffu) << 16 | (unsigned)((x3 >> bits) & 0xffu) << 24;
}

#define PM_BYTE_PLANES(NB, U)                                                                              \
    extern "C" __global__ void __launch_bounds__(BP_ROWS * BP_TY)                                          \
        polymm_byte_planes_##NB(const int R, const int KK, const int side, const U* __restrict__ X, \
                                const pm_i64 x_off, const pm_i64 x_sb, const pm_i64 x_sr, const pm_i64 x_sk,   \
                                unsigned char* __restrict__ P, const pm_i64 ld, const pm_i64 seg) {         \
        __shared__ U tile[BP_ROWS][BP_TK + 1];                                                             \
        const int tx = threadIdx.x, ty = threadIdx.y, r0 = blockIdx.x * BP_ROWS, b = blockIdx.z;          \
        const pm_i64 k0 = (pm_i64)blockIdx.y * BP_TK;                                                      \
        const bool rows_fast = (x_sr < 0 ? -x_sr : x_sr) < (x_sk < 0 ? -x_sk : x_sk);                     \
        const U* src = X + x_off + b * x_sb;                                                               \
        _Pragma("unroll") for (int i = 0; i < BP_ROWS * BP_TK / (32 * BP_TY); ++i) {                       \
            const int e = i * BP_TY + ty; /* the 32-element line of the tile this warp reads */            \
            const int rr = rows_fast ? tx : e % BP_ROWS, kk = rows_fast ? e : (e / BP_ROWS) * 32 + tx;     \
            const pm_i64 r = r0 + rr, k = k0 + kk;                                                         \
            tile[rr][kk] = (r < R && k < KK) ? src[r * x_sr + k * x_sk] : (U)0;                            \
        }                                                                                                  \
        __syncthreads();                                                                                   \
        _Pragma("unroll") for (int line = 0; line < BP_ROWS / BP_TY; ++line) {                             \
            const int rr = ty + BP_TY * line;                                                              \
            if (r0 + rr >= R) break;                                                                       \
            const U x0 = tile[rr][4 * tx], x1 = tile[rr][4 * tx + 1], x2 = tile[rr][4 * tx + 2],           \
                    x3 = tile[rr][4 * tx + 3];                                                             \
            unsigned char* const row = P + ((pm_i64)b * R + r0 + rr) * ld;                                 \
            /* each shift's segments, then its padding to whole BP_TK (zeros, written by the first   */    \
            /* column of blocks); offsets within a row fit in 32 bits (the planner bounds seg)       */    \
            const int sg = (int)seg, col = (int)k0 + 4 * tx;                                               \
            int start = 0;                                                                                 \
            _Pragma("unroll") for (int t = NB - 1; t >= 0; --t) {                                          \
                const int end = start + (t + 1) * sg, next = start + ((t + 1) * sg + BP_TK - 1) / BP_TK * BP_TK; \
                if (col < sg) {                                                                            \
                    _Pragma("unroll") for (int i = 0; i <= t; ++i)                                         \
                        *(unsigned*)(row + start + i * sg + col) = bp_word<U>(x0, x1, x2, x3, 8 * (side ? t - i : i)); \
                }                                                                                          \
                if (blockIdx.y == 0 && end + 4 * tx < next) *(unsigned*)(row + end + 4 * tx) = 0u;        \
                start = next;                                                                              \
            }                                                                                              \
        }                                                                                                  \
    }
PM_BYTE_PLANES(2, unsigned short)
PM_BYTE_PLANES(4, unsigned)
PM_BYTE_PLANES(8, unsigned long long)

// Four consecutive elements per thread and step (16-byte loads of W where count is a multiple of
// 4), four runs' loads in flight: a load at a time per thread left the sum at a third of the
// memory's bandwidth (too few bytes in flight to cover its latency).
template <typename U, typename ACC>
__device__ __forceinline__ void bp_sum(const unsigned* __restrict__ W, const pm_i64 count, const int S,
                                       const int per, U* __restrict__ C) {
    const pm_i64 step = (pm_i64)gridDim.x * blockDim.x, quads = (count + 3) / 4;
    const bool vector = (count & 3) == 0;
    for (pm_i64 q = (pm_i64)blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += step) {
        const pm_i64 e = 4 * q;
        ACC sum[4] = {0, 0, 0, 0};
#pragma unroll 4
        for (int run = 0; run < S * per; ++run) {
            int t, i;
            bp_pair(run / per, S, t, i);
            const int shift = 8 * t;
            const unsigned* w = W + (pm_i64)run * count + e;
            if (vector) {
                const uint4 v = *reinterpret_cast<const uint4*>(w);
                sum[0] += (ACC)v.x << shift;
                sum[1] += (ACC)v.y << shift;
                sum[2] += (ACC)v.z << shift;
                sum[3] += (ACC)v.w << shift;
            } else {
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    if (e + i < count) sum[i] += (ACC)w[i] << shift;
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (e + i < count) C[e + i] = (U)sum[i];
    }
}

#define PM_PLANES_SUM(NB, U, ACC)                                                                          \
    extern "C" __global__ void polymm_planes_sum_##NB(const unsigned* __restrict__ W, const pm_i64 count,  \
                                                      const int S, const int per, U* __restrict__ C,       \
                                                      const pm_i64 c_off) {                                \
        bp_sum<U, ACC>(W, count, S, per, C + c_off);                                                       \
    }
PM_PLANES_SUM(2, unsigned short, unsigned)
PM_PLANES_SUM(4, unsigned, unsigned)
PM_PLANES_SUM(8, unsigned long long, unsigned long long)
