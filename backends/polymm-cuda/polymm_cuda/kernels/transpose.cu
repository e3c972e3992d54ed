// polymm CUDA-only helper: a tiled transposed copy, dst[z][c][r] = src[z][r][c], for the copies
// the tensor cores need (an int8 B read K-major, a column-major A). CuPy's own copy of a
// transposed view reads or writes one element per lane far apart: on the H100 it took about
// 50 us for a 1024 x 1024 int8 matrix, more than the product itself. Here a block moves a
// 32 x 32 tile through shared memory, so both the reads (along c) and the writes (along r) run
// along contiguous rows. src: from element s_off, rows s_r elements apart, unit stride along c,
// matrices s_b apart; dst: rows (c) ld elements apart (ld >= R: padding left as it is), matrices
// C * ld apart. Arguments as polymm.kernels.abi's "transpose". No #include.

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
PM_TRANSPOSE(polymm_transpose_1, unsigned char)
PM_TRANSPOSE(polymm_transpose_2, unsigned short)
PM_TRANSPOSE(polymm_transpose_4, unsigned int)
PM_TRANSPOSE(polymm_transpose_8, unsigned long long)
