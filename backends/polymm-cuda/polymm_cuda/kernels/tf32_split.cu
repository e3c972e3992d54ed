// polymm CUDA-only: the float32 operands of the TF32 tensor-core products ("tf32" and "tf32x3"
// precision modes, kernels/wgmma.cu), made ready before the product and repaired after it.
//
// polymm_tf32_split: an operand as K-major rows in TF32. Row r of the output is row r of A, or
// column r of B (B^T), whatever the input's strides: a 32 x 128 tile goes through shared memory,
// read along the input's contiguous axis and written along K, so both sides coalesce.
//   parts 1 ("tf32" on an operand the copy engine cannot read as it lies): hi = tf32(x).
//   parts 2 ("tf32x3"): hi = tf32(x) and lo = tf32(x - hi), both TF32 numbers whose sum is within
//     2^-22 |x| of x (polymm.testing.emulation.split_tf32). Inf and NaN cannot be split (Inf - Inf
//     is NaN, and Inf * 0 in the cross products too), so their parts are stored as 0 and the row
//     is flagged in F for polymm_tf32_fixup.
// Rounding: ptx.cuh's pm_tf32_round (to nearest, ties to even; finite stays finite).
//
// polymm_tf32_fixup ("tf32x3", after the product): every row of C whose row of A holds Inf or NaN,
// and every column whose column of B does, recomputed in float32 from the original operands,
// so specials propagate as in any float32 product. Without specials it only reads the flags.
//
// Argument lists: polymm_cuda.abi (TF32_SPLIT, TF32_FIXUP); launch geometry:
// polymm_cuda.wgmma.tf32_launch.

#define SP_ROWS 32  // rows per block (a warp's lanes when the rows are the contiguous axis)
#define SP_TK 128   // K per step: each thread has 16 loads in flight
#define SP_TY 8     // block (32, 8)
#define SP_KC 512   // K per block; F has one flag per row and such chunk

extern "C" __global__ void __launch_bounds__(SP_ROWS * SP_TY)
    polymm_tf32_split(const int R, const int KK, const int parts, const int nkc, const float* __restrict__ X,
                      const pm_i64 x_off, const pm_i64 x_sb, const pm_i64 x_sr, const pm_i64 x_sk,
                      float* __restrict__ P, const pm_i64 ld, const pm_i64 part_stride, int* __restrict__ F,
                      const pm_i64 f_off) {
    __shared__ float tile[SP_ROWS][SP_TK + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, r0 = blockIdx.x * SP_ROWS, kc = blockIdx.y, b = blockIdx.z;
    const bool rows_fast = (x_sr < 0 ? -x_sr : x_sr) < (x_sk < 0 ? -x_sk : x_sk);
    const float* src = X + x_off + b * x_sb;
    float* dst = P + ((pm_i64)b * R) * ld;
    const int k_end = min(KK, (kc + 1) * SP_KC);
    unsigned bad = 0;  // bit i: row r0 + ty + 8i holds Inf or NaN
    for (int k0 = kc * SP_KC; k0 < k_end; k0 += SP_TK) {
        // read along the input's contiguous axis: lanes along the rows, or along K
#pragma unroll
        for (int i = 0; i < SP_ROWS * SP_TK / (32 * SP_TY); ++i) {
            const int e = i * SP_TY + ty;  // which 32-element line of the tile this warp reads
            const int rr = rows_fast ? tx : e % SP_ROWS, kk = rows_fast ? e : (e / SP_ROWS) * 32 + tx;
            const int r = r0 + rr, k = k0 + kk;
            tile[rr][kk] = (r < R && k < k_end) ? src[r * x_sr + k * x_sk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < SP_ROWS / SP_TY; ++i) {  // write along K
            const int rr = ty + SP_TY * i, r = r0 + rr;
#pragma unroll
            for (int j = 0; j < SP_TK / 32; ++j) {
                const int k = k0 + 32 * j + tx;
                if (r >= R || k >= k_end) continue;
                const float x = tile[rr][32 * j + tx];
                const float hi = __uint_as_float(pm_tf32_round(__float_as_uint(x)));
                float* out = dst + (pm_i64)r * ld + k;
                if (parts == 1) {
                    out[0] = hi;
                } else if (isfinite(x)) {
                    out[0] = hi;
                    out[part_stride] = __uint_as_float(pm_tf32_round(__float_as_uint(x - hi)));
                } else {
                    out[0] = 0.f;
                    out[part_stride] = 0.f;
                    bad |= 1u << i;
                }
            }
        }
        __syncthreads();
    }
    if (parts == 1) return;
#pragma unroll
    for (int i = 0; i < SP_ROWS / SP_TY; ++i) {  // a warp is one ty: its lanes share rows
        const unsigned any = __any_sync(0xffffffffu, (bad >> i) & 1u);
        const int r = r0 + ty + SP_TY * i;
        if (tx == 0 && r < R) F[f_off + ((pm_i64)b * R + r) * nkc + kc] = (int)any;
    }
}

__device__ __forceinline__ bool fx_flagged(const int* F, pm_i64 at, int nkc) {
    int any = 0;
    for (int c = 0; c < nkc; ++c) any |= F[at + c];
    return any != 0;
}

// One block per row of C (index < M) or column (index >= M), in turn; the batch along z.
extern "C" __global__ void __launch_bounds__(256)
    polymm_tf32_fixup(const int M, const int N, const int K, const float* __restrict__ A, const pm_i64 a_off,
                      const pm_i64 a_sb, const pm_i64 a_sm, const pm_i64 a_sk, const float* __restrict__ B,
                      const pm_i64 b_off, const pm_i64 b_sb, const pm_i64 b_sk, const pm_i64 b_sn,
                      float* __restrict__ C, const pm_i64 c_off, const int* __restrict__ F, const pm_i64 fb_off,
                      const int nkc) {
    const int z = blockIdx.z;
    const pm_i64 za = a_sb ? z : 0, zb = b_sb ? z : 0;
    const float* a = A + a_off + z * a_sb;
    const float* b = B + b_off + z * b_sb;
    float* c = C + c_off + (pm_i64)z * M * N;
    for (int idx = blockIdx.x; idx < M + N; idx += gridDim.x) {
        const bool row = idx < M;
        if (!(row ? fx_flagged(F, (za * M + idx) * nkc, nkc) : fx_flagged(F, fb_off + (zb * N + idx - M) * nkc, nkc)))
            continue;
        // the same sequential float32 sum for an element whatever pass computes it
        for (int i = threadIdx.x; i < (row ? N : M); i += blockDim.x) {
            const int m = row ? idx : i, n = row ? i : idx - M;
            float s = 0.f;
            for (int k = 0; k < K; ++k) s = fmaf(a[m * a_sm + k * a_sk], b[k * b_sk + n * b_sn], s);
            c[(pm_i64)m * N + n] = s;
        }
    }
}
