/* pack: copy a strided (batch, rows, cols) view into a contiguous buffer, so
 * that a transposed, Fortran-ordered or step-sliced operand reaches the fast
 * paths of the other kernels (one pass over the operand instead of strided
 * reads in the innermost loop).  Elements are moved as raw bits (COPY_T has
 * the item size), so one kernel serves every dtype.  The destination may be
 * padded to RP rows of LD elements, the padding zero-filled: a GPU product
 * then reads whole aligned vectors where K or N is odd (zero times zero adds
 * nothing).  A work-item copies a TS x TS tile: whichever axis of the source
 * is contiguous, the tile's source and destination cache lines are used whole
 * while they are hot.  Dimension 0 runs over column tiles, 1 over row tiles,
 * 2 over the batch.  Interface: PM_PACK_ARGS (polymm/kernels/abi.py). */
typedef COPY_T pm_copy_t;  /* one word: CUDA's zero is pm_copy_t() */

KERNEL void polymm_pack(PM_PACK_ARGS)
{
    const int c0 = GLOBAL_ID(0) * TS;
    const int r0 = GLOBAL_ID(1) * TS;
    const INDEX_T batch = GLOBAL_ID(2);
    if (r0 >= RP || c0 >= LD) return;
    const int r_end = (r0 + TS < RP) ? r0 + TS : RP;
    const int c_end = (c0 + TS < LD) ? c0 + TS : LD;
    GLOBAL const COPY_T* from = src + s_off + batch * s_sb;
    GLOBAL COPY_T* to = dst + d_off + batch * (INDEX_T)RP * LD;
    for (int r = r0; r < r_end; ++r) {
        for (int c = c0; c < c_end; ++c) {
            COPY_T x = COPY_ZERO;
            if (r < R && c < NC) x = from[r * s_sr + c * s_sc];
            to[(INDEX_T)r * LD + c] = x;
        }
    }
}
