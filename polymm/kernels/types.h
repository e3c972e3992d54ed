/* polymm element arithmetic, selected by PM_KIND_* (set by the renderer along
 * with ELEM_T: the type in global memory, VAL_T: a loaded value, as kept in
 * local memory and registers, ACC_T: the accumulator, VAL_ZERO: a zero VAL_T).
 *
 *   LOAD(p, i)          element i of global array p, as VAL_T
 *   ACC_INIT(acc)       acc = additive identity
 *   ACC_MADD(acc, a, b) acc += a * b   (or acc |= a & b for bool)
 *   ACC_ADD(acc, v)     acc += v           (or acc |= v for bool)
 *   STORE(p, i, acc)    p[i] = acc converted to ELEM_T
 */
#if PM_KIND_BOOL
/* NumPy: the OR of ANDs; any nonzero byte is true. */
#define LOAD(p, i) ((VAL_T)((p)[i] != 0))
#define ACC_INIT(acc) ((acc) = 0)
#define ACC_MADD(acc, a, b) ((acc) |= ((a) & (b)))
#define ACC_ADD(acc, v) ((acc) |= (v))
#define STORE(p, i, acc) ((p)[i] = (ELEM_T)((acc) != 0))
#elif PM_KIND_INT
/* Accumulate in an unsigned type at least as wide: wrap-around is defined
 * there, and the low bits after truncation equal NumPy's wrapped result. */
#define LOAD(p, i) ((VAL_T)(p)[i])
#define ACC_INIT(acc) ((acc) = 0)
#define ACC_MADD(acc, a, b) ((acc) += (a) * (b))
#define ACC_ADD(acc, v) ((acc) += (v))
#define STORE(p, i, acc) ((p)[i] = (ELEM_T)(acc))
#elif PM_KIND_HALF
/* float16 in memory, float32 everywhere else. */
#define LOAD(p, i) HALF_LOAD(p, i)
#define ACC_INIT(acc) ((acc) = 0.0f)
#define ACC_MADD(acc, a, b) ((acc) = (a) * (b) + (acc))
#define ACC_ADD(acc, v) ((acc) = (acc) + (v))
#define STORE(p, i, acc) HALF_STORE(p, i, acc)
#elif PM_KIND_BF16
/* bfloat16 in memory (raw 16-bit words: the top half of a float32), float32
 * everywhere else.  Stored rounded to nearest, ties to even; NaN stays NaN
 * (quieted), and rounding past the largest bfloat16 gives Inf, as in NumPy. */
DEVICE_FN float pm_bf16_to_float(unsigned short h) { return AS_FLOAT((unsigned int)h << 16); }
DEVICE_FN unsigned short pm_float_to_bf16(float f) {
    const unsigned int u = AS_UINT(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x0040u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#define LOAD(p, i) pm_bf16_to_float((p)[i])
#define ACC_INIT(acc) ((acc) = 0.0f)
#define ACC_MADD(acc, a, b) ((acc) = (a) * (b) + (acc))
#define ACC_ADD(acc, v) ((acc) = (acc) + (v))
#define STORE(p, i, acc) ((p)[i] = pm_float_to_bf16(acc))
#elif PM_KIND_FLOAT
#define LOAD(p, i) ((p)[i])
#define ACC_INIT(acc) ((acc) = 0)
#define ACC_MADD(acc, a, b) ((acc) = (a) * (b) + (acc))
#define ACC_ADD(acc, v) ((acc) = (acc) + (v))
#define STORE(p, i, acc) ((p)[i] = (acc))
#elif PM_KIND_COMPLEX
/* (x + iy): float2/double2, no conjugation. */
#define LOAD(p, i) ((p)[i])
#define ACC_INIT(acc) ((acc).x = 0, (acc).y = 0)
#define ACC_MADD(acc, a, b) ((acc).x += (a).x * (b).x - (a).y * (b).y, \
                             (acc).y += (a).x * (b).y + (a).y * (b).x)
#define ACC_ADD(acc, v) ((acc).x += (v).x, (acc).y += (v).y)
#define STORE(p, i, acc) ((p)[i] = (acc))
#else
#error "polymm: no PM_KIND_* defined"
#endif

/* Helpers of the kernel bodies (any dtype).
 * PM_CLAMPED_OFFSETS: out[i] = base + min(first + i, count - 1) * stride for i < R, the element
 * offsets of R consecutive rows (or columns), those past the edge clamped to the last one (they
 * are loaded, never stored).  PM_ACC_ZERO: acc[i][j] = 0 for i < R, j < C.  PM_STORE_BLOCK: the
 * R x C block acc into C from row m0 and column n0 of batch entry batch, what lies inside M x N
 * (a product's C, c_off, batch, M, N, m0 and n0 in scope). */
#define PM_CLAMPED_OFFSETS(out, R, first, count, base, stride)                                     \
    PM_UNROLL                                                                                      \
    for (int pm_i = 0; pm_i < (R); ++pm_i)                                                         \
        (out)[pm_i] = (base) + (INDEX_T)(((first) + pm_i < (count)) ? (first) + pm_i : (count) - 1) * (stride)
#define PM_ACC_ZERO(acc, R, C)                                                                     \
    PM_UNROLL                                                                                      \
    for (int pm_i = 0; pm_i < (R); ++pm_i) {                                                       \
        PM_UNROLL                                                                                  \
        for (int pm_j = 0; pm_j < (C); ++pm_j) ACC_INIT((acc)[pm_i][pm_j]);                        \
    }

#define PM_STORE_BLOCK(acc, R, C_)                                                                 \
    PM_UNROLL                                                                                      \
    for (int pm_i = 0; pm_i < (R); ++pm_i) {                                                       \
        if (m0 + pm_i < M) {                                                                       \
            const INDEX_T pm_row = c_off + (batch * M + m0 + pm_i) * (INDEX_T)N;                   \
            PM_UNROLL                                                                              \
            for (int pm_j = 0; pm_j < (C_); ++pm_j) {                                              \
                if (n0 + pm_j < N) STORE(C, pm_row + n0 + pm_j, (acc)[pm_i][pm_j]);               \
            }                                                                                      \
        }                                                                                          \
    }

/* The kernel signatures (PM_ARGS for the products, PM_PACK_ARGS, PM_SUM_ARGS)
 * are written by the renderer from polymm/kernels/abi.py, where they are
 * declared once for both dialects and both backends' argument packing. */
