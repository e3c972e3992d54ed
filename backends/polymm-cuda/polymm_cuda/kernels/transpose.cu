// polymm CUDA-only helpers: a tiled transposed copy, dst[z][c][r] = src[z][r][c], for the copies
// the tensor cores need (an int8 B read K-major, a column-major A). CuPy's own copy of a
// transposed view reads or writes one element per lane far apart: on the H100 it took about
// 50 us for a 1024 x 1024 int8 matrix, more than the product itself. Here a block moves a
// 32 x 32 tile through shared memory, so both the reads (along c) and the writes (along r) run
// along contiguous rows. src: from element s_off, rows s_r elements apart (either sign), unit stride along c,
// matrices s_b apart; dst: rows (c) ld elements apart (ld >= R: padding left as it is), matrices
// C * ld apart. Arguments as polymm_cuda.abi's TRANSPOSE. No #include.
//
// Launch geometry: polymm_cuda.transpose's transpose_grid, blocks of 32 x 8.

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
PM_TRANSPOSE(polymm_transpose_4, unsigned int)
PM_TRANSPOSE(polymm_transpose_8, unsigned long long)

// 8- and 16-bit elements: 64 x 64 tiles, each thread moving words of V elements (W: 4 bytes)
// where the strides and addresses allow. One element per thread and instruction moved a
// 2048 x 2048 int8 matrix at 0.7 TB/s on the H100 (11.6 us), and made the copy of a transposed
// float16 operand cost a quarter of a 4096 product.
#define PM_TRANSPOSE_WORDS(NAME, E, W, V)                                                          \
    extern "C" __global__ void NAME(const E* __restrict__ src, long long s_off, long long s_b,     \
                                    long long s_r, E* __restrict__ dst, long long ld, int R,       \
                                    int C) {                                                       \
        __shared__ E tile[64][65]; /* 65: a gather down a column meets distinct banks */           \
        constexpr int PER_ROW = 64 / V, ROWS = 256 / PER_ROW, BITS = 8 * sizeof(E);               \
        const int c0 = blockIdx.x * 64, r0 = blockIdx.y * 64;                                      \
        const int t = threadIdx.y * 32 + threadIdx.x, w = t % PER_ROW, lane_row = t / PER_ROW;      \
        const E* s = src + s_off + (long long)blockIdx.z * s_b;                                    \
        E* d = dst + (long long)blockIdx.z * C * ld;                                               \
        const bool words = ((s_off | s_b | s_r | ld) % V) == 0 &&                                  \
                           (((unsigned long long)src | (unsigned long long)dst) % sizeof(W)) == 0;  \
        for (int i = lane_row; i < 64 && r0 + i < R; i += ROWS) {                                  \
            const int c = c0 + V * w;                                                              \
            const E* p = s + (long long)(r0 + i) * s_r + c;                                        \
            if (words && c + V <= C) {                                                             \
                const W v = *(const W*)p;                                                          \
                _Pragma("unroll") for (int e = 0; e < V; ++e) tile[i][V * w + e] = (E)(v >> (BITS * e)); \
            } else {                                                                               \
                for (int e = 0; e < V && c + e < C; ++e) tile[i][V * w + e] = p[e];                \
            }                                                                                      \
        }                                                                                          \
        __syncthreads();                                                                           \
        for (int i = lane_row; i < 64 && c0 + i < C; i += ROWS) {                                  \
            const int r = r0 + V * w;                                                              \
            E* q = d + (long long)(c0 + i) * ld + r;                                               \
            if (words && r + V <= R) {                                                             \
                W v = 0;                                                                           \
                _Pragma("unroll") for (int e = 0; e < V; ++e) v |= (W)tile[V * w + e][i] << (BITS * e); \
                *(W*)q = v;                                                                        \
            } else {                                                                               \
                for (int e = 0; e < V && r + e < R; ++e) q[e] = tile[V * w + e][i];                \
            }                                                                                      \
        }                                                                                          \
    }
PM_TRANSPOSE_WORDS(polymm_transpose_1, unsigned char, unsigned, 4)
PM_TRANSPOSE_WORDS(polymm_transpose_2, unsigned short, unsigned, 2)

// A strided copy, dst[z][r][c] = src[s_off + z s_b + r s_r + c s_c] (rows ld elements apart,
// matrices R * ld apart): an operand the copy engine cannot address as it lies but whose rows
// run along K (rows not 16-byte aligned, as in any product whose K is not a multiple of 16 bytes),
// or that has no unit stride at all, copied K-major for wgmma. Consecutive threads take
// consecutive c: with s_c = 1 both sides coalesce. Grid: (C / 256, min(R, 65535), batch), blocks
// of 256; rows beyond the grid's y are walked in steps of it. Arguments as polymm_cuda.abi's
// RESTRIDE. polymm_restride_16 moves 16-byte words: rows with unit stride whose offsets, strides
// and lengths are whole words are copied a word per thread (two bytes per thread moved a 4096 x
// 4096 bfloat16 operand with its rows reversed at a fraction of the H200's bandwidth).
#define PM_RESTRIDE(NAME, T)                                                                       \
    extern "C" __global__ void NAME(const T* __restrict__ src, long long s_off, long long s_b,     \
                                    long long s_r, long long s_c, T* __restrict__ dst, long long ld, \
                                    int R, int C) {                                                \
        const int c = blockIdx.x * blockDim.x + threadIdx.x;                                       \
        if (c >= C) return;                                                                        \
        const T* s = src + s_off + (long long)blockIdx.z * s_b + (long long)c * s_c;               \
        T* d = dst + (long long)blockIdx.z * R * ld + c;                                           \
        for (int r = blockIdx.y; r < R; r += gridDim.y) d[(long long)r * ld] = s[(long long)r * s_r]; \
    }
PM_RESTRIDE(polymm_restride_1, unsigned char)
PM_RESTRIDE(polymm_restride_2, unsigned short)
PM_RESTRIDE(polymm_restride_4, unsigned int)
PM_RESTRIDE(polymm_restride_8, unsigned long long)
struct alignas(16) pm_word16 {
    unsigned long long lo, hi;
};
PM_RESTRIDE(polymm_restride_16, pm_word16)
