/* naive: one work-item per element of C.  Global size (N, M, B), dimension 0
 * along columns so neighbouring work-items read neighbouring B and write
 * neighbouring C elements. */
KERNEL void polymm_naive(PM_ARGS)
{
    const int n = GLOBAL_ID(0);
    const int m = GLOBAL_ID(1);
    const INDEX_T batch = GROUP_ID(2);
    if (m >= M || n >= N) return;
    const INDEX_T a_row = a_off + batch * a_sb + (INDEX_T)m * a_sm;
    const INDEX_T b_col = b_off + batch * b_sb + (INDEX_T)n * b_sn;
    ACC_T acc;
    ACC_INIT(acc);
    for (int k = 0; k < K; ++k) {
        const VAL_T a = LOAD(A, a_row + (INDEX_T)k * a_sk);
        const VAL_T b = LOAD(B, b_col + (INDEX_T)k * b_sk);
        ACC_MADD(acc, a, b);
    }
    STORE(C, c_off + (batch * M + m) * (INDEX_T)N + n, acc);
}
