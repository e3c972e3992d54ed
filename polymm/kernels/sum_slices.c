/* sum_slices: the deterministic second step of split-K.  The first step
 * computed S partial products over consecutive K slices into W (S slices of
 * count elements each); C[c_off + i] = W[i] + W[count + i] + ... in slice
 * order, so the result does not depend on scheduling. */
KERNEL void polymm_sum_slices(PM_SUM_ARGS)
{
    const INDEX_T i = (INDEX_T)GROUP_ID(0) * LOCAL_SIZE(0) + LOCAL_ID(0);
    if (i >= count) return;
    ACC_T acc;
    ACC_INIT(acc);
    for (int s = 0; s < S; ++s) ACC_ADD(acc, LOAD(W, s * count + i));
    STORE(C, c_off + i, acc);
}
