// polymm CUDA-only fast path behind "auto": a register-blocked SIMT GEMM.
//
// One block computes a BM x BN tile of C; each warp a WM x WN sub-tile; each
// thread TM x TN outputs held in registers, laid out as 4x4 sub-blocks spaced
// one warp-row apart so that every shared-memory fragment read is a 16-byte,
// bank-conflict-free (or broadcast) vector access.  K is walked in BK slices
// through a ring of shared-memory stages with one barrier per slice, filled
// either by cp.async (ASYNC: no staging registers, STAGES deep; for dtypes
// whose shared-memory form is their stored bits) or through registers (two
// stages, converting on the way: float16 -> float32, small ints -> 32 bits).
// The partial K slice comes first, so interior blocks run a loop of unguarded
// loads.  Global reads go through the element strides (no copies): VA/VB > 1
// selects 16-byte-class vector loads along the unit-stride axis when the host
// has checked alignment, AK/BNM say which axis that is.
//
// No #include: the same text compiles under NVRTC (CuPy RawModule) and nvcc.
// Offsets are 64-bit (pointers are advanced per slice), so M*K, K*N, M*N may
// exceed 2^31.  Accumulation: float16 in float32, integers in a wider unsigned
// type (wraps exactly like NumPy's result type after truncation), bool as OR
// of ANDs, complex without conjugation, float32 strictly with FP32 FMA.

typedef long long pm_i64;
typedef unsigned long long pm_u64;

struct pm_c64 { float x, y; };
struct __align__(16) pm_c128 { double x, y; };

template <class T, int V>
struct __align__(sizeof(T) * V) pm_vec { T v[V]; };

__device__ __forceinline__ float pm_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short pm_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// ---- dtype tags: S = storage type, C = compute / accumulate type ----------
#define PM_SIMPLE(TAG, S_, C_, FMA)                                          \
    struct TAG {                                                             \
        typedef S_ S;                                                        \
        typedef C_ C;                                                        \
        static __device__ __forceinline__ C ld(S s) { return (C)s; }         \
        static __device__ __forceinline__ S st(C c) { return (S)c; }         \
        static __device__ __forceinline__ void mac(C& acc, C a, C b) { FMA; }\
    };
PM_SIMPLE(pm_f32, float, float, acc = __fmaf_rn(a, b, acc))
PM_SIMPLE(pm_f64, double, double, acc = __fma_rn(a, b, acc))
PM_SIMPLE(pm_i8, signed char, unsigned int, acc += a * b)
PM_SIMPLE(pm_i16, short, unsigned int, acc += a * b)
PM_SIMPLE(pm_i32, int, unsigned int, acc += a * b)
PM_SIMPLE(pm_i64t, long long, unsigned long long, acc += a * b)
PM_SIMPLE(pm_u8, unsigned char, unsigned int, acc += a * b)
PM_SIMPLE(pm_u16, unsigned short, unsigned int, acc += a * b)
PM_SIMPLE(pm_u32, unsigned int, unsigned int, acc += a * b)
PM_SIMPLE(pm_u64t, unsigned long long, unsigned long long, acc += a * b)
#undef PM_SIMPLE

struct pm_b1 {  // NumPy bool: one byte, 0 or 1; result = OR over k of (a AND b)
    typedef unsigned char S;
    typedef unsigned int C;
    static __device__ __forceinline__ C ld(S s) { return s != 0; }
    static __device__ __forceinline__ S st(C c) { return c != 0; }
    static __device__ __forceinline__ void mac(C& acc, C a, C b) { acc |= a & b; }
};
struct pm_f16 {  // IEEE half as raw bits; products accumulate in float32
    typedef unsigned short S;
    typedef float C;
    static __device__ __forceinline__ C ld(S s) { return pm_h2f(s); }
    static __device__ __forceinline__ S st(C c) { return pm_f2h(c); }
    static __device__ __forceinline__ void mac(C& acc, C a, C b) { acc = __fmaf_rn(a, b, acc); }
};
struct pm_z64 {
    typedef pm_c64 S;
    typedef pm_c64 C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return c; }
    static __device__ __forceinline__ void mac(C& acc, C a, C b) {
        acc.x = __fmaf_rn(a.x, b.x, acc.x);
        acc.x = __fmaf_rn(-a.y, b.y, acc.x);
        acc.y = __fmaf_rn(a.x, b.y, acc.y);
        acc.y = __fmaf_rn(a.y, b.x, acc.y);
    }
};
struct pm_z128 {
    typedef pm_c128 S;
    typedef pm_c128 C;
    static __device__ __forceinline__ C ld(S s) { return s; }
    static __device__ __forceinline__ S st(C c) { return c; }
    static __device__ __forceinline__ void mac(C& acc, C a, C b) {
        acc.x = __fma_rn(a.x, b.x, acc.x);
        acc.x = __fma_rn(-a.y, b.y, acc.x);
        acc.y = __fma_rn(a.x, b.y, acc.y);
        acc.y = __fma_rn(a.y, b.x, acc.y);
    }
};

// Four consecutive shared-memory values through 16-byte loads (p is 16-byte aligned).
// ---- cp.async (sm_80+): global -> shared without staging registers ------
__device__ __forceinline__ unsigned pm_smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
// Copies BYTES (4, 8 or 16) or, when !valid, writes BYTES zeros (src not read).
template <int BYTES>
__device__ __forceinline__ void pm_cp_async(unsigned dst, const void* src, bool valid) {
    const int n = valid ? BYTES : 0;
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(n) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" :: "r"(dst), "l"(src), "n"(BYTES), "r"(n) : "memory");
}
__device__ __forceinline__ void pm_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void pm_cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

template <bool B> struct pm_flag { static constexpr bool value = B; };

// Load V consecutive elements (unit stride, aligned when V > 1) without checks.
template <class S, int V>
__device__ __forceinline__ void pm_ldg(const S* p, S* out) {
    if constexpr (V > 1) {
        const pm_vec<S, V> v = *reinterpret_cast<const pm_vec<S, V>*>(p);
#pragma unroll
        for (int w = 0; w < V; ++w) out[w] = v.v[w];
    } else {
        out[0] = *p;
    }
}

template <class T>
__device__ __forceinline__ void pm_lds4(const T* p, T* out) {
    constexpr int W = sizeof(T) >= 16 ? 1 : (16 / sizeof(T) >= 4 ? 4 : 16 / sizeof(T));
#pragma unroll
    for (int i = 0; i < 4; i += W) {
        const pm_vec<T, W> v = *reinterpret_cast<const pm_vec<T, W>*>(p + i);
#pragma unroll
        for (int w = 0; w < W; ++w) out[i + w] = v.v[w];
    }
}

// Shared-memory bytes for one configuration (the host mirrors this formula).
template <class Tag, int BM, int BN, int BK, bool AK, bool BNM>
struct pm_smem_layout {
    typedef typename Tag::C C;
    static constexpr int PAD = sizeof(C) >= 16 ? 1 : 16 / (int)sizeof(C);
    static constexpr int LDA = BM + (AK ? PAD : 0);   // A stored k-major: As[k][m]
    static constexpr int LDB = BN + (BNM ? 0 : PAD);  // B stored k-major: Bs[k][n]
};

template <class Tag, int BM, int BN, int BK, int WM, int WN, int TM, int TN,
          bool AK, int VA, bool BNM, int VB, int MINB, int STAGES, bool ASYNC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32, MINB)
polymm_fastgemm(int M, int N, int K,
                const typename Tag::S* __restrict__ A, pm_i64 a_off, pm_i64 a_sb, pm_i64 a_sm, pm_i64 a_sk,
                const typename Tag::S* __restrict__ B, pm_i64 b_off, pm_i64 b_sb, pm_i64 b_sk, pm_i64 b_sn,
                typename Tag::S* __restrict__ Cout, pm_i64 c_off)
{
    typedef typename Tag::S S;
    typedef typename Tag::C Cc;
    typedef pm_smem_layout<Tag, BM, BN, BK, AK, BNM> L;
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int WARPS_N = BN / WN;
    constexpr int LM = WM / TM, LN = WN / TN;
    static_assert(LM * LN == 32, "a warp is 32 lanes");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4x4 blocks");
    constexpr int LDA = L::LDA, LDB = L::LDB;
    constexpr int A_CH = BM * BK / VA, B_CH = BK * BN / VB;
    static_assert(A_CH % NT == 0 && B_CH % NT == 0, "loads divide evenly among threads");
    constexpr int NA = A_CH / NT, NB = B_CH / NT;

    // ASYNC: cp.async straight into shared memory, STAGES slices in flight
    // (only where shared memory holds the stored bits unchanged: S == C).
    // Otherwise: registers stage the next slice (converted on the way), 2 stages.
    static_assert(ASYNC ? (sizeof(S) == sizeof(Cc) && sizeof(S) >= 4 && STAGES >= 2) : STAGES == 2,
                  "cp.async needs S == C of 4+ bytes; register staging is double-buffered");
    extern __shared__ __align__(16) unsigned char pm_smem[];
    Cc* As = reinterpret_cast<Cc*>(pm_smem);
    Cc* Bs = As + STAGES * BK * LDA;

    // Grouped tile order: consecutive blocks share rows of A in L2.
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    constexpr int GROUP = 8;
    const int bid = blockIdx.x;
    const int per_group = GROUP * tiles_n;
    const int first_m = (bid / per_group) * GROUP;
    const int gm = min(tiles_m - first_m, GROUP);
    const int tile_m = first_m + (bid % per_group) % gm;
    const int tile_n = (bid % per_group) / gm;
    const int m_base = tile_m * BM, n_base = tile_n * BN;

    const int tid = threadIdx.x;
    const S* Ab = A + a_off + (pm_i64)blockIdx.z * a_sb;
    const S* Bb = B + b_off + (pm_i64)blockIdx.z * b_sb;

    // ---- per-thread load assignments: chunk it of a slice is chunk 0 moved by
    // it*(DM rows, DK cols) (NT divides the chunks per row), so one pointer and
    // one 64-bit delta per operand are all the state the K walk carries.
    constexpr int CA = AK ? BK / VA : BM / VA;    // chunks along the unit axis of a slice row
    constexpr int CB = BNM ? BN / VB : BK / VB;
    static_assert(NT % CA == 0 && NT % CB == 0, "chunk geometry repeats every NT");
    constexpr int A_DM = AK ? NT / CA : 0, A_DK = AK ? 0 : NT / CA;
    constexpr int B_DN = BNM ? 0 : NT / CB, B_DK = BNM ? NT / CB : 0;
    const int a_m0 = AK ? tid / CA : (tid % CA) * VA;
    const int a_k0 = AK ? (tid % CA) * VA : tid / CA;
    const int b_n0 = BNM ? (tid % CB) * VB : tid / CB;
    const int b_k0 = BNM ? tid / CB : (tid % CB) * VB;
    const S* pa = Ab + (pm_i64)(m_base + a_m0) * a_sm + (pm_i64)a_k0 * a_sk;
    const S* pb = Bb + (pm_i64)(n_base + b_n0) * b_sn + (pm_i64)b_k0 * b_sk;
    const pm_i64 a_delta = (pm_i64)A_DM * a_sm + (pm_i64)A_DK * a_sk;
    const pm_i64 b_delta = (pm_i64)B_DN * b_sn + (pm_i64)B_DK * b_sk;
    const pm_i64 a_step = (pm_i64)BK * a_sk, b_step = (pm_i64)BK * b_sk;

    S ra[NA][VA], rb[NB][VB];

    // CHECK = false: the whole slice lies inside A and B (interior blocks, all
    // but the last K slice): straight-line loads with no guards or branches.
    auto load_tiles = [&](int k0, auto check) {
        constexpr bool CHECK = decltype(check)::value;
#pragma unroll
        for (int it = 0; it < NA; ++it) {
            const S* p = pa + it * a_delta;
            const int gm_ = m_base + a_m0 + it * A_DM, gk = k0 + a_k0 + it * A_DK;
            if (!CHECK) {
                pm_ldg<S, VA>(p, ra[it]);
            } else if (AK) {
                const bool row_ok = gm_ < M;
                if (VA > 1 && row_ok && gk >= 0 && gk + VA <= K && (gk & (VA - 1)) == 0) {
                    const pm_vec<S, VA> v = *reinterpret_cast<const pm_vec<S, VA>*>(p);
#pragma unroll
                    for (int w = 0; w < VA; ++w) ra[it][w] = v.v[w];
                } else {
#pragma unroll
                    for (int w = 0; w < VA; ++w)
                        ra[it][w] = (row_ok && (unsigned)(gk + w) < (unsigned)K) ? p[(pm_i64)w * a_sk] : S();
                }
            } else {
                const bool k_ok = (unsigned)gk < (unsigned)K;
                if (VA > 1 && k_ok && gm_ + VA <= M) {
                    const pm_vec<S, VA> v = *reinterpret_cast<const pm_vec<S, VA>*>(p);
#pragma unroll
                    for (int w = 0; w < VA; ++w) ra[it][w] = v.v[w];
                } else {
#pragma unroll
                    for (int w = 0; w < VA; ++w)
                        ra[it][w] = (k_ok && gm_ + w < M) ? p[(pm_i64)w * a_sm] : S();
                }
            }
        }
        pa += a_step;
#pragma unroll
        for (int it = 0; it < NB; ++it) {
            const S* p = pb + it * b_delta;
            const int gn = n_base + b_n0 + it * B_DN, gk = k0 + b_k0 + it * B_DK;
            if (!CHECK) {
                pm_ldg<S, VB>(p, rb[it]);
            } else if (BNM) {
                const bool k_ok = (unsigned)gk < (unsigned)K;
                if (VB > 1 && k_ok && gn + VB <= N) {
                    const pm_vec<S, VB> v = *reinterpret_cast<const pm_vec<S, VB>*>(p);
#pragma unroll
                    for (int w = 0; w < VB; ++w) rb[it][w] = v.v[w];
                } else {
#pragma unroll
                    for (int w = 0; w < VB; ++w)
                        rb[it][w] = (k_ok && gn + w < N) ? p[(pm_i64)w * b_sn] : S();
                }
            } else {
                const bool col_ok = gn < N;
                if (VB > 1 && col_ok && gk >= 0 && gk + VB <= K && (gk & (VB - 1)) == 0) {
                    const pm_vec<S, VB> v = *reinterpret_cast<const pm_vec<S, VB>*>(p);
#pragma unroll
                    for (int w = 0; w < VB; ++w) rb[it][w] = v.v[w];
                } else {
#pragma unroll
                    for (int w = 0; w < VB; ++w)
                        rb[it][w] = (col_ok && (unsigned)(gk + w) < (unsigned)K) ? p[(pm_i64)w * b_sk] : S();
                }
            }
        }
        pb += b_step;
    };

    auto store_tiles = [&](int buf) {
        Cc* as = As + buf * BK * LDA;
        Cc* bs = Bs + buf * BK * LDB;
#pragma unroll
        for (int it = 0; it < NA; ++it) {
            const int m = a_m0 + it * A_DM, k = a_k0 + it * A_DK;
#pragma unroll
            for (int w = 0; w < VA; ++w) {
                if (AK) as[(k + w) * LDA + m] = Tag::ld(ra[it][w]);
                else    as[k * LDA + m + w] = Tag::ld(ra[it][w]);
            }
        }
#pragma unroll
        for (int it = 0; it < NB; ++it) {
            const int n = b_n0 + it * B_DN, k = b_k0 + it * B_DK;
#pragma unroll
            for (int w = 0; w < VB; ++w) {
                if (BNM) bs[k * LDB + n + w] = Tag::ld(rb[it][w]);
                else     bs[(k + w) * LDB + n] = Tag::ld(rb[it][w]);
            }
        }
    };

    // ---- thread's output sub-tile ----
    const int lane = tid & 31, warp = tid >> 5;
    const int row0 = (warp / WARPS_N) * WM + (lane / LN) * 4;
    const int col0 = (warp % WARPS_N) * WN + (lane % LN) * 4;

    Cc acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = Cc();

    // The K walk starts at k_start <= 0 so that the one partial slice (K % BK
    // elements) comes first and is loaded with guards; every later slice is
    // whole.  (When K % VA != 0 the slices are not vector-aligned along k: the
    // guarded path then checks alignment and interior blocks are not used.)  Interior blocks (tile inside M x N) then load with straight-line,
    // unguarded code; edge blocks keep the guards.
    const int KT = (K + BK - 1) / BK;
    const int kr = K % BK;
    const int k_start = kr ? kr - BK : 0;
    const bool interior = m_base + BM <= M && n_base + BN <= N &&
                          (!(AK && VA > 1) || kr % VA == 0) && (!(!BNM && VB > 1) || kr % VB == 0);
    pa += (pm_i64)k_start * a_sk;
    pb += (pm_i64)k_start * b_sk;

    auto compute = [&](const Cc* as, const Cc* bs) {
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            Cc af[TM], bf[TN];
#pragma unroll
            for (int i = 0; i < TM / 4; ++i) pm_lds4(as + kk * LDA + row0 + i * LM * 4, af + 4 * i);
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) pm_lds4(bs + kk * LDB + col0 + j * LN * 4, bf + 4 * j);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) Tag::mac(acc[i][j], af[i], bf[j]);
        }
    };

    if constexpr (ASYNC) {
        const unsigned sa0 = pm_smem_addr(As), sb0 = pm_smem_addr(Bs);
        const S* a_safe = Ab;  // a valid address for zero-filling copies
        const S* b_safe = Bb;
        constexpr int ES = sizeof(S);
        // Issue the copies of slice s into stage buf; pointers advance one slice.
        auto issue = [&](int s, int buf, auto check) {
            constexpr bool CHECK = decltype(check)::value;
            const int k0 = k_start + s * BK;
            const unsigned abuf = sa0 + buf * (BK * LDA * ES);
            const unsigned bbuf = sb0 + buf * (BK * LDB * ES);
#pragma unroll
            for (int it = 0; it < NA; ++it) {
                const S* p = pa + it * a_delta;
                const int m = a_m0 + it * A_DM, k = a_k0 + it * A_DK;
                const int gm_ = m_base + m, gk = k0 + k;
                if (AK) {
#pragma unroll
                    for (int w = 0; w < VA; ++w) {
                        const bool ok = !CHECK || (gm_ < M && (unsigned)(gk + w) < (unsigned)K);
                        pm_cp_async<ES>(abuf + ((k + w) * LDA + m) * ES,
                                        ok ? (const void*)(p + (VA > 1 ? w : 0)) : a_safe, ok);
                    }
                } else if (VA > 1 && (!CHECK || ((unsigned)gk < (unsigned)K && gm_ + VA <= M))) {
                    pm_cp_async<VA * ES>(abuf + (k * LDA + m) * ES, p, true);
                } else {
#pragma unroll
                    for (int w = 0; w < VA; ++w) {
                        const bool ok = !CHECK || ((unsigned)gk < (unsigned)K && gm_ + w < M);
                        pm_cp_async<ES>(abuf + (k * LDA + m + w) * ES,
                                        ok ? (const void*)(p + (pm_i64)w * a_sm) : a_safe, ok);
                    }
                }
            }
            pa += a_step;
#pragma unroll
            for (int it = 0; it < NB; ++it) {
                const S* p = pb + it * b_delta;
                const int n = b_n0 + it * B_DN, k = b_k0 + it * B_DK;
                const int gn = n_base + n, gk = k0 + k;
                if (!BNM) {
#pragma unroll
                    for (int w = 0; w < VB; ++w) {
                        const bool ok = !CHECK || (gn < N && (unsigned)(gk + w) < (unsigned)K);
                        pm_cp_async<ES>(bbuf + ((k + w) * LDB + n) * ES,
                                        ok ? (const void*)(p + (VB > 1 ? w : 0)) : b_safe, ok);
                    }
                } else if (VB > 1 && (!CHECK || ((unsigned)gk < (unsigned)K && gn + VB <= N))) {
                    pm_cp_async<VB * ES>(bbuf + (k * LDB + n) * ES, p, true);
                } else {
#pragma unroll
                    for (int w = 0; w < VB; ++w) {
                        const bool ok = !CHECK || ((unsigned)gk < (unsigned)K && gn + w < N);
                        pm_cp_async<ES>(bbuf + (k * LDB + n + w) * ES,
                                        ok ? (const void*)(p + (pm_i64)w * b_sn) : b_safe, ok);
                    }
                }
            }
            pb += b_step;
        };
        // Prologue: slices 0 .. STAGES-2 in flight (slice 0 is the partial one).
        issue(0, 0, pm_flag<true>());
        pm_cp_commit();
#pragma unroll
        for (int s = 1; s < STAGES - 1; ++s) {
            if (s < KT) {
                if (interior) issue(s, s, pm_flag<false>());
                else          issue(s, s, pm_flag<true>());
            }
            pm_cp_commit();
        }
        // One barrier per slice: it publishes slice t and frees the stage read at t-1,
        // which is where slice t + STAGES - 1 goes.
        auto k_loop = [&](auto check) {
            int rd = 0, wr = STAGES - 1;
            for (int t = 0; t < KT; ++t) {
                pm_cp_wait<STAGES - 2>();
                __syncthreads();
                if (t + STAGES - 1 < KT) issue(t + STAGES - 1, wr, check);
                pm_cp_commit();
                compute(As + rd * BK * LDA, Bs + rd * BK * LDB);
                rd = rd + 1 == STAGES ? 0 : rd + 1;
                wr = wr + 1 == STAGES ? 0 : wr + 1;
            }
        };
        if (interior) k_loop(pm_flag<false>());
        else          k_loop(pm_flag<true>());
        pm_cp_wait<0>();
    } else {
        load_tiles(k_start, pm_flag<true>());
        store_tiles(0);
        __syncthreads();
        auto k_loop = [&](auto check) {
            for (int t = 0; t < KT; ++t) {
                const int cur = t & 1;
                const bool more = t + 1 < KT;
                if (more) load_tiles(k_start + (t + 1) * BK, check);
                compute(As + cur * BK * LDA, Bs + cur * BK * LDB);
                if (more) store_tiles(cur ^ 1);
                __syncthreads();
            }
        };
        if (interior) k_loop(pm_flag<false>());
        else          k_loop(pm_flag<true>());
    }

    // ---- epilogue: C is C-contiguous (B, M, N) ----
    S* Cb = Cout + c_off + (pm_i64)blockIdx.z * ((pm_i64)M * N);
    constexpr bool VEC_C = sizeof(S) * 4 <= 16;
    const bool cvec = VEC_C && (N % 4 == 0) &&
                      ((reinterpret_cast<unsigned long long>(Cb) % (sizeof(S) * 4)) == 0);
#pragma unroll
    for (int i = 0; i < TM / 4; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int m = m_base + row0 + i * LM * 4 + r;
            if (m >= M) continue;
            S* crow = Cb + (pm_i64)m * N;
#pragma unroll
            for (int j = 0; j < TN / 4; ++j) {
                const int n = n_base + col0 + j * LN * 4;
                bool done = false;
                if constexpr (VEC_C) {
                    if (cvec && n + 4 <= N) {
                        pm_vec<S, 4> v;
#pragma unroll
                        for (int s = 0; s < 4; ++s) v.v[s] = Tag::st(acc[i * 4 + r][j * 4 + s]);
                        *reinterpret_cast<pm_vec<S, 4>*>(crow + n) = v;
                        done = true;
                    }
                }
                if (!done) {
#pragma unroll
                    for (int s = 0; s < 4; ++s)
                        if (n + s < N) crow[n + s] = Tag::st(acc[i * 4 + r][j * 4 + s]);
                }
            }
        }
}
