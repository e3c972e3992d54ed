// polymm CUDA-only helper: a tiled transposed copy, dst[z][c][r] = src[z][r][c], for the copies
// the tensor cores need (an int8 B read K-major, a column-major A). CuPy's own copy of a
// transposed view reads or writes one element per lane far apart: on the H100 it took about
// 50 us for a 1024 x 1024 int8 matrix, more than the product itself. Here a block moves a
// 32 x 32 tile through shared memory, so both the reads (along c) and the writes (along r) run
// along contiguous rows. src: from element s_off, rows s_r elements apart, unit stride along c,
// matrices s_b apart; dst: rows (c) ld elements apart (ld >= R: padding left as it is), matrices
// C * ld apart. Arguments as polymm_cuda.abi's TRANSPOSE. No #include.
//
// 8-bit elements take 64 x 64 tiles, each thread moving 4-byte words where the strides and
// addresses allow: one byte per thread and instruction moved a 2048 x 2048 int8 matrix at
// 0.7 TB/s on the H100 (11.6 us). Launch geometry: polymm_cuda.transpose's transpose_grid,
// blocks of 32 x 8.

#define PM_TRANSPOSE(NAME, T)                                                                      \
    extern "C" __global__ void NAME(const T* __restrict__ src, long long s_off, long long s_b,     \
                                    long long s_r, T* __restrict__ dst, long long ld, int R,       \
                                    int C) {                                                       \
        __shared__ T tile[32][33];                                                                 \
        const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;                                      \
        const T* s = src + s_off + (long long)blockIdx.z * s_b;                                    \
        T* d = dst + (long long)blockIdx.z * C * ld;                                               \
        for (int i = threadIdx.y; i < 32; i += 8) {                                                \
            const int r = r0 + i, c = c0 + threadIdx.x;                                            \
            if (r < R && c < C) tile[i][threadIdx.x] = s[(long long)r * s_r + c];                  \
        }                                                                                          \
        __syncthreads();                                                                           \
        for (int i = threadIdx.y; i < 32; i += 8) {                                                \
            const int c = c0 + i, r = r0 + threadIdx.x;                                            \
            if (r < R && c < C) d[(long long)c * ld + r] = tile[threadIdx.x][i];                   \
        }                                                                                          \
    }
PM_TRANSPOSE(polymm_transpose_2, unsigned short)
PM_TRANSPOSE(polymm_transpose_4, unsigned int)
PM_TRANSPOSE(polymm_transpose_8, unsigned long long)

extern "C" __global__ void polymm_transpose_1(const unsigned char* __restrict__ src, long long s_off, long long s_b,
                                              long long s_r, unsigned char* __restrict__ dst, long long ld, int R,
                                              int C) {
    __shared__ unsigned char tile[64][65];  // 65: a gather down a column meets distinct banks
    const int c0 = blockIdx.x * 64, r0 = blockIdx.y * 64;
    const int t = threadIdx.y * 32 + threadIdx.x, w = t & 15, lane_row = t >> 4;  // 16 words of 4 bytes per row
    const unsigned char* s = src + s_off + (long long)blockIdx.z * s_b;
    unsigned char* d = dst + (long long)blockIdx.z * C * ld;
    const bool words = ((s_off | s_b | s_r | ld) & 3) == 0 && (((unsigned long long)src | (unsigned long long)dst) & 3) == 0;
    for (int i = lane_row; i < 64 && r0 + i < R; i += 16) {
        const int c = c0 + 4 * w;
        const unsigned char* p = s + (long long)(r0 + i) * s_r + c;
        if (words && c + 4 <= C) {
            const unsigned v = *(const unsigned*)p;
#pragma unroll
            for (int e = 0; e < 4; ++e) tile[i][4 * w + e] = (unsigned char)(v >> (8 * e));
        } else {
            for (int e = 0; e < 4 && c + e < C; ++e) tile[i][4 * w + e] = p[e];
        }
    }
    __syncthreads();
    for (int i = lane_row; i < 64 && c0 + i < C; i += 16) {
        const int r = r0 + 4 * w;
        unsigned char* q = d + (long long)(c0 + i) * ld + r;
        if (words && r + 4 <= R) {
            *(unsigned*)q = tile[4 * w][i] | (tile[4 * w + 1][i] << 8) | (tile[4 * w + 2][i] << 16) |
                            ((unsigned)tile[4 * w + 3][i] << 24);
        } else {
            for (int e = 0; e < 4 && r + e < R; ++e) q[e] = tile[4 * w + e][i];
        }
    }
}
