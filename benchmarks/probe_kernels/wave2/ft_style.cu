// FasterTransformer / TensorRT-LLM-style kernels (written for this probe)
#include "ft_reduce.cuh"
#include <assert.h>

namespace fastertransformer {

template<typename T>
__global__ void addBiasResidual(T* output, const T* input, const T* residual1, const T* residual2,
                                const T* bias, const float* scale_inter, const float* scale_out,
                                const int m, const int n)
{
    const int col_index = blockIdx.y * blockDim.x + threadIdx.x;
    const bool is_scale = scale_inter != nullptr && scale_out != nullptr;
    if (col_index < n) {
        T bias_val = (bias == nullptr) ? (T)(0.0f) : bias[col_index];
        float out_val = cuda_cast<float>(input[blockIdx.x * n + col_index]);
        if (is_scale) {
            out_val = out_val * scale_inter[0] * scale_out[0];
        }
        if (residual2 != nullptr) {
            output[blockIdx.x * n + col_index] =
                (T)(out_val + (float)residual1[blockIdx.x * n + col_index]
                    + (float)residual2[blockIdx.x * n + col_index] + (float)bias_val);
        }
        else {
            output[blockIdx.x * n + col_index] =
                (T)(out_val + (float)residual1[blockIdx.x * n + col_index] + (float)bias_val);
        }
    }
}

template<typename T>
__inline__ __device__ T gelu(T x)
{
    float cdf = 0.5f * (1.0f + tanhf((0.7978845608028654f * (x + 0.044715f * x * x * x))));
    return x * cdf;
}

template<>
__inline__ __device__ half2 gelu(half2 val)
{
    half2  val_pow3 = __hmul2(val, __hmul2(val, val));
    float2 tmp_pow  = __half22float2(val_pow3);
    float2 tmp      = __half22float2(val);

    tmp.x = 0.5f * (1.0f + tanhf((0.7978845608028654f * (tmp.x + 0.044715f * tmp_pow.x))));
    tmp.y = 0.5f * (1.0f + tanhf((0.7978845608028654f * (tmp.y + 0.044715f * tmp_pow.y))));
    return __hmul2(val, __float22half2_rn(tmp));
}

// add bias + gelu in half2, grid-stride over m * n / 2 packed elements
__global__ void addBiasGeluHalf2(half2* out, const half2* __restrict bias, int m, int n)
{
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < m * n; id += blockDim.x * gridDim.x) {
        half2 reg_bias = __ldg(&bias[id % n]);
        half2 val      = out[id];
        val            = __hadd2(val, reg_bias);
        out[id]        = gelu(val);
    }
}

template<typename T>
__global__ void addBiasGelu(T* out, const T* __restrict bias, int m, int n)
{
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < m * n; id += blockDim.x * gridDim.x) {
        T reg_bias = __ldg(&bias[id % n]);
        T val      = out[id] + reg_bias;
        out[id]    = (T)(gelu<T>(val));
    }
}

// generalLayerNorm: one block per row, s_mean / s_variance in shared memory
template<typename T>
__global__ void generalLayerNorm(const T* __restrict input, const T* __restrict gamma,
                                 const T* __restrict beta, T* output, const float layernorm_eps,
                                 int m, int n)
{
    const int tid = threadIdx.x;

    __shared__ float s_mean;
    __shared__ float s_variance;
    float            mean     = 0.0f;
    float            variance = 0.0f;

    float local_sum = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        local_sum += (float)(ldg(&input[blockIdx.x * n + i]));
    }

    mean = blockReduceSum(local_sum);

    if (threadIdx.x == 0) {
        s_mean = mean / n;
    }
    __syncthreads();

    float local_var_sum = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        float diff = (float)(ldg(&input[blockIdx.x * n + i])) - s_mean;
        local_var_sum += diff * diff;
    }
    variance = blockReduceSum(local_var_sum);

    if (threadIdx.x == 0) {
        s_variance = rsqrtf(variance / n + layernorm_eps);
    }
    __syncthreads();

    for (int i = tid; i < n; i += blockDim.x) {
        float beta_val = (beta == nullptr) ? 0.0f : (float)(ldg(&beta[i]));
        output[blockIdx.x * n + i] =
            (T)((((float)input[blockIdx.x * n + i] - s_mean) * s_variance) * (float)(ldg(&gamma[i]))
                + beta_val);
    }
}

// masked softmax over attention scores [batch, head, seq, seq], one block per (row, head, batch)
template<typename T>
__global__ void softmax_kernel(T* qk_buf_, const T* attr_mask, const int batch_size,
                               const int head_num, const int seq_len, const T scalar)
{
    int batch_id = blockIdx.x / head_num;
    int qk_offset = blockIdx.x * seq_len * seq_len;
    int mask_offset = batch_id * seq_len * seq_len;

    __shared__ float s_sum, s_max;

    for (int i = 0; i < seq_len; ++i) {
        float qk = threadIdx.x < seq_len ? (float)qk_buf_[threadIdx.x + qk_offset] : 0.0f;
        float mask_val = threadIdx.x < seq_len ? (float)attr_mask[threadIdx.x + mask_offset] : 0.0f;

        mask_val = (1.0f - mask_val) * -10000.0f;

        float tmp = threadIdx.x < seq_len ? (float)(qk * (float)scalar + mask_val) : -1e20f;

        float max_val = blockReduceMax<float>(tmp);

        if (threadIdx.x == 0)
            s_max = max_val;
        __syncthreads();

        qk = threadIdx.x < seq_len ? __expf(tmp - s_max) : 0.0f;

        float sum_val = blockReduceSum<float>(qk);

        if (threadIdx.x == 0) {
            s_sum = sum_val + 1e-6f;
        }
        __syncthreads();

        if (threadIdx.x < seq_len)
            qk_buf_[threadIdx.x + qk_offset] = (T)(qk / s_sum);

        qk_offset += seq_len;
        mask_offset += seq_len;
    }
}

// transpose [batch, seq, head, size] <-> [batch, head, seq, size] used after QKV gemm
template<typename T>
__global__ void transpose(const T* src, T* dst, const int batch_size, const int seq_len,
                          const int head_num, const int size_per_head)
{
    int batch_id = blockIdx.x / (head_num * seq_len);
    int seq_id   = blockIdx.x % seq_len;
    int head_id  = (blockIdx.x % (head_num * seq_len)) / seq_len;
    dst[batch_id * (head_num * seq_len * size_per_head) + seq_id * head_num * size_per_head
        + head_id * size_per_head + threadIdx.x] = src[blockIdx.x * size_per_head + threadIdx.x];
}

}  // namespace fastertransformer
