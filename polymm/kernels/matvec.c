/* matvec: products with few columns (matrix-vector, N up to a few).  Each
 * work-item forms MR x NWG dot products along K: dimension 0 runs over groups
 * of MR rows, 1 over groups of NWG columns, 2 over the batch.  Register
 * blocking along M and N buys nothing here (every element of A is used
 * NWG times at most), so the work is a stream through A at memory speed.
 *
 * PM_MV_VEC (rendered only when a_sk == 1 and b_sk == 1; kernels.fast_path)
 * with PM_VECTOR_MATH (OpenCL, float32/64): VW-wide partial sums along K,
 * their lanes added in a fixed order at the end, the K tail scalar.
 * Otherwise a scalar loop over K for any dtype and any strides.  Rows and
 * columns past the edges are clamped for loading and never stored.
 *
 * PM_MV_GROUP (GPUs): a work-group of MDIMC work-items (a power of two) per
 * MR x NWG block of C instead of one work-item: the lanes walk K side by
 * side (each warp reads consecutive addresses of a row of A), and the
 * partial sums meet in local memory in a fixed tree order (deterministic).
 *
 * PM_MV_ROWS (GPU shape; kernels.fast_path: a_sk == b_sk == 1, K and the offsets multiples
 * of GVW): each lane reads A's rows and B's columns as runs of GVW elements, one raw-bits load
 * of PM_MV_ROW_T each (16 bytes: one instruction where 16-bit types took eight), lane taking
 * runs lane, lane + MDIMC, ...  Each lane's sum is then in the order of its runs, still one
 * fixed order.  (A row-major B with N > 1 stays element by element: read in runs of A's, a
 * warp's loads of B were N * GVW elements apart, and 2048 x 2048 @ 2048 x 4 took 33 us, not 20.) */
#if PM_MV_GROUP
KERNEL_WG(MDIMC, 1) void polymm_matvec(PM_ARGS)
{
    LOCAL_MEM ACC_T part[MR * NWG * MDIMC];
    const int lane = LOCAL_ID(0);     /* K is walked from lane, MDIMC at a time */
    const int m0 = GROUP_ID(0) * MR;  /* inside M: the grid has no spare groups (all reach the barriers) */
    const int n0 = GROUP_ID(1) * NWG;
    const INDEX_T batch = GROUP_ID(2);
#define K_FIRST lane
#define K_STEP MDIMC
#else
KERNEL void polymm_matvec(PM_ARGS)
{
    const int m0 = GLOBAL_ID(0) * MR;
    const int n0 = GLOBAL_ID(1) * NWG;
    const INDEX_T batch = GLOBAL_ID(2);
    if (m0 >= M || n0 >= N) return;
#define K_FIRST 0
#define K_STEP 1
#endif
    INDEX_T a_row[MR];
    PM_CLAMPED_OFFSETS(a_row, MR, m0, M, a_off + batch * a_sb, a_sm);
    INDEX_T b_col[NWG];
    PM_CLAMPED_OFFSETS(b_col, NWG, n0, N, b_off + batch * b_sb, b_sn);
    ACC_T acc[MR][NWG];
    PM_ACC_ZERO(acc, MR, NWG);
    int k = K_FIRST;
#if PM_MV_GROUP && PM_MV_ROWS
    for (k = lane * GVW; k < K; k += MDIMC * GVW) {
        VAL_T b_reg[NWG][GVW];
        PM_UNROLL
        for (int j = 0; j < NWG; ++j) {
            const PM_MV_ROW_T b_run = *(GLOBAL const PM_MV_ROW_T*)(B + b_col[j] + k);
            PM_UNROLL
            for (int q = 0; q < GVW; ++q) b_reg[j][q] = LOAD((const ELEM_T*)&b_run, q);
        }
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            const PM_MV_ROW_T a_run = *(GLOBAL const PM_MV_ROW_T*)(A + a_row[i] + k);
            PM_UNROLL
            for (int q = 0; q < GVW; ++q) {
                const VAL_T a_val = LOAD((const ELEM_T*)&a_run, q);
                PM_UNROLL
                for (int j = 0; j < NWG; ++j) ACC_MADD(acc[i][j], a_val, b_reg[j][q]);
            }
        }
    }
#endif
#if PM_MV_VEC && PM_VECTOR_MATH && !PM_MV_GROUP
    {
        VEC_T vacc[MR][NWG];
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            PM_UNROLL
            for (int j = 0; j < NWG; ++j) vacc[i][j] = (VEC_T)(0);
        }
        for (; k + VW <= K; k += VW) {
            VEC_T b_vec[NWG];
            PM_UNROLL
            for (int j = 0; j < NWG; ++j) b_vec[j] = VLOADN(B + b_col[j] + k);
            PM_UNROLL
            for (int i = 0; i < MR; ++i) {
                const VEC_T a_vec = VLOADN(A + a_row[i] + k);
                PM_UNROLL
                for (int j = 0; j < NWG; ++j) vacc[i][j] = a_vec * b_vec[j] + vacc[i][j];
            }
        }
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            PM_UNROLL
            for (int j = 0; j < NWG; ++j) {
                PM_UNROLL
                for (int q = 0; q < VW; ++q) acc[i][j] += ((ELEM_T*)&vacc[i][j])[q];
            }
        }
    }
#endif
    for (; k < K; k += K_STEP) {
        VAL_T b_reg[NWG];
        PM_UNROLL
        for (int j = 0; j < NWG; ++j) b_reg[j] = LOAD(B, b_col[j] + (INDEX_T)k * b_sk);
        PM_UNROLL
        for (int i = 0; i < MR; ++i) {
            const VAL_T a_val = LOAD(A, a_row[i] + (INDEX_T)k * a_sk);
            PM_UNROLL
            for (int j = 0; j < NWG; ++j) ACC_MADD(acc[i][j], a_val, b_reg[j]);
        }
    }
#if PM_MV_GROUP
    /* The lanes' partial sums meet in local memory, halving in a fixed order. */
    PM_UNROLL
    for (int i = 0; i < MR; ++i) {
        PM_UNROLL
        for (int j = 0; j < NWG; ++j) part[(i * NWG + j) * MDIMC + lane] = acc[i][j];
    }
    BARRIER();
    for (int s = MDIMC / 2; s > 0; s >>= 1) {
        if (lane < s) {
            PM_UNROLL
            for (int q = 0; q < MR * NWG; ++q) ACC_ADD(part[q * MDIMC + lane], part[q * MDIMC + lane + s]);
        }
        BARRIER();
    }
    if (lane < MR * NWG) {
        const int m = m0 + lane / NWG;
        const int n = n0 + lane % NWG;
        if (m < M && n < N) STORE(C, c_off + (batch * M + m) * (INDEX_T)N + n, part[lane * MDIMC]);
    }
#else
    PM_STORE_BLOCK(acc, MR, NWG);
#endif
#undef K_FIRST
#undef K_STEP
}
