// polymm CUDA-only helper: the end of split-K on the tensor cores (kernels/wgmma.cu built with
// WG_SPLIT). The S runs of K wrote their partial sums, as the accumulators hold them, one after
// the other in W (run s at s * count); here C[c_off + i] is their sum added in run order (so a
// product gives the same bits on every call), rounded once to C's type: float16 and bfloat16 to
// nearest even (TF32 products: float32 as summed), the 8-bit integers to the low byte of the int32 sum (NumPy's wrap-around; the
// int32 sums wrap modulo 2^32, as the tensor cores' own accumulators do). One element per thread
// and step, consecutive threads on consecutive elements: every read and write is coalesced.
// Arguments as polymm_cuda.abi's WGMMA_SUM. No #include.

__device__ __forceinline__ unsigned short pm_sum_f16(float x) {
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ unsigned short pm_sum_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return r;
}

#define PM_WGMMA_SUM(NAME, ACC, T, ROUND)                                                              \
    extern "C" __global__ void NAME(const ACC* __restrict__ W, long long count, int S, T* __restrict__ C, \
                                    long long c_off) {                                                 \
        const long long step = (long long)gridDim.x * blockDim.x;                                      \
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {    \
            ACC sum = W[i];                                                                            \
            for (int s = 1; s < S; ++s) sum += W[(long long)s * count + i];                            \
            C[c_off + i] = ROUND(sum);                                                                 \
        }                                                                                              \
    }
#define PM_LOW_BYTE(x) ((unsigned char)((x) & 0xffu))
PM_WGMMA_SUM(polymm_wgmma_sum_float16, float, unsigned short, pm_sum_f16)
PM_WGMMA_SUM(polymm_wgmma_sum_bfloat16, float, unsigned short, pm_sum_bf16)
PM_WGMMA_SUM(polymm_wgmma_sum_float32, float, float, )
PM_WGMMA_SUM(polymm_wgmma_sum_int8, unsigned, unsigned char, PM_LOW_BYTE)
PM_WGMMA_SUM(polymm_wgmma_sum_uint8, unsigned, unsigned char, PM_LOW_BYTE)
