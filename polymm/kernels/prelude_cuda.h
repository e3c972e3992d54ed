/* polymm prelude: CUDA dialect (nvcc and NVRTC; needs no header). */
#define PM_CUDA 1
#define KERNEL extern "C" __global__
#define KERNEL_WG(x, y) extern "C" __global__ __launch_bounds__((x) * (y))
#define GLOBAL
#define LOCAL_MEM __shared__
#define LOCAL_PTR
#define BARRIER() __syncthreads()
#define LOCAL_ID(d) ((int)((d) == 0 ? threadIdx.x : (d) == 1 ? threadIdx.y : threadIdx.z))
#define GROUP_ID(d) ((int)((d) == 0 ? blockIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z))
#define LOCAL_SIZE(d) ((int)((d) == 0 ? blockDim.x : (d) == 1 ? blockDim.y : blockDim.z))
#define GLOBAL_ID(d) (GROUP_ID(d) * (int)((d) == 0 ? blockDim.x : (d) == 1 ? blockDim.y : blockDim.z) + LOCAL_ID(d))
#define INDEX_T long long
#define RESTRICT __restrict__
#define DEVICE_FN __device__ __forceinline__
#define PM_UNROLL _Pragma("unroll")
#define AS_FLOAT(u) __uint_as_float(u)
#define AS_UINT(f) __float_as_uint(f)
/* Dynamically sized shared memory: one extern array, 16-byte aligned. */
#define DYN_LOCAL_PARAM
#define DYN_LOCAL_DECL extern __shared__ double2 pm_dyn_smem[]; VAL_T* pm_dyn_local = (VAL_T*)pm_dyn_smem;
/* float16 travels as raw 16-bit words; PTX converts (round to nearest even). */
DEVICE_FN float pm_half_to_float(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
DEVICE_FN unsigned short pm_float_to_half(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
#define HALF_FROM_BITS(h) pm_half_to_float(h)
#define HALF_LOAD(p, i) pm_half_to_float((p)[i])
#define HALF_STORE(p, i, v) ((p)[i] = pm_float_to_half(v))
/* Images are texture objects, fetched with point sampling at integer texel
 * coordinates (unnormalised: texel (x, y) covers [x, x+1) x [y, y+1)). */
#define IMAGE_T cudaTextureObject_t
#define IMAGE_PRELUDE
#define IMAGE_READ(img, col, row) tex2D<IMAGE_TEXEL_T>((img), (float)(col), (float)(row))
