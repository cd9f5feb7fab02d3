#include <cuda_bf16.h>

// llm.c-style AdamW step on bf16 parameters kept in place, with f32 moments also updated
// in place: four outputs that start with the caller's data, of two types.
__device__ inline float mix(float from, float to, float weight) {
    return fmaf(weight, to, fmaf(-weight, from, from));
}

__global__ void adamw_step(__nv_bfloat16* params, const __nv_bfloat16* grads, float* m,
                           float* v, long n, float lr, float beta1, float beta2,
                           float beta1_fix, float beta2_fix, float eps, float decay) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = __bfloat162float(grads[i]);
    float m_i = mix(g, m[i], beta1);
    float v_i = mix(g * g, v[i], beta2);
    m[i] = m_i;
    v[i] = v_i;
    float p = __bfloat162float(params[i]);
    p -= lr * (m_i / beta1_fix / (sqrtf(v_i / beta2_fix) + eps) + decay * p);
    params[i] = __float2bfloat16(p);
}
