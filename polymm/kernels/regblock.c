/* regblock: 2-D register blocking.  A work-group computes an MWG x NWG block
 * of C with (NDIMC, MDIMC) work-items; each work-item keeps a WPTM x WPTN
 * micro-tile of accumulators in registers (WPTM = MWG/MDIMC, WPTN = NWG/NDIMC).
 *
 * PM_RB_LOCAL = 1 (GPUs): per K step of KWG, the A block (stored transposed,
 *   k-major) and the B block are staged in local memory, rows padded by PAD.
 *   KTEAMS > 1: that many teams of (NDIMC, MDIMC) work-items share the block of C, each
 *   walking every KTEAMS-th K step, and add their micro-tiles at the end in team order;
 *   PM_RB_GROUP > 1: work-groups take the blocks of C in bands of GROUP block rows;
 *   PM_RB_STAGES = 2: two stages of tiles, K steps alternating between them, the next step
 *   stored into one while the other is read: one barrier per step instead of two.
 *   PM_RB_REAL_B (float32/64): B is a complex K x N matrix read as the 2K x 2N real one that
 *   realify.c would write (row 2k: row k of B as reals; row 2k + 1: each (x, y) as (-y, x)), in
 *   place, with the vector path along its rows: b_off and b_sb count reals, b_sk B's complex
 *   row stride (half its real one), so that row k2 of the real matrix starts at (k2 & ~1) * b_sk.
 *   A work-item's rows/columns are interleaved in runs of VW
 *   (row(i) = (i/VW)*MDIMC*VW + tm*VW + i%VW) so that a work-group's local
 *   reads and C writes touch consecutive addresses.
 *   PM_RB_VEC_A && PM_RB_VEC_B: operand loads as GVEC_T (GVW elements), one
 *   K step ahead into registers -- only rendered when the inner strides are 1
 *   and offsets, strides and K, N are multiples of GVW (kernels.fast_path);
 *   PM_RB_A_MMAJOR / PM_RB_B_KMAJOR: the vectors run along the other axis
 *   (A or B stored column-major, e.g. a transposed view), read in place;
 *   PM_RB_VEC_LOCAL additionally reads local memory as aligned vectors.
 * PM_RB_LOCAL = 0 (CPUs): no local memory and no barriers (the caches play
 *   that role); each work-item computes a contiguous WPTM x WPTN block straight
 *   from global memory.  PM_RB_VEC_B with PM_VECTOR_MATH (OpenCL, float32/64)
 *   does it with VW-wide vector types, which the CPU compiler maps onto SIMD
 *   registers, MR x NR at a time, K in chunks of KWG; at the N edge, the
 *   whole NR slices still take vectors and the last columns (fewer than NR)
 *   are scalar, MR rows at a time.
 * Rows beyond M are clamped for loading and skipped when storing, zero-filled
 * tiles cover the K and N edges: any M, N, K and any strides work. */
#define WPTM (MWG / MDIMC)
#define WPTN (NWG / NDIMC)

#if PM_RB_LOCAL
#define NTHREADS (MDIMC * NDIMC)
#define LDA_LOCAL (MWG + PAD)
#define LDB_LOCAL (NWG + PAD)
#define ROW_OF(i) (((i) / VW) * (MDIMC * VW) + tm * VW + ((i) % VW))
#define COL_OF(j) (((j) / VW) * (NDIMC * VW) + tn * VW + ((j) % VW))
#define LOADS_A (MWG * KWG / GVW / NTHREADS)   /* GVW-vectors of A per work-item per step */
#define LOADS_B (KWG * NWG / GVW / NTHREADS)
#define GVEC_SET(x, q, value) (((VAL_T*)&(x))[q] = (value))
#define GVEC_GET(x, q) (((const VAL_T*)&(x))[q])

KERNEL_WG(NDIMC, MDIMC * KTEAMS) void polymm_regblock(PM_ARGS)
{
    /* KTEAMS teams of MDIMC x NDIMC work-items (LOCAL_ID(1) / MDIMC: the team), each with its
     * own tiles: team t takes K steps t, t + KTEAMS, ...; at the end the teams add their
     * micro-tiles in team order (deterministic).  More work-items per tile of C, for products
     * with few tiles. */
    LOCAL_MEM VAL_T a_tile[PM_RB_STAGES * KTEAMS * KWG * LDA_LOCAL] __attribute__((aligned(16)));
    LOCAL_MEM VAL_T b_tile[PM_RB_STAGES * KTEAMS * KWG * LDB_LOCAL] __attribute__((aligned(16)));
#if KTEAMS > 1
    LOCAL_MEM ACC_T partial[(KTEAMS - 1) * WPTN * NTHREADS];
#endif
    const int team = LOCAL_ID(1) / MDIMC;
    const int tn = LOCAL_ID(0);
    const int tm = LOCAL_ID(1) % MDIMC;
    const int tid = tm * NDIMC + tn;   /* within the team */
#if PM_RB_GROUP > 1
    /* Work-groups in launch order walk bands of GROUP tile rows column by column: those in
     * flight together share tiles of A and B in the L2 cache. */
    const int tiles_n = (N + NWG - 1) / NWG;
    const int tiles_m = (M + MWG - 1) / MWG;
    const int id = GROUP_ID(1) * tiles_n + GROUP_ID(0);
    const int band = id / (PM_RB_GROUP * tiles_n);
    const int left = tiles_m - band * PM_RB_GROUP;
    const int rows = left < PM_RB_GROUP ? left : PM_RB_GROUP;
    const int in_band = id - band * PM_RB_GROUP * tiles_n;
    const int m0 = (band * PM_RB_GROUP + in_band % rows) * MWG;
    const int n0 = (in_band / rows) * NWG;
#else
    const int m0 = GROUP_ID(1) * MWG;
    const int n0 = GROUP_ID(0) * NWG;
#endif
    const INDEX_T batch = GROUP_ID(2);
    const INDEX_T a_base = a_off + batch * a_sb;
    const INDEX_T b_base = b_off + batch * b_sb;

    ACC_T acc[WPTM][WPTN];
    PM_ACC_ZERO(acc, WPTM, WPTN);

#if PM_RB_VEC_A && PM_RB_VEC_B
    /* Fast path: GVW-vector loads of both operands, fetched into registers
     * one K step ahead so global latency overlaps the outer products. */
    GVEC_T a_next[LOADS_A];
    GVEC_T b_next[LOADS_B];
/* One operand's tile into registers: LOADS GVW-vectors per work-item, each RUN elements of a
 * contiguous run (from run0, below run_end) split into vectors, the runs STEP apart (from
 * step0, below step_end); zeros outside the matrix. */
#define FETCH(next, LOADS, RUN, X, base, run0, run_end, step0, step_end, step, ROW)       \
    PM_UNROLL                                                                        \
    for (int r = 0; r < LOADS; ++r) {                                                \
        const int v = tid + r * NTHREADS;                                            \
        const int run = (run0) + (v % ((RUN) / GVW)) * GVW;                          \
        const int at = (step0) + v / ((RUN) / GVW);                                  \
        if (run < (run_end) && at < (step_end)) {                                    \
            next[r] = *(GLOBAL const GVEC_T*)(X + ((base) + (INDEX_T)ROW(at) * (step) + run)); \
        } else {                                                                     \
            PM_UNROLL                                                                \
            for (int q = 0; q < GVW; ++q) GVEC_SET(next[r], q, VAL_ZERO);            \
        }                                                                            \
    }
#define PM_ROW(at) (at)
#if PM_RB_REAL_B     /* row at of the real B: row at / 2 of the complex one; K steps start on even rows */
#if KWG % 2
#error "PM_RB_REAL_B needs an even KWG"
#endif
#define PM_REAL_ROW(at) ((at) & ~1)
#else
#define PM_REAL_ROW(at) (at)
#endif
#if PM_RB_A_MMAJOR   /* A's vectors run along M (a_sm == 1: A stored column-major) */
#define FETCH_A(k_start) FETCH(a_next, LOADS_A, MWG, A, a_base, m0, M, k_start, K, a_sk, PM_ROW)
#else                /* along K (a_sk == 1: rows of A) */
#define FETCH_A(k_start) FETCH(a_next, LOADS_A, KWG, A, a_base, k_start, K, m0, M, a_sm, PM_ROW)
#endif
#if PM_RB_B_KMAJOR   /* B's vectors run along K (b_sk == 1: B stored column-major) */
#if PM_RB_REAL_B
#error "PM_RB_REAL_B reads B's rows (b_sn == 1), not its columns"
#endif
#define FETCH_B(k_start) FETCH(b_next, LOADS_B, KWG, B, b_base, k_start, K, n0, N, b_sn, PM_ROW)
#else                /* along N (b_sn == 1: rows of B) */
#define FETCH_B(k_start) FETCH(b_next, LOADS_B, NWG, B, b_base, n0, N, k_start, K, b_sk, PM_REAL_ROW)
#endif
#define FETCH_TILES(k_start) FETCH_A(k_start) FETCH_B(k_start)
/* The fetched registers into the team's local tiles, both k-major (a_tile[k][m],
 * b_tile[k][n]): a vector along M or N is stored whole, one along K is spread over GVW rows. */
#if PM_RB_A_MMAJOR
#define STORE_A(at, r, v) *(LOCAL_PTR GVEC_T*)(a_tile + (at) + ((v) / (MWG / GVW)) * LDA_LOCAL + ((v) % (MWG / GVW)) * GVW) = a_next[r];
#else
#define STORE_A(at, r, v)                                                                          \
    PM_UNROLL                                                                                      \
    for (int q = 0; q < GVW; ++q)                                                                  \
        a_tile[(at) + (((v) % (KWG / GVW)) * GVW + q) * LDA_LOCAL + (v) / (KWG / GVW)] = GVEC_GET(a_next[r], q);
#endif
#if PM_RB_B_KMAJOR
#define STORE_B(at, r, v)                                                                          \
    PM_UNROLL                                                                                      \
    for (int q = 0; q < GVW; ++q)                                                                  \
        b_tile[(at) + (((v) % (KWG / GVW)) * GVW + q) * LDB_LOCAL + (v) / (KWG / GVW)] = GVEC_GET(b_next[r], q);
#elif PM_RB_REAL_B   /* odd rows of the real B hold each (x, y) of the complex row as (-y, x) */
#define STORE_B(at, r, v)                                                                          \
    {                                                                                              \
        GVEC_T x = b_next[r];                                                                      \
        if (((v) / (NWG / GVW)) & 1) {                                                             \
            PM_UNROLL                                                                              \
            for (int q = 0; q < GVW; q += 2) {                                                     \
                const VAL_T re = GVEC_GET(x, q);                                                   \
                GVEC_SET(x, q, -GVEC_GET(x, q + 1));                                               \
                GVEC_SET(x, q + 1, re);                                                            \
            }                                                                                      \
        }                                                                                          \
        *(LOCAL_PTR GVEC_T*)(b_tile + (at) + ((v) / (NWG / GVW)) * LDB_LOCAL + ((v) % (NWG / GVW)) * GVW) = x; \
    }
#else
#define STORE_B(at, r, v) *(LOCAL_PTR GVEC_T*)(b_tile + (at) + ((v) / (NWG / GVW)) * LDB_LOCAL + ((v) % (NWG / GVW)) * GVW) = b_next[r];
#endif
#define STORE_TILES(at_a, at_b)                                                                    \
    PM_UNROLL                                                                                      \
    for (int r = 0; r < LOADS_A; ++r) { STORE_A(at_a, r, tid + r * NTHREADS) }                    \
    PM_UNROLL                                                                                      \
    for (int r = 0; r < LOADS_B; ++r) { STORE_B(at_b, r, tid + r * NTHREADS) }
#define STAGE_IN(at_a, at_b, k_start) STORE_TILES(at_a, at_b)
    FETCH_TILES(team * KWG)
#else
/* Any strides: the team's tiles of K step k_start straight into local memory at (at_a, at_b),
 * scalar loads, zero-filled outside the matrices. */
#if PM_RB_REAL_B
#error "PM_RB_REAL_B reads B with the vector path"
#endif
#define STAGE_IN(at_a, at_b, k_start)                                                              \
    for (int v = tid; v < MWG * KWG; v += NTHREADS) {                                              \
        const int kl = v % KWG;                                                                    \
        const int ml = v / KWG;                                                                    \
        const int m = m0 + ml;                                                                     \
        const int k = (k_start) + kl;                                                              \
        VAL_T x = VAL_ZERO;                                                                        \
        if (m < M && k < K) x = LOAD(A, a_base + (INDEX_T)m * a_sm + (INDEX_T)k * a_sk);           \
        a_tile[(at_a) + kl * LDA_LOCAL + ml] = x;                                                  \
    }                                                                                              \
    for (int v = tid; v < KWG * NWG; v += NTHREADS) {                                              \
        const int nl = v % NWG;                                                                    \
        const int kl = v / NWG;                                                                    \
        const int n = n0 + nl;                                                                     \
        const int k = (k_start) + kl;                                                              \
        VAL_T x = VAL_ZERO;                                                                        \
        if (n < N && k < K) x = LOAD(B, b_base + (INDEX_T)k * b_sk + (INDEX_T)n * b_sn);           \
        b_tile[(at_b) + kl * LDB_LOCAL + nl] = x;                                                  \
    }
#endif

    /* This team's tiles, in the first stage.  PM_RB_STAGES = 2: the K steps alternate between
     * two stages, the next one stored into one while the other is read (one barrier per step
     * instead of two); the fast path's registers then hold the step after it. */
    int a_at = team * (KWG * LDA_LOCAL);
    int b_at = team * (KWG * LDB_LOCAL);
#define STAGE_A (KTEAMS * KWG * LDA_LOCAL)
#define STAGE_B (KTEAMS * KWG * LDB_LOCAL)
#if PM_RB_STAGES > 1
    STAGE_IN(a_at, b_at, team * KWG)
#if PM_RB_VEC_A && PM_RB_VEC_B
    if (KTEAMS * KWG < K) {
        FETCH_TILES(team * KWG + KTEAMS * KWG)
    }
#endif
    BARRIER();
#endif
    for (int k_team = 0; k_team < K; k_team += KTEAMS * KWG) {
        const int k0 = k_team + team * KWG;   /* this team's K step (past K: zeros) */
#if PM_RB_STAGES == 1
        STAGE_IN(a_at, b_at, k0)
        BARRIER();
#if PM_RB_VEC_A && PM_RB_VEC_B
        if (k_team + KTEAMS * KWG < K) {
            FETCH_TILES(k0 + KTEAMS * KWG)
        }
#endif
#endif
        /* ---- outer products from local memory into the register micro-tile ---- */
        PM_UNROLL
        for (int kk = 0; kk < KWG; ++kk) {
            VAL_T a_reg[WPTM];
            VAL_T b_reg[WPTN];
#if PM_RB_VEC_LOCAL
            /* VW == GVW and PAD a multiple of it: each run of VW is one aligned vector. */
            PM_UNROLL
            for (int iv = 0; iv < WPTM / VW; ++iv) {
                const GVEC_T x = *(LOCAL_PTR const GVEC_T*)(a_tile + a_at + kk * LDA_LOCAL + iv * (MDIMC * VW) + tm * VW);
                PM_UNROLL
                for (int q = 0; q < VW; ++q) a_reg[iv * VW + q] = GVEC_GET(x, q);
            }
            PM_UNROLL
            for (int jv = 0; jv < WPTN / VW; ++jv) {
                const GVEC_T x = *(LOCAL_PTR const GVEC_T*)(b_tile + b_at + kk * LDB_LOCAL + jv * (NDIMC * VW) + tn * VW);
                PM_UNROLL
                for (int q = 0; q < VW; ++q) b_reg[jv * VW + q] = GVEC_GET(x, q);
            }
#else
            PM_UNROLL
            for (int i = 0; i < WPTM; ++i) a_reg[i] = a_tile[a_at + kk * LDA_LOCAL + ROW_OF(i)];
            PM_UNROLL
            for (int j = 0; j < WPTN; ++j) b_reg[j] = b_tile[b_at + kk * LDB_LOCAL + COL_OF(j)];
#endif
            PM_UNROLL
            for (int i = 0; i < WPTM; ++i) {
                PM_UNROLL
                for (int j = 0; j < WPTN; ++j) ACC_MADD(acc[i][j], a_reg[i], b_reg[j]);
            }
        }
#if PM_RB_STAGES > 1
        /* the next K step into the other stage, which no one has read since the last barrier */
        const int flip_a = a_at < STAGE_A ? STAGE_A : -STAGE_A;
        const int flip_b = b_at < STAGE_B ? STAGE_B : -STAGE_B;
        if (k_team + KTEAMS * KWG < K) {
            STAGE_IN(a_at + flip_a, b_at + flip_b, k0 + KTEAMS * KWG)
#if PM_RB_VEC_A && PM_RB_VEC_B
            if (k_team + 2 * KTEAMS * KWG < K) {
                FETCH_TILES(k0 + 2 * KTEAMS * KWG)
            }
#endif
        }
        a_at += flip_a;
        b_at += flip_b;
#endif
        BARRIER();
    }

#if KTEAMS > 1
    /* The teams' sums into team 0's registers, a row of micro-tiles at a time, in team order. */
    PM_UNROLL
    for (int i = 0; i < WPTM; ++i) {
        if (team > 0) {
            PM_UNROLL
            for (int j = 0; j < WPTN; ++j) partial[((team - 1) * WPTN + j) * NTHREADS + tid] = acc[i][j];
        }
        BARRIER();
        if (team == 0) {
            for (int s = 0; s < KTEAMS - 1; ++s) {
                PM_UNROLL
                for (int j = 0; j < WPTN; ++j) ACC_ADD(acc[i][j], partial[(s * WPTN + j) * NTHREADS + tid]);
            }
        }
        BARRIER();
    }
    if (team > 0) return;
#endif

    PM_UNROLL
    for (int i = 0; i < WPTM; ++i) {
        const int m = m0 + ROW_OF(i);
        if (m < M) {
            const INDEX_T c_row = c_off + (batch * M + m) * (INDEX_T)N;
            PM_UNROLL
            for (int j = 0; j < WPTN; ++j) {
                const int n = n0 + COL_OF(j);
                if (n < N) STORE(C, c_row + n, acc[i][j]);
            }
        }
    }
}

#else /* PM_RB_LOCAL == 0: the CPU shape */

KERNEL void polymm_regblock(PM_ARGS)
{
    const int m0 = GLOBAL_ID(1) * WPTM;
    const int n0 = GLOBAL_ID(0) * WPTN;
    if (m0 >= M || n0 >= N) return;
    const INDEX_T batch = GLOBAL_ID(2);   /* BPG batch entries per work-group */
    const INDEX_T b_base = b_off + batch * b_sb;
    INDEX_T a_row[WPTM];
    PM_CLAMPED_OFFSETS(a_row, WPTM, m0, M, a_off + batch * a_sb, a_sm);

#if PM_RB_VEC_B && PM_VECTOR_MATH
/* acc[MR][NR / VW] += rows r.. of A at step k times the step's NR-wide row of B (b_vec). */
#define PM_RB_RANK1(acc, b_vec, r, k)                                                      \
    PM_UNROLL                                                                              \
    for (int i = 0; i < MR; ++i) {                                                         \
        const VEC_T a_bcast = (VEC_T)(A[a_row[(r) + i] + (INDEX_T)(k) * a_sk]);            \
        PM_UNROLL                                                                          \
        for (int j = 0; j < NR / VW; ++j) acc[i][j] = a_bcast * b_vec[j] + acc[i][j];      \
    }
    /* Whole NR-column slices with vectors; the last few columns of C (fewer
     * than NR) one at a time below. */
    const int n_vec = (N - n0 >= WPTN) ? WPTN : ((N - n0) / NR) * NR;
    {
        /* BLIS-like loop order without packing: for each K chunk of KWG, run
         * the MR x WPTN register kernel over the work-item's rows in MR-row
         * slices; the KWG x WPTN slice of B stays in L1 across the slices and
         * partial sums wait in C itself between chunks. */
        for (int k0 = 0; k0 < K; k0 += KWG) {
            const int k_end = (k0 + KWG < K) ? k0 + KWG : K;
            for (int c = 0; c < n_vec; c += NR) {     /* NR-column slices: B chunk in L1 */
#if PM_RB_PACK_B
                /* Copy the KWG x NR chunk of B to contiguous private memory once:
                 * B's rows are N apart, so with N a large power of two they all
                 * fall into one cache set and would be evicted between MR-slices. */
                VEC_T b_pack[KWG * (NR / VW)];
                {
                    GLOBAL const ELEM_T* b_src = B + b_base + n0 + c + (INDEX_T)k0 * b_sk;
                    for (int k = 0; k < k_end - k0; ++k) {
                        PM_UNROLL
                        for (int j = 0; j < NR / VW; ++j) b_pack[k * (NR / VW) + j] = VLOADN(b_src + j * VW);
                        b_src += b_sk;
                    }
                }
#endif
                for (int r = 0; r < WPTM; r += MR) {  /* MR-row slices: A chunk in L2 */
                    if (m0 + r >= M) break;
                    VEC_T acc[MR][NR / VW];
                    PM_UNROLL
                    for (int i = 0; i < MR; ++i) {
                        GLOBAL ELEM_T* c_ptr = C + c_off + (batch * M + m0 + r + i) * (INDEX_T)N + n0 + c;
                        PM_UNROLL
                        for (int j = 0; j < NR / VW; ++j)
                            acc[i][j] = (k0 == 0 || m0 + r + i >= M) ? (VEC_T)(0) : VLOADN(c_ptr + j * VW);
                    }
#if !PM_RB_PACK_B
                    GLOBAL const ELEM_T* b_ptr = B + b_base + n0 + c + (INDEX_T)k0 * b_sk;
#endif
                    for (int k = k0; k < k_end; ++k) {
                        VEC_T b_vec[NR / VW];
#if PM_RB_PACK_B
                        PM_UNROLL
                        for (int j = 0; j < NR / VW; ++j) b_vec[j] = b_pack[(k - k0) * (NR / VW) + j];
#else
                        PM_UNROLL
                        for (int j = 0; j < NR / VW; ++j) b_vec[j] = VLOADN(b_ptr + j * VW);
                        b_ptr += b_sk;
#endif
                        PM_RB_RANK1(acc, b_vec, r, k)
                    }
                    PM_UNROLL
                    for (int i = 0; i < MR; ++i) {
                        if (m0 + r + i < M) {
                            GLOBAL ELEM_T* c_ptr = C + c_off + (batch * M + m0 + r + i) * (INDEX_T)N + n0 + c;
                            PM_UNROLL
                            for (int j = 0; j < NR / VW; ++j) VSTOREN(acc[i][j], 0, c_ptr + j * VW);
                        }
                    }
                }
            }
        }
    }
    {
        /* The last columns of C, fewer than NR (N not a multiple of it). Where they are many,
         * the same vector kernel on rows of B zero-filled past N, each step's row gathered into
         * private memory, stored column by column: scalar, column after column, they made a
         * 255-wide float32 product take 2.2x a 256-wide one on PoCL (the 2-core AVX-512 Xeon,
         * 2026-11-28). Where they are few (one column: 4096 x 33 x 4096 took 3.2x as long on
         * vectors), the scalar loop: per step of K, MR * NR / VW vector multiply-adds and NR
         * loads against MR + 1 scalar operations a column. */
        const int c = n_vec;
        const int n_tail = ((N - n0 < WPTN) ? N - n0 : WPTN) - n_vec;
        const bool vector_tail = n_tail * (MR + 1) > MR * (NR / VW) + NR;
        GLOBAL const ELEM_T* b_col = B + b_base + n0 + c;
        for (int r = 0; vector_tail && r < WPTM; r += MR) {
            if (m0 + r >= M) break;
            VEC_T acc[MR][NR / VW];
            PM_UNROLL
            for (int i = 0; i < MR; ++i) {
                PM_UNROLL
                for (int j = 0; j < NR / VW; ++j) acc[i][j] = (VEC_T)(0);
            }
            for (int k = 0; k < K; ++k) {
                ELEM_T row[NR];
                for (int j = 0; j < NR; ++j) row[j] = (j < n_tail) ? b_col[(INDEX_T)k * b_sk + j] : (ELEM_T)0;
                VEC_T b_vec[NR / VW];
                PM_UNROLL
                for (int j = 0; j < NR / VW; ++j) b_vec[j] = VLOADN(row + j * VW);
                PM_RB_RANK1(acc, b_vec, r, k)
            }
            PM_UNROLL
            for (int i = 0; i < MR; ++i) {
                if (m0 + r + i < M) {
                    ELEM_T sums[NR];
                    PM_UNROLL
                    for (int j = 0; j < NR / VW; ++j) VSTOREN(acc[i][j], 0, sums + j * VW);
                    GLOBAL ELEM_T* c_ptr = C + c_off + (batch * M + m0 + r + i) * (INDEX_T)N + n0 + c;
                    for (int j = 0; j < n_tail; ++j) c_ptr[j] = sums[j];
                }
            }
        }
        for (int n = n0 + c; !vector_tail && n < n0 + c + n_tail; ++n) {
            GLOBAL const ELEM_T* b_ptr = B + b_base + n;
            for (int r = 0; r < WPTM; r += MR) {
                if (m0 + r >= M) break;
                ELEM_T acc[MR];
                PM_UNROLL
                for (int i = 0; i < MR; ++i) acc[i] = 0;
                for (int k = 0; k < K; ++k) {
                    const ELEM_T b_val = b_ptr[(INDEX_T)k * b_sk];
                    PM_UNROLL
                    for (int i = 0; i < MR; ++i) acc[i] = A[a_row[r + i] + (INDEX_T)k * a_sk] * b_val + acc[i];
                }
                PM_UNROLL
                for (int i = 0; i < MR; ++i) {
                    if (m0 + r + i < M) C[c_off + (batch * M + m0 + r + i) * (INDEX_T)N + n] = acc[i];
                }
            }
        }
    }
    return;
#endif
    /* Scalar path: any dtype, any strides (the vector build covers all its blocks above). */
    INDEX_T b_col[WPTN];
    PM_CLAMPED_OFFSETS(b_col, WPTN, n0, N, b_base, b_sn);
    ACC_T acc[WPTM][WPTN];
    PM_ACC_ZERO(acc, WPTM, WPTN);
    for (int k = 0; k < K; ++k) {
        VAL_T b_reg[WPTN];
        PM_UNROLL
        for (int j = 0; j < WPTN; ++j) b_reg[j] = LOAD(B, b_col[j] + (INDEX_T)k * b_sk);
        PM_UNROLL
        for (int i = 0; i < WPTM; ++i) {
            const VAL_T a_val = LOAD(A, a_row[i] + (INDEX_T)k * a_sk);
            PM_UNROLL
            for (int j = 0; j < WPTN; ++j) ACC_MADD(acc[i][j], a_val, b_reg[j]);
        }
    }
    PM_STORE_BLOCK(acc, WPTM, WPTN);
}
#endif
