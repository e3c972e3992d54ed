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
 * rows of B: TS rows per work-item, a grid's height apart, all loaded before the first store
 * (TS loads in flight, as in pack.c's GPU shape), 2 over the batch.  Interface:
 * PM_REALIFY_ARGS (abi.py). */
KERNEL void polymm_realify(PM_REALIFY_ARGS)
{
    const int n = GLOBAL_ID(0);
    const int height = (K + TS - 1) / TS;
    const int k0 = GLOBAL_ID(1);
    if (n >= N || k0 >= height) return;
    const INDEX_T batch = GLOBAL_ID(2);
    GLOBAL const ELEM_T* from = src + s_off + batch * s_sb + n * s_sn;
    GLOBAL ELEM_T* to = dst + d_off + batch * (INDEX_T)4 * K * N + 2 * n;
    ELEM_T x[TS], y[TS];
    PM_UNROLL
    for (int i = 0; i < TS; ++i) {
        const int k = k0 + i * height;
        x[i] = 0;
        y[i] = 0;
        if (k < K) {
            x[i] = from[k * s_sk];
            y[i] = from[k * s_sk + 1];
        }
    }
    PM_UNROLL
    for (int i = 0; i < TS; ++i) {
        const int k = k0 + i * height;
        if (k < K) {
            GLOBAL ELEM_T* row = to + (INDEX_T)4 * k * N;
            row[0] = x[i];
            row[1] = y[i];
            row[2 * N] = -y[i];
            row[2 * N + 1] = x[i];
        }
    }
}
