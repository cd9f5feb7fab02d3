// Bias + scaled SiLU over half-precision activations two at a time, in the style of
// inference engines: __half2 loads, math in float, paired intrinsics to pack and combine.
#include <cuda_fp16.h>

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

__global__ void bias_silu_h2(const __half2* __restrict__ x, const __half2* __restrict__ bias,
                             __half2* __restrict__ y, const __half scale, int pairs_per_row,
                             int total_pairs) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total_pairs;
         i += blockDim.x * gridDim.x) {
        const __half2 b = bias[i % pairs_per_row];
        const __half2 v = __hadd2(x[i], b);
        const float2 f = __half22float2(v);
        const __half2 act = __floats2half2_rn(silu(f.x), silu(f.y));
        const __half2 k = __half2half2(scale);
        const __half2 out = __hfma2(act, k, __hneg2(__hmul2(b, __float2half2_rn(0.0f))));
        y[i] = __hmax2(out, __hsub2(out, out)) + __lowhigh2highlow(__halves2half2(__low2half(out) * __float2half(0.0f), __hadd(__high2half(out), __hneg(__high2half(out)))));
    }
}
