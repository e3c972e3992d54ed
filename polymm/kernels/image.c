/* image: the naive kernel, reading A and B through the texture path.
 *
 * Same loop as naive.c (one work-item per element of C, global size (N, M, B)),
 * but the operands are 2-D images (OpenCL image2d_t read with a sampler; CUDA
 * texture objects) instead of plain pointers.  Image reads go through the
 * texture cache, which keeps 2-D neighbourhoods rather than lines of one row:
 * the column of B that a work-item walks down (stride N in memory, a new cache
 * line per step for naive.c) sits in the same cached 2-D tiles its neighbours
 * use.  No local memory, no barriers: the hardware does the staging that
 * tiled.c does by hand, with less control.
 *
 * Own interface (images carry their own layout):
 *   KERNEL void polymm_image(const int M, const int N, const int K,
 *       IMAGE_T A, const int a_sb, IMAGE_T B, const int b_sb,
 *       GLOBAL ELEM_T* C, const INDEX_T c_off)
 * A is an image K wide and (batches of A) * M high: A[b, m, k] is texel
 * (k, b * a_sb + m), so a_sb is M, or 0 for a broadcast A; B likewise with
 * width N: B[b, k, n] is texel (n, b * b_sb + k), b_sb is K or 0.  C is
 * contiguous (B, M, N) from c_off.  Texels are one channel of the element's own
 * type (IMAGE_READ, set by the renderer), float16 as its raw 16-bit word;
 * 64-bit and complex elements have no image format and are refused before
 * rendering. */
#if PM_KIND_BOOL
#define IMAGE_LOAD(img, col, row) ((VAL_T)(IMAGE_READ(img, col, row) != 0))
#elif PM_KIND_HALF
#define IMAGE_LOAD(img, col, row) HALF_FROM_BITS((unsigned short)IMAGE_READ(img, col, row))
#else
#define IMAGE_LOAD(img, col, row) ((VAL_T)IMAGE_READ(img, col, row))
#endif
IMAGE_PRELUDE

KERNEL void polymm_image(const int M, const int N, const int K,
                         IMAGE_T A, const int a_sb, IMAGE_T B, const int b_sb,
                         GLOBAL ELEM_T* RESTRICT C, const INDEX_T c_off)
{
    const int n = GLOBAL_ID(0);
    const int m = GLOBAL_ID(1);
    const int batch = GROUP_ID(2);
    if (m >= M || n >= N) return;
    const int a_y = batch * a_sb + m;
    const int b_y = batch * b_sb;
    ACC_T acc;
    ACC_INIT(acc);
    for (int k = 0; k < K; ++k) {
        const VAL_T a = IMAGE_LOAD(A, k, a_y);
        const VAL_T b = IMAGE_LOAD(B, n, b_y + k);
        ACC_MADD(acc, a, b);
    }
    STORE(C, c_off + ((INDEX_T)batch * M + m) * (INDEX_T)N + n, acc);
}
