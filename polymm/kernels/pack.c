/* pack: copy a strided (batch, rows, cols) view into a contiguous buffer, so
 * that a transposed, Fortran-ordered or step-sliced operand reaches the fast
 * paths of the other kernels (one pass over the operand instead of strided
 * reads in the innermost loop).  Elements are moved as raw bits (COPY_T has
 * the item size), so one kernel serves every dtype.  The destination may be
 * padded to RP rows of LD elements, the padding zero-filled: a GPU product
 * then reads whole aligned vectors where K or N is odd (zero times zero adds
 * nothing).  Two shapes of work (:func:`polymm.kernels.pack_params`):
 * - CPUs (TS > 1): a work-item copies a TS x TS tile; whichever axis of the
 *   source is contiguous, the tile's source and destination cache lines are
 *   used whole while they are hot.
 * - GPUs (TS = 1): a work-item copies one column of MR rows spaced a grid's
 *   height apart, 64 work-items side by side along the row (coalesced).  Its
 *   MR loads are all issued before the first store, so MR are in flight at
 *   once, and the grid has MR times fewer work-groups: with an element per
 *   work-item the copy ran at an eighth of the HBM's bandwidth.
 * Dimension 0 runs over columns, 1 over rows, 2 over the batch.  Interface:
 * PM_PACK_ARGS (polymm/kernels/abi.py). */
typedef COPY_T pm_copy_t;  /* one word: CUDA's zero is pm_copy_t() */

KERNEL void polymm_pack(PM_PACK_ARGS)
{
    const INDEX_T batch = GLOBAL_ID(2);
    GLOBAL const COPY_T* from = src + s_off + batch * s_sb;
    GLOBAL COPY_T* to = dst + d_off + batch * (INDEX_T)RP * LD;
#if TS == 1
    const int c = GLOBAL_ID(0);
    const int height = (RP + MR - 1) / MR;
    const int r0 = GLOBAL_ID(1);
    if (c >= LD || r0 >= height) return;
    COPY_T x[MR];
    PM_UNROLL
    for (int i = 0; i < MR; ++i) {
        const int r = r0 + i * height;
        x[i] = COPY_ZERO;
        if (r < R && c < NC) x[i] = from[r * s_sr + c * s_sc];
    }
    PM_UNROLL
    for (int i = 0; i < MR; ++i) {
        const int r = r0 + i * height;
        if (r < RP) to[(INDEX_T)r * LD + c] = x[i];
    }
#else
    const int c0 = GLOBAL_ID(0) * TS;
    const int r0 = GLOBAL_ID(1) * TS;
    if (r0 >= RP || c0 >= LD) return;
    const int r_end = (r0 + TS < RP) ? r0 + TS : RP;
    const int c_end = (c0 + TS < LD) ? c0 + TS : LD;
    for (int r = r0; r < r_end; ++r) {
        for (int c = c0; c < c_end; ++c) {
            COPY_T x = COPY_ZERO;
            if (r < R && c < NC) x = from[r * s_sr + c * s_sc];
            to[(INDEX_T)r * LD + c] = x;
        }
    }
#endif
}
