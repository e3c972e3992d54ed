/* realify: a complex product as a real one.  Seen as reals, A is M x 2K (re, im side by side
 * along K) and C is M x 2N; with every element x + iy of B replaced by the 2 x 2 block
 *
 *      [  x  y ]
 *      [ -y  x ]
 *
 * (B2, 2K x 2N reals), the real product A B2 puts sum_k (a.x b.x - a.y b.y) in column 2n of C
 * and sum_k (a.x b.y + a.y b.x) in column 2n + 1: the complex product, the same multiply-adds
 * (4 per complex term), now on the real dtype's fastest kernel (for complex128: the FP64 tensor
 * cores; the planner decides).  This kernel writes B2 (contiguous from d_off, 4KN reals per batch entry)
 * from B (K x N complex, any strides, counted in reals).  Rendered for the real dtype.
 * Dimension 0 runs along N (one element of B per work-item: coalesced rows of B2), 1 over
 * groups of TS rows of B, 2 over the batch.  Interface: PM_REALIFY_ARGS (abi.py). */
KERNEL void polymm_realify(PM_REALIFY_ARGS)
{
    const int n = GLOBAL_ID(0);
    if (n >= N) return;
    const INDEX_T batch = GLOBAL_ID(2);
    const int k0 = GLOBAL_ID(1) * TS;
    const int k_end = (k0 + TS < K) ? k0 + TS : K;
    GLOBAL const ELEM_T* from = src + s_off + batch * s_sb + n * s_sn;
    GLOBAL ELEM_T* to = dst + d_off + batch * (INDEX_T)4 * K * N + 2 * n;
    for (int k = k0; k < k_end; ++k) {
        const ELEM_T x = from[k * s_sk], y = from[k * s_sk + 1];
        GLOBAL ELEM_T* row = to + (INDEX_T)4 * k * N;
        row[0] = x;
        row[1] = y;
        row[2 * N] = -y;
        row[2 * N + 1] = x;
    }
}
