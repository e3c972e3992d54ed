/* pack: copy a strided (batch, rows, cols) view into a contiguous buffer, so
 * that a transposed, Fortran-ordered or step-sliced operand reaches the fast
 * paths of the other kernels (one pass over the operand instead of strided
 * reads in the innermost loop).  Elements are moved as raw bits (COPY_T has
 * the item size), so one kernel serves every dtype.  A work-item copies a
 * TS x TS tile: whichever axis of the source is contiguous, the tile's source
 * and destination cache lines are used whole while they are hot.
 * Dimension 0 runs over column tiles, 1 over row tiles, 2 over the batch.
 * Interface: (rows, cols, src, s_off, s_sb, s_sr, s_sc, dst, d_off), element
 * offsets and strides as in PM_ARGS. */
KERNEL void polymm_pack(const int R, const int NC,
                        GLOBAL const COPY_T* RESTRICT src, const INDEX_T s_off, const INDEX_T s_sb,
                        const INDEX_T s_sr, const INDEX_T s_sc,
                        GLOBAL COPY_T* RESTRICT dst, const INDEX_T d_off)
{
    const int c0 = GLOBAL_ID(0) * TS;
    const int r0 = GLOBAL_ID(1) * TS;
    const INDEX_T batch = GLOBAL_ID(2);
    if (r0 >= R || c0 >= NC) return;
    const int r_end = (r0 + TS < R) ? r0 + TS : R;
    const int c_end = (c0 + TS < NC) ? c0 + TS : NC;
    GLOBAL const COPY_T* from = src + s_off + batch * s_sb;
    GLOBAL COPY_T* to = dst + d_off + batch * (INDEX_T)R * NC;
    for (int r = r0; r < r_end; ++r) {
        for (int c = c0; c < c_end; ++c) to[(INDEX_T)r * NC + c] = from[r * s_sr + c * s_sc];
    }
}
