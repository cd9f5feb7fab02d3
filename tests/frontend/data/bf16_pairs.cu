// Inference-engine style bf16 pairs: a bias + GeLU over __nv_bfloat162 buffers,
// cuda_bf16.h's paired arithmetic (__hadd2, __hmul2 and the * operator) and conversions
// (__bfloat1622float2, __floats2bfloat162_rn, __low2bfloat16 ...), a grid-stride loop.
#include <cuda_bf16.h>

__device__ __forceinline__ float gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ __nv_bfloat162 gelu2(__nv_bfloat162 v) {
    float2 f = __bfloat1622float2(v);
    return __floats2bfloat162_rn(gelu(f.x), gelu(f.y));
}

__global__ void add_bias_gelu_bf162(__nv_bfloat162* out, const __nv_bfloat162* __restrict__ x,
                                    const __nv_bfloat162* __restrict__ bias,
                                    const __nv_bfloat162* __restrict__ scale, int n2, int cols2) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += blockDim.x * gridDim.x) {
        __nv_bfloat162 v = __hadd2(x[i], __ldg(&bias[i % cols2]));
        __nv_bfloat162 g = gelu2(v) * scale[i % cols2];
        __nv_bfloat16 lo = __low2bfloat16(g), hi = __high2bfloat16(g);
        out[i] = __hmul2(__halves2bfloat162(lo, hi), __float2bfloat162_rn(2.0f));
    }
}
