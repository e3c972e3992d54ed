/* tiled: TS x TS work-groups; each step stages a TS x TS tile of A and of B
 * in local memory (zero-filled outside the matrices, so any size works),
 * waits, multiplies the tiles, and waits again before the tiles are reused.
 *
 * PM_DYNAMIC_LOCAL = 0: tiles are fixed-size local arrays and the work-group
 *   size is pinned (reqd_work_group_size / __launch_bounds__).
 * PM_DYNAMIC_LOCAL = 1: the 2*TS*TS VAL_T of tile memory is supplied at launch
 *   (OpenCL: trailing __local argument; CUDA: dynamic shared memory bytes). */
#if PM_DYNAMIC_LOCAL
KERNEL void polymm_tiled_dynamic(PM_ARGS DYN_LOCAL_PARAM)
{
    DYN_LOCAL_DECL
    LOCAL_PTR VAL_T* tile_a = pm_dyn_local;
    LOCAL_PTR VAL_T* tile_b = pm_dyn_local + TS * TS;
#else
KERNEL_WG(TS, TS) void polymm_tiled(PM_ARGS)
{
    LOCAL_MEM VAL_T tile_a[TS * TS];
    LOCAL_MEM VAL_T tile_b[TS * TS];
#endif
    const int tx = LOCAL_ID(0);
    const int ty = LOCAL_ID(1);
    const int n = GROUP_ID(0) * TS + tx;
    const int m = GROUP_ID(1) * TS + ty;
    const INDEX_T batch = GROUP_ID(2);
    const INDEX_T a_row = a_off + batch * a_sb + (INDEX_T)m * a_sm;
    const INDEX_T b_col = b_off + batch * b_sb + (INDEX_T)n * b_sn;
    ACC_T acc;
    ACC_INIT(acc);
    for (int k0 = 0; k0 < K; k0 += TS) {
        const int ka = k0 + tx;   /* this work-item loads A[m, ka] ... */
        const int kb = k0 + ty;   /* ... and B[kb, n] */
        VAL_T va = VAL_ZERO;
        VAL_T vb = VAL_ZERO;
        if (m < M && ka < K) va = LOAD(A, a_row + (INDEX_T)ka * a_sk);
        if (kb < K && n < N) vb = LOAD(B, b_col + (INDEX_T)kb * b_sk);
        tile_a[ty * TS + tx] = va;
        tile_b[ty * TS + tx] = vb;
        BARRIER();
        PM_UNROLL
        for (int kk = 0; kk < TS; ++kk) {
            ACC_MADD(acc, tile_a[ty * TS + kk], tile_b[kk * TS + tx]);
        }
        BARRIER();
    }
    if (m < M && n < N) STORE(C, c_off + (batch * M + m) * (INDEX_T)N + n, acc);
}
