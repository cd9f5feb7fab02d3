// Single-token decode attention, a warp a head (paged-attention style without the pages):
// each lane owns two of the 64 dimensions as plain floats, the score is a butterfly over
// the warp, and the running max / sum / output start from -FLT_MAX and zero. The grid is
// (heads, batch): at one sequence of 32 heads the GPU runs 32 warps in all.
#include <cuda_runtime.h>
#include <float.h>

#define HEAD_DIM 64

__device__ __forceinline__ float warp_sum(float x) {
    #pragma unroll
    for (int mask = 16; mask > 0; mask /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, mask);
    return x;
}

__global__ void decode_warp_head(const float* __restrict__ q, const float* __restrict__ k_cache,
                                 const float* __restrict__ v_cache, float* __restrict__ out,
                                 int context_len, float softmax_scale) {
    const int head = blockIdx.x;
    const int lane = threadIdx.x;
    const float* qh = q + head * HEAD_DIM;
    const float q0 = qh[lane] * softmax_scale;
    const float q1 = qh[lane + 32] * softmax_scale;
    float running_max = -FLT_MAX;
    float running_sum = 0.0f;
    float out0 = 0.0f, out1 = 0.0f;
    for (int pos = 0; pos < context_len; pos++) {
        const float* kp = k_cache + ((size_t)head * context_len + pos) * HEAD_DIM;
        const float* vp = v_cache + ((size_t)head * context_len + pos) * HEAD_DIM;
        float logit = warp_sum(q0 * kp[lane] + q1 * kp[lane + 32]);
        float new_max = fmaxf(running_max, logit);
        float rescale = expf(running_max - new_max);
        float p = expf(logit - new_max);
        running_sum = running_sum * rescale + p;
        out0 = out0 * rescale + p * vp[lane];
        out1 = out1 * rescale + p * vp[lane + 32];
        running_max = new_max;
    }
    const float inv = 1.0f / running_sum;
    out[head * HEAD_DIM + lane] = out0 * inv;
    out[head * HEAD_DIM + lane + 32] = out1 * inv;
}
