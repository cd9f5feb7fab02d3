// LLM-training-style kernels, in the manner of llm.c: floatX, grid-stride loops,
// __launch_bounds__ between the return type and the name, cooperative groups, structs,
// a user function named like a C++ library one (lerp).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <assert.h>
#include "common.h"
namespace cg = cooperative_groups;

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)

__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = (float)inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = (floatX)(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
    }
}

__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout,
                                     const int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float x = (float)inp[i];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float coshf_out = coshf(tanh_arg);
        float sech_out = 1.0f / (coshf_out * coshf_out);
        float local_grad = 0.5f * (1.0f + tanh_out) +
                           x * 0.5f * sech_out * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = (floatX)(local_grad * (float)dout[i]);
    }
}

__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < N; idx += blockDim.x * gridDim.x) {
        out[idx] = (floatX)((float)inp1[idx] + (float)inp2[idx]);
    }
}

__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte,
                                       const floatX* wpe, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        out[idx] = wte[ix * C + c] + wpe[t * C + c];
    }
}

// one warp per row; mean and rstd are optional outputs (nullptr when not needed)
__global__ void __launch_bounds__(256) layernorm_forward_kernel(
        floatX* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
        const floatX* __restrict__ inp, const floatX* __restrict__ weight,
        const floatX* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) return;
    const floatX* x = inp + idx * C;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) sum += (float)x[i];
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float m = sum / C;
    if (warp.thread_rank() == 0 && mean != nullptr) mean[idx] = m;
    sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        float diff = (float)x[i] - m;
        sum += diff * diff;
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float s = rsqrtf(sum / C + 1e-5f);
    if (warp.thread_rank() == 0 && rstd != nullptr) rstd[idx] = s;
    floatX* o = out + idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) {
        float n = s * ((float)__ldcs(x + c) - m);
        __stcs(o + c, (floatX)(n * (float)weight[c] + (float)bias[c]));
    }
}

// online softmax, one warp per row, the running state in a struct
__global__ void softmax_forward_kernel(floatX* out, const floatX* inp, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    auto warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= N) return;
    const floatX* x = inp + row * C;
    SoftmaxState state = {-INFINITY, 0.0f};
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        SoftmaxState one{(float)x[i], 1.0f};
        state = softmax_merge(state, one);
    }
    float maxval = cg::reduce(warp, state.maxval, cg::greater<float>{});
    float sum = cg::reduce(warp, state.sum * expf(state.maxval - maxval), cg::plus<float>{});
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        out[row * C + i] = (floatX)(expf((float)x[i] - maxval) / sum);
    }
}

__global__ void crossentropy_forward_kernel(float* losses, const floatX* probs,
                                            const int* targets, int B, int T, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * T) {
        int ix = targets[i];
        assert(ix >= 0 && ix < V);
        losses[i] = -logf((float)probs[i * V + ix]);
    }
}

__device__ float lerp(float start, float end, float weight) {
    return fma(weight, end, fma(-weight, start, start));
}

__global__ void adamw_kernel(float* params_memory, const float* grads_memory, float* m_memory,
                             float* v_memory, long num_parameters, float learning_rate,
                             float beta1, float beta2, float beta1_correction,
                             float beta2_correction, float eps, float weight_decay) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= num_parameters) return;
    float grad = grads_memory[i];
    float m = m_memory[i];
    float v = v_memory[i];
    m = lerp(grad, m, beta1);
    m_memory[i] = m;
    v = lerp(grad * grad, v, beta2);
    v_memory[i] = v;
    m /= beta1_correction;
    v /= beta2_correction;
    params_memory[i] -= learning_rate * (m / (sqrtf(v) + eps) + weight_decay * params_memory[i]);
}

// host code, as in the original training files
void gelu_forward(floatX* out, const floatX* inp, int N) {
    const int block_size = 128;
    gelu_forward_kernel<<<CEIL_DIV(N, block_size), block_size>>>(out, inp, N);
    check_launch("gelu_forward");
}
