/* pack: copy a strided (batch, rows, cols) view into a contiguous buffer, so
 * that a transposed, Fortran-ordered or step-sliced operand reaches the fast
 * paths of the other kernels (a pass over the operand instead of strided
 * reads in the innermost loop).  Elements are moved as raw bits (COPY_T has
 * the item size), so one kernel serves every dtype.  Dimension 0 runs along
 * cols (the contiguous side of the destination), 1 along rows, 2 over batch.
 * Interface: (rows, cols, src, s_off, s_sb, s_sr, s_sc, dst, d_off), element
 * offsets and strides as in PM_ARGS. */
KERNEL void polymm_pack(const int R, const int NC,
                        GLOBAL const COPY_T* RESTRICT src, const INDEX_T s_off, const INDEX_T s_sb,
                        const INDEX_T s_sr, const INDEX_T s_sc,
                        GLOBAL COPY_T* RESTRICT dst, const INDEX_T d_off)
{
    const int c = GLOBAL_ID(0);
    const int r = GLOBAL_ID(1);
    const INDEX_T batch = GLOBAL_ID(2);
    if (r >= R || c >= NC) return;
    dst[d_off + (batch * R + r) * (INDEX_T)NC + c] = src[s_off + batch * s_sb + r * s_sr + c * s_sc];
}
