// The PTX helpers of the CUDA-only tensor-core kernels (tensorcore.cu, dmma.cu, wgmma.cu,
// tf32_split.cu, transpose.cu), written once: shared-memory addresses, asynchronous copies,
// ldmatrix, the conversions to 16-bit pairs and to TF32, and the mma.sync instructions.
// polymm_cuda.sources.source() puts this text first. No #include, so NVRTC and nvcc compile the
// same text; a helper no kernel of a file calls emits nothing.

typedef long long pm_i64;

// X where PICK holds, else Y (no #include: <type_traits> is not at hand).
template <bool PICK, class X, class Y>
struct pm_pick {
    typedef X type;
};
template <class X, class Y>
struct pm_pick<false, X, Y> {
    typedef Y type;
};

// The shared-memory address (32-bit, what cp.async and ldmatrix take) of a generic pointer.
__device__ __forceinline__ unsigned pm_smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n" : "=r"(r) : "l"(p));
    return r;
}

// ---- asynchronous global -> shared copies (sm_80 and later) ----

// BYTES (4, 8 or 16) from global to shared memory; zero-filled instead when !valid (the source
// is then not read). 16-byte copies bypass L1 (.cg), smaller ones cannot (.ca).
template <int BYTES>
__device__ __forceinline__ void pm_cp_async(unsigned dst, const void* src, bool valid) {
    if (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES),
                     "r"(valid ? BYTES : 0));
}
// BYTES (8 or 16) from global to shared memory of which the first `src_bytes` (0 to BYTES) are
// read and the rest zero-filled: a chunk that crosses the edge of a matrix.
template <int BYTES>
__device__ __forceinline__ void pm_cp_async_part(unsigned dst, const void* src, int src_bytes) {
    if (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(BYTES),
                     "r"(src_bytes));
}
__device__ __forceinline__ void pm_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void pm_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- ldmatrix: four 8 x 8 matrices of 16-bit words from shared memory ----

// Lane l gives the address of row l % 8 of matrix l / 8; thread t receives, of each matrix, row
// t / 4, columns 2 (t % 4) and 2 (t % 4) + 1.
__device__ __forceinline__ void pm_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
// The same, transposed: thread t receives, of each matrix, rows 2 (t % 4) and 2 (t % 4) + 1 of
// column t / 4.
__device__ __forceinline__ void pm_ldsm_x4_t(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// ---- conversions ----

// Two float32 values as a pair of float16 / bfloat16 (round to nearest even), `lo` in the low half.
__device__ __forceinline__ unsigned pm_pack_f16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ unsigned pm_pack_bf16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// The bits of a float32 rounded to TF32 (10 mantissa bits, the low 13 cleared): to nearest, ties
// to even; a finite value that would round past the largest TF32 number is truncated instead
// (stays finite); NaN becomes the quiet NaN whose top mantissa bit TF32 keeps.
__device__ __forceinline__ unsigned pm_tf32_round(unsigned u) {
    if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x7fffffu) ? (u | 0x00400000u) & 0xffffe000u : u;
    const unsigned r = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    return (r & 0x7f800000u) == 0x7f800000u ? u & 0xffffe000u : r;
}

// ---- mma.sync (row.col): d += a b for one warp ----

// m16n8k16 on float16 / bfloat16 inputs (PTX "f16" / "bf16") into float32 accumulators, and
// m16n8k32 on int8 / uint8 ("s8" / "u8") into int32 ones (wrapping modulo 2^32): ACC is the
// accumulators' PTX type, C their C type and RW their operand constraint.
#define PM_MMA_16x8(NAME, SHAPE, PTX, ACC, C, RW)                                                       \
    __device__ __forceinline__ void NAME(C (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {  \
        asm volatile("mma.sync.aligned." SHAPE ".row.col." ACC "." PTX "." PTX "." ACC                  \
                     " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                        \
                     : RW(d[0]), RW(d[1]), RW(d[2]), RW(d[3])                                           \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                   \
    }
PM_MMA_16x8(pm_mma_f16, "m16n8k16", "f16", "f32", float, "+f")
PM_MMA_16x8(pm_mma_bf16, "m16n8k16", "bf16", "f32", float, "+f")
PM_MMA_16x8(pm_mma_s8, "m16n8k32", "s8", "s32", int, "+r")
PM_MMA_16x8(pm_mma_u8, "m16n8k32", "u8", "s32", int, "+r")

// float64 in the four shapes of the FP64 tensor cores: m8n8k4 (sm_80 and later), m16n8k4,
// m16n8k8 and m16n8k16 (sm_90 and later).
__device__ __forceinline__ void pm_dmma_884(double (&d)[2], const double (&a)[1], const double (&b)[1]) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a[0]), "d"(b[0]));
}
__device__ __forceinline__ void pm_dmma_1684(double (&d)[4], const double (&a)[2], const double (&b)[1]) {
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}
__device__ __forceinline__ void pm_dmma_1688(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
__device__ __forceinline__ void pm_dmma_16816(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
                 "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
