// Asynchronous global -> shared copies (sm_80 and later), shared by the CUDA-only tensor-core
// kernels (tensorcore.cu, dmma.cu): polymm_cuda.sources.source() puts this text first. No
// #include, so NVRTC and nvcc compile the same text.

typedef long long pm_i64;

// The shared-memory address (32-bit, what cp.async and ldmatrix take) of a generic pointer.
__device__ __forceinline__ unsigned pm_smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n" : "=r"(r) : "l"(p));
    return r;
}

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
