// Scalar half and bfloat16 intrinsics checked bit for bit against float64 references, and
// CUDA's integer __hadd (an average, not a half addition): each output rounds once.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void half_exact(const __half* a, const __half* b, const __half* c,
                           const __nv_bfloat16* p, const __nv_bfloat16* q,
                           const int* i0, const int* i1,
                           __half* fused, __half* prod, __half* sum,
                           __nv_bfloat16* bprod, __nv_bfloat16* bsum, __nv_bfloat16* bfused,
                           int* avg, int* ravg, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fused[i] = __hfma(a[i], b[i], c[i]);
    prod[i] = __hmul(a[i], b[i]);
    sum[i] = __hadd(a[i], c[i]);
    bprod[i] = __hmul(p[i], q[i]);
    bsum[i] = __hadd(p[i], q[i]);
    bfused[i] = __hfma(p[i], q[i], p[i]);
    avg[i] = __hadd(i0[i], i1[i]);
    ravg[i] = __rhadd(i0[i], i1[i]);
}
