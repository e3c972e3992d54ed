/* vecmat: products with few rows (the planner's: a row vector times a
 * matrix): a stream through B at memory speed, every element of B read once.
 *
 * A work-group owns MR rows x NWG columns of C.  Its NDIMC lanes lie along N,
 * GVW adjacent columns each, so a warp reads whole runs of a row of B; its
 * MDIMC teams walk K side by side (team t takes k = t, t + MDIMC, ...), KWG
 * rows of B loaded before any is used, so that MDIMC x KWG rows are in flight
 * per work-group.  A's elements are the same for every lane of a team (one
 * broadcast load).  The teams' sums meet in local memory and are added in team
 * order (deterministic).  Split-K slices arrive as batch entries (planner).
 *
 * PM_VM_VEC (kernels.fast_path): a work-item's GVW elements of a row of B are
 * one load of PM_VM_ROW_T, raw bits of 4, 8 or 16 bytes read as ELEM_T (any
 * dtype but complex; b_sn == 1 and N, b_off, b_sk, b_sb multiples of GVW): one
 * instruction where 16-bit types took four; otherwise element by element, for
 * any dtype and strides.  Columns past N are clamped for loading and never
 * stored. */
KERNEL_WG(NDIMC, MDIMC) void polymm_vecmat(PM_ARGS)
{
    LOCAL_MEM ACC_T part[MDIMC * MR * NWG];
    const int lane = LOCAL_ID(0);
    const int team = LOCAL_ID(1);
    const int n0 = GROUP_ID(0) * NWG + lane * GVW;
    const int m0 = GROUP_ID(1) * MR;
    const INDEX_T batch = GROUP_ID(2);
    INDEX_T a_row[MR];
    PM_CLAMPED_OFFSETS(a_row, MR, m0, M, a_off + batch * a_sb, a_sm);
#if PM_VM_VEC
    const INDEX_T b_col = b_off + batch * b_sb + ((n0 < N) ? n0 : N - GVW);
#define B_LOAD(v, k) v = *(GLOBAL const PM_VM_ROW_T*)(B + b_col + (INDEX_T)(k) * b_sk)
#define B_ELEM(v, j) LOAD((const ELEM_T*)&(v), j)
    typedef PM_VM_ROW_T pm_b_t;
#else
    INDEX_T b_col[GVW];
    PM_CLAMPED_OFFSETS(b_col, GVW, n0, N, b_off + batch * b_sb, b_sn);
#define B_LOAD(v, k)                                                                   \
    PM_UNROLL                                                                          \
    for (int j = 0; j < GVW; ++j) (v)[j] = LOAD(B, b_col[j] + (INDEX_T)(k) * b_sk)
#define B_ELEM(v, j) (v)[j]
    typedef VAL_T pm_b_t[GVW];
#endif
    ACC_T acc[MR][GVW];
    PM_ACC_ZERO(acc, MR, GVW);
    int k = team;
    /* KWG rows of B in flight per team: all loaded, then all used. */
    for (; k + (KWG - 1) * MDIMC < K; k += KWG * MDIMC) {
        pm_b_t b[KWG];
        PM_UNROLL
        for (int u = 0; u < KWG; ++u) { B_LOAD(b[u], k + u * MDIMC); }
        PM_UNROLL
        for (int u = 0; u < KWG; ++u) {
            PM_UNROLL
            for (int i = 0; i < MR; ++i) {
                const VAL_T a_val = LOAD(A, a_row[i] + (INDEX_T)(k + u * MDIMC) * a_sk);
                PM_UNROLL
                for (int j = 0; j < GVW; ++j) ACC_MADD(acc[i][j], a_val, B_ELEM(b[u], j));
            }
        }
    }
    for (; k < K; k += MDIMC) {
        pm_b_t b;
        B_LOAD(b, k);
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            const VAL_T a_val = LOAD(A, a_row[i] + (INDEX_T)k * a_sk);
            PM_UNROLL
            for (int j = 0; j < GVW; ++j) ACC_MADD(acc[i][j], a_val, B_ELEM(b, j));
        }
    }
#undef B_LOAD
#undef B_ELEM
    /* Teams 1.. hand their sums to team 0 through local memory (lanes side by
     * side: no bank conflicts), which adds them in team order. */
    if (team > 0) {
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            PM_UNROLL
            for (int j = 0; j < GVW; ++j) part[((team * MR + i) * GVW + j) * NDIMC + lane] = acc[i][j];
        }
    }
    BARRIER();
    if (team > 0) return;
    for (int t = 1; t < MDIMC; ++t) {
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            PM_UNROLL
            for (int j = 0; j < GVW; ++j) ACC_ADD(acc[i][j], part[((t * MR + i) * GVW + j) * NDIMC + lane]);
        }
    }
    PM_STORE_BLOCK(acc, MR, GVW);
}
