// llm.c's idioms (written for kir's tests, in train_gpt2.cu's style): blockReduce taking the
// warp reduction as a template argument through a function pointer alias, dynamic shared
// memory declared as `extern __shared__ char* params[]` and carved by reinterpret_cast, and
// float4 elements reached through vec_at (a float* into a local float4, read and written
// at an index known as the kernel runs).
#include <cuda_runtime.h>

#define WARP_SIZE 32

__device__ inline float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    return val;
}

__device__ inline float warpReduceMax(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val = fmaxf(val, __shfl_xor_sync(0xFFFFFFFF, val, offset));
    }
    return val;
}

using reduction_func_t = float (*) (float);
template <reduction_func_t warp_reduction>
__device__ inline float blockReduce(float val, bool final_sync = false,
                                    float out_of_bounds = 0.0f) {
    __shared__ float shared_val[WARP_SIZE];
    const int lane_id = threadIdx.x % WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;
    float warp_val = warp_reduction(val);
    if (lane_id == 0) { shared_val[warp_id] = warp_val; }
    __syncthreads();
    warp_val = (lane_id < num_warps) ? shared_val[lane_id] : out_of_bounds;
    float block_val = warp_reduction(warp_val);
    if (final_sync) { __syncthreads(); }
    return block_val;
}

__device__ float& vec_at(float4& vec, int index) {
    return reinterpret_cast<float*>(&vec)[index];
}

__device__ float vec_at(const float4& vec, int index) {
    return reinterpret_cast<const float*>(&vec)[index];
}

// each row: input + residual staged in shared memory, scaled by its inverse root mean square
// over its largest magnitude
__global__ void residual_scale_kernel(float* out, const float* inp, const float* res, int C) {
    extern __shared__ char* params[];
    float4* s_row = reinterpret_cast<float4*>(params);
    const float4* inp4 = reinterpret_cast<const float4*>(inp + blockIdx.x * C);
    const float4* res4 = reinterpret_cast<const float4*>(res + blockIdx.x * C);
    float sumsq = 0.0f, maxabs = 0.0f;
    for (int i = threadIdx.x; i < C / 4; i += blockDim.x) {
        float4 a = inp4[i];
        const float4 b = res4[i];
        for (int k = 0; k < 4; ++k) {
            vec_at(a, k) += vec_at(b, k);
            sumsq += vec_at(a, k) * vec_at(a, k);
            maxabs = fmaxf(maxabs, fabsf(vec_at(a, k)));
        }
        s_row[i] = a;
    }
    sumsq = blockReduce<warpReduceSum>(sumsq, true);
    maxabs = blockReduce<warpReduceMax>(maxabs);
    const float scale = rsqrtf(sumsq / C + 1e-5f) / maxabs;
    float4* out4 = reinterpret_cast<float4*>(out + blockIdx.x * C);
    for (int i = threadIdx.x; i < C / 4; i += blockDim.x) {
        float4 o = s_row[i];
        for (int k = 0; k < 4; ++k) vec_at(o, k) *= scale;
        out4[i] = o;
    }
}
