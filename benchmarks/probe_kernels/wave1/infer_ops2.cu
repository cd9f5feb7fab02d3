// Inference-engine kernels (vLLM / FasterTransformer manner): blockReduceSum helpers as
// __inline__ templates, fused_add_rms_norm with a half2-vectorized variant, GPT-J rotary
// embedding with int64 positions and a cos/sin cache, gelu_tanh_and_mul through a template
// activation, per-token int8 quantization with a block max, add-bias-residual layernorm.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define FINAL_MASK 0xffffffff

namespace vllm {

template <typename T>
__inline__ __device__ T warpReduceSum(T val) {
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) val += __shfl_xor_sync(FINAL_MASK, val, mask, 32);
    return val;
}

template <typename T>
__inline__ __device__ T blockReduceSum(T val) {
    static __shared__ T shared[32];
    int lane = threadIdx.x & 0x1f;
    int wid = threadIdx.x >> 5;
    val = warpReduceSum<T>(val);
    if (lane == 0) shared[wid] = val;
    __syncthreads();
    val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : (T)(0.0f);
    val = warpReduceSum<T>(val);
    return val;
}

template <typename T>
__inline__ __device__ T warpReduceMax(T val) {
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) val = max(val, __shfl_xor_sync(FINAL_MASK, val, mask, 32));
    return val;
}

template <typename T>
__inline__ __device__ T blockReduceMax(T val) {
    static __shared__ T shared[32];
    int lane = threadIdx.x & 0x1f;
    int wid = threadIdx.x >> 5;
    val = warpReduceMax(val);
    if (lane == 0) shared[wid] = val;
    __syncthreads();
    val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : (T)-1e20f;
    val = warpReduceMax(val);
    return val;
}

// residual += input; input = rms_norm(residual) * weight
template <typename scalar_t>
__global__ void fused_add_rms_norm_kernel(scalar_t* __restrict__ input, scalar_t* __restrict__ residual,
                                          const scalar_t* __restrict__ weight, const float epsilon,
                                          const int num_tokens, const int hidden_size) {
    __shared__ float s_variance;
    float variance = 0.0f;
    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        scalar_t z = input[blockIdx.x * hidden_size + idx];
        z += residual[blockIdx.x * hidden_size + idx];
        float x = (float)z;
        variance += x * x;
        residual[blockIdx.x * hidden_size + idx] = z;
    }
    variance = blockReduceSum<float>(variance);
    if (threadIdx.x == 0) s_variance = rsqrtf(variance / hidden_size + epsilon);
    __syncthreads();
    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        float x = (float)residual[blockIdx.x * hidden_size + idx];
        input[blockIdx.x * hidden_size + idx] = ((scalar_t)(x * s_variance)) * weight[idx];
    }
}

// half2-vectorized variant, width 2 (hidden_size even)
__global__ void fused_add_rms_norm_half2_kernel(__half* __restrict__ input, __half* __restrict__ residual,
                                                const __half* __restrict__ weight, const float epsilon,
                                                const int num_tokens, const int hidden_size) {
    __shared__ float s_variance;
    const int vec_hidden_size = hidden_size / 2;
    __half2* __restrict__ input_v = reinterpret_cast<__half2*>(input);
    __half2* __restrict__ residual_v = reinterpret_cast<__half2*>(residual);
    const __half2* __restrict__ weight_v = reinterpret_cast<const __half2*>(weight);
    float variance = 0.0f;
    for (int idx = threadIdx.x; idx < vec_hidden_size; idx += blockDim.x) {
        int id = blockIdx.x * vec_hidden_size + idx;
        __half2 temp = input_v[id];
        temp = __hadd2(temp, residual_v[id]);
        float2 f = __half22float2(temp);
        variance += f.x * f.x + f.y * f.y;
        residual_v[id] = temp;
    }
    variance = blockReduceSum<float>(variance);
    if (threadIdx.x == 0) s_variance = rsqrtf(variance / hidden_size + epsilon);
    __syncthreads();
    for (int idx = threadIdx.x; idx < vec_hidden_size; idx += blockDim.x) {
        int id = blockIdx.x * vec_hidden_size + idx;
        float2 f = __half22float2(residual_v[id]);
        __half2 t = __floats2half2_rn(f.x * s_variance, f.y * s_variance);
        input_v[id] = __hmul2(t, weight_v[idx]);
    }
}

// GPT-J style (interleaved) rotary embedding, in place on query and key
template <typename scalar_t, bool IS_NEOX>
inline __device__ void apply_rotary_embedding(scalar_t* __restrict__ arr, const scalar_t* __restrict__ cos_ptr,
                                              const scalar_t* __restrict__ sin_ptr, int rot_offset, int embed_dim) {
    int x_index, y_index;
    scalar_t cos, sin;
    if (IS_NEOX) {
        x_index = rot_offset;
        y_index = embed_dim + rot_offset;
        cos = __ldg(cos_ptr + x_index);
        sin = __ldg(sin_ptr + x_index);
    } else {
        x_index = 2 * rot_offset;
        y_index = 2 * rot_offset + 1;
        cos = __ldg(cos_ptr + x_index / 2);
        sin = __ldg(sin_ptr + x_index / 2);
    }
    const scalar_t x = arr[x_index];
    const scalar_t y = arr[y_index];
    arr[x_index] = x * cos - y * sin;
    arr[y_index] = y * cos + x * sin;
}

template <typename scalar_t, bool IS_NEOX>
__global__ void rotary_embedding_kernel(const int64_t* __restrict__ positions, scalar_t* __restrict__ query,
                                        scalar_t* __restrict__ key, const scalar_t* __restrict__ cos_sin_cache,
                                        const int rot_dim, const int64_t query_stride, const int64_t key_stride,
                                        const int num_heads, const int num_kv_heads, const int head_size) {
    const int token_idx = blockIdx.x;
    int64_t pos = positions[token_idx];
    const scalar_t* cache_ptr = cos_sin_cache + pos * rot_dim;
    const int embed_dim = rot_dim / 2;
    const scalar_t* cos_ptr = cache_ptr;
    const scalar_t* sin_ptr = cache_ptr + embed_dim;
    const int nq = num_heads * embed_dim;
    for (int i = threadIdx.x; i < nq; i += blockDim.x) {
        const int head_idx = i / embed_dim;
        const int64_t token_head = token_idx * query_stride + head_idx * head_size;
        const int rot_offset = i % embed_dim;
        apply_rotary_embedding<scalar_t, IS_NEOX>(query + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim);
    }
    const int nk = num_kv_heads * embed_dim;
    for (int i = threadIdx.x; i < nk; i += blockDim.x) {
        const int head_idx = i / embed_dim;
        const int64_t token_head = token_idx * key_stride + head_idx * head_size;
        const int rot_offset = i % embed_dim;
        apply_rotary_embedding<scalar_t, IS_NEOX>(key + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim);
    }
}

template <typename T>
__device__ __forceinline__ T gelu_tanh_kernel(const T& x) {
    const float f = (float)x;
    constexpr float BETA = M_SQRT2 * M_2_SQRTPI * 0.5f;
    constexpr float KAPPA = 0.044715;
    float x_cube = f * f * f;
    float inner = BETA * (f + KAPPA * x_cube);
    return (T)(0.5f * f * (1.0f + ::tanhf(inner)));
}

template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&)>
__global__ void act_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input, const int d) {
    const int64_t token_idx = blockIdx.x;
    for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
        const scalar_t x = __ldg(&input[token_idx * 2 * d + idx]);
        const scalar_t y = __ldg(&input[token_idx * 2 * d + d + idx]);
        out[token_idx * d + idx] = ACT_FN(x) * y;
    }
}

// dynamic per-token symmetric int8 quantization
template <typename scalar_t, typename scale_type>
__global__ void dynamic_scaled_int8_quant_kernel(scalar_t const* __restrict__ input, int8_t* __restrict__ out,
                                                 scale_type* scale, const int hidden_size) {
    int const tid = threadIdx.x;
    int64_t const token_idx = blockIdx.x;
    float absmax_val = 0.0f;
    float const zero = 0.0f;
    for (int i = tid; i < hidden_size; i += blockDim.x) {
        float val = static_cast<float>(input[token_idx * hidden_size + i]);
        val = val > zero ? val : -val;
        absmax_val = val > absmax_val ? val : absmax_val;
    }
    float const block_absmax_val_maybe = blockReduceMax(absmax_val);
    __shared__ float block_absmax_val;
    if (tid == 0) {
        block_absmax_val = block_absmax_val_maybe;
        scale[token_idx] = block_absmax_val / 127.0f;
    }
    __syncthreads();
    float const tmp_scale = 127.0f / block_absmax_val;
    for (int i = tid; i < hidden_size; i += blockDim.x) {
        float v = static_cast<float>(input[token_idx * hidden_size + i]) * tmp_scale;
        v = fminf(fmaxf(rintf(v), -128.0f), 127.0f);
        out[token_idx * hidden_size + i] = static_cast<int8_t>(v);
    }
}

}  // namespace vllm

// FasterTransformer-style: out = layernorm(out + bias + input) (in place on out), one block per row
template <typename T>
__global__ void add_bias_input_layernorm(T* out, const T* input, const T* bias, const T* gamma,
                                         const T* beta, int m, int n) {
    int tid = threadIdx.x;
    __shared__ float s_mean;
    __shared__ float s_variance;
    float mean = 0.0f;
    float variance = 0.0f;
    float local_out = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        local_out = (float)(out[blockIdx.x * n + i] + input[blockIdx.x * n + i] + __ldg(&bias[i]));
        out[blockIdx.x * n + i] = (T)local_out;
        mean += local_out;
    }
    mean = vllm::blockReduceSum<float>(mean);
    if (threadIdx.x == 0) s_mean = mean / n;
    __syncthreads();
    for (int i = tid; i < n; i += blockDim.x) {
        float diff = (float)out[blockIdx.x * n + i] - s_mean;
        variance += diff * diff;
    }
    variance = vllm::blockReduceSum<float>(variance);
    if (threadIdx.x == 0) s_variance = rsqrtf(variance / n + 1e-6f);
    __syncthreads();
    for (int i = tid; i < n; i += blockDim.x)
        out[blockIdx.x * n + i] =
            (T)((((float)out[blockIdx.x * n + i] - s_mean) * s_variance) * (float)(__ldg(&gamma[i])) + (float)(__ldg(&beta[i])));
}
