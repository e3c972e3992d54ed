/* polymm prelude: OpenCL C dialect.  Maps the dialect-neutral names used by
 * the kernel bodies onto OpenCL built-ins. */
#if PM_NEEDS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#define PM_OPENCL 1
#define KERNEL __kernel
#define KERNEL_WG(x, y) __kernel __attribute__((reqd_work_group_size((x), (y), 1)))
#define GLOBAL __global
#define LOCAL_MEM __local
#define LOCAL_PTR __local
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define LOCAL_ID(d) ((int)get_local_id(d))
#define GROUP_ID(d) ((int)get_group_id(d))
#define GLOBAL_ID(d) ((int)get_global_id(d))
#define LOCAL_SIZE(d) ((int)get_local_size(d))
#define INDEX_T long
#define RESTRICT restrict
#define DEVICE_FN inline
#define PM_UNROLL _Pragma("unroll")
#define AS_FLOAT(u) as_float(u)
#define AS_UINT(f) as_uint(f)
/* Dynamically sized local memory arrives as a trailing kernel argument. */
#define DYN_LOCAL_PARAM , __local VAL_T* pm_dyn_local
#define DYN_LOCAL_DECL
#define HALF_LOAD(p, i) vload_half((size_t)(i), (p))
DEVICE_FN float pm_half_from_bits(ushort h) { return vload_half(0, (const __private half*)&h); }
#define HALF_FROM_BITS(h) pm_half_from_bits(h)
#define HALF_STORE(p, i, v) vstore_half_rte((v), (size_t)(i), (p))
/* Images: unnormalised integer coordinates, no filtering (every texel read is
 * inside the image; clamping is never exercised). */
#define IMAGE_T __read_only image2d_t
#define IMAGE_READ(img, col, row) IMAGE_READ_FN((img), pm_image_sampler, (int2)((col), (row))).x
#define IMAGE_PRELUDE __constant sampler_t pm_image_sampler = \
    CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP_TO_EDGE | CLK_FILTER_NEAREST;
