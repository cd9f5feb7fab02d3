// Normalization and rotary-embedding kernels in the style of vLLM / SGLang / FlashInfer
// (written for this probe): fused add + RMSNorm over a packed vector struct with operators
// and an `if constexpr` half2 path, RMSNorm in bf16 with CUB's reduction operator chosen by
// CUB_VERSION, Gemma's (1 + w) RMSNorm on float4 loads, per-head q/k RMSNorm one warp per
// head, a Welford layer norm one warp per row, rotary embedding with a template bool for
// the NeoX / GPT-J layouts and an optional key, and a batched rotary with per-token offsets.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cub/cub.cuh>
#include <type_traits>
#include <stdint.h>

#if defined(CUB_VERSION) && CUB_VERSION >= 200800
#include <cuda/std/functional>
using CubAddOp = cuda::std::plus<>;
using CubMaxOp = cuda::maximum<>;
#else
using CubAddOp = cub::Sum;
using CubMaxOp = cub::Max;
#endif

namespace layernorm {

// width scalars packed together, with the operations the norm needs
template <typename scalar_t, int width>
struct __align__(16) PackedVec {
  scalar_t data[width];

  __device__ PackedVec& operator+=(const PackedVec<scalar_t, width>& other) {
    if constexpr (width % 2 == 0 && std::is_same_v<scalar_t, __half>) {
#pragma unroll
      for (int i = 0; i < width; i += 2) {
        __half2 z = __halves2half2(data[i], data[i + 1]);
        z = __hadd2(z, __halves2half2(other.data[i], other.data[i + 1]));
        data[i] = __low2half(z);
        data[i + 1] = __high2half(z);
      }
    } else {
#pragma unroll
      for (int i = 0; i < width; ++i)
        data[i] = static_cast<scalar_t>(static_cast<float>(data[i]) + static_cast<float>(other.data[i]));
    }
    return *this;
  }

  __device__ PackedVec& operator*=(const PackedVec<scalar_t, width>& other) {
#pragma unroll
    for (int i = 0; i < width; ++i)
      data[i] = static_cast<scalar_t>(static_cast<float>(data[i]) * static_cast<float>(other.data[i]));
    return *this;
  }

  __device__ PackedVec& operator*=(const float scale) {
#pragma unroll
    for (int i = 0; i < width; ++i) data[i] = static_cast<scalar_t>(static_cast<float>(data[i]) * scale);
    return *this;
  }

  __device__ float sum_squares() const {
    float result = 0.0f;
#pragma unroll
    for (int i = 0; i < width; ++i) {
      const float x = static_cast<float>(data[i]);
      result += x * x;
    }
    return result;
  }
};

// input += residual -> residual; input = rmsnorm(residual) * weight, width elements a load
template <typename scalar_t, int width>
__global__ std::enable_if_t<(width > 0)> fused_add_rms_norm_vec_kernel(
    scalar_t* __restrict__ input, const int64_t input_stride, scalar_t* __restrict__ residual,
    const scalar_t* __restrict__ weight, const float epsilon, const int num_tokens,
    const int hidden_size) {
  static_assert(sizeof(PackedVec<scalar_t, width>) == sizeof(scalar_t) * width);
  const int vec_hidden_size = hidden_size / width;
  const int64_t vec_input_stride = input_stride / width;
  __shared__ float s_variance;
  float variance = 0.0f;

  auto* __restrict__ input_v = reinterpret_cast<PackedVec<scalar_t, width>*>(input);
  auto* __restrict__ residual_v = reinterpret_cast<PackedVec<scalar_t, width>*>(residual);
  auto* __restrict__ weight_v = reinterpret_cast<const PackedVec<scalar_t, width>*>(weight);

  for (int idx = threadIdx.x; idx < vec_hidden_size; idx += blockDim.x) {
    int id = blockIdx.x * vec_hidden_size + idx;
    int64_t strided_id = blockIdx.x * vec_input_stride + idx;
    PackedVec<scalar_t, width> temp = input_v[strided_id];
    temp += residual_v[id];
    variance += temp.sum_squares();
    residual_v[id] = temp;
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduceStore;
  variance = BlockReduce(reduceStore).Reduce(variance, CubAddOp{}, blockDim.x);

  if (threadIdx.x == 0) s_variance = rsqrtf(variance / hidden_size + epsilon);
  __syncthreads();

  for (int idx = threadIdx.x; idx < vec_hidden_size; idx += blockDim.x) {
    int id = blockIdx.x * vec_hidden_size + idx;
    int64_t strided_id = blockIdx.x * vec_input_stride + idx;
    PackedVec<scalar_t, width> temp = residual_v[id];
    temp *= s_variance;
    temp *= weight_v[idx];
    input_v[strided_id] = temp;
  }
}

// out = x * rsqrt(mean(x^2) + eps) * w, bf16 storage, float math
template <typename scalar_t>
__global__ void rms_norm_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                                const int64_t input_stride, const scalar_t* __restrict__ weight,
                                const float epsilon, const int num_tokens, const int hidden_size) {
  __shared__ float s_variance;
  float variance = 0.0f;
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = (float)input[blockIdx.x * input_stride + idx];
    variance += x * x;
  }
  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduceStore;
  variance = BlockReduce(reduceStore).Sum(variance, blockDim.x);
  if (threadIdx.x == 0) s_variance = rsqrtf(variance / hidden_size + epsilon);
  __syncthreads();
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    float x = (float)input[blockIdx.x * input_stride + idx];
    out[blockIdx.x * hidden_size + idx] = ((scalar_t)(x * s_variance)) * weight[idx];
  }
}

// Gemma: out = x * rsqrt(mean(x^2) + eps) * (1 + w), four floats a load, a warp-shuffle
// then shared-memory block sum
__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float block_reduce_sum(float v) {
  __shared__ float shared[32];
  const int lane = threadIdx.x & 31;
  const int wid = threadIdx.x >> 5;
  v = warp_reduce_sum(v);
  if (lane == 0) shared[wid] = v;
  __syncthreads();
  v = (threadIdx.x < (blockDim.x + 31) / 32) ? shared[lane] : 0.0f;
  if (wid == 0) v = warp_reduce_sum(v);
  return v;
}

__global__ void gemma_rms_norm_f4_kernel(float* __restrict__ out, const float* __restrict__ input,
                                         const float* __restrict__ weight, const int d,
                                         const float eps) {
  const float4* x4 = reinterpret_cast<const float4*>(input + (size_t)blockIdx.x * d);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  float4* o4 = reinterpret_cast<float4*>(out + (size_t)blockIdx.x * d);
  const int n4 = d >> 2;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
    const float4 v = x4[i];
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  __shared__ float s_rstd;
  ss = block_reduce_sum(ss);
  if (threadIdx.x == 0) s_rstd = rsqrtf(ss / d + eps);
  __syncthreads();
  const float rstd = s_rstd;
  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
    const float4 v = x4[i];
    const float4 w = w4[i];
    o4[i] = make_float4(v.x * rstd * (1.f + w.x), v.y * rstd * (1.f + w.y),
                        v.z * rstd * (1.f + w.z), v.w * rstd * (1.f + w.w));
  }
}

// per-head RMSNorm of q and k in place: one warp per (token, head), HEAD_DIM / 32 values a lane
template <typename T, int HEAD_DIM>
__global__ void fused_qk_norm_kernel(T* __restrict__ q, T* __restrict__ k,
                                     const T* __restrict__ q_weight, const T* __restrict__ k_weight,
                                     const int num_tokens, const int num_q_heads,
                                     const int num_kv_heads, const float eps) {
  constexpr int kPerLane = HEAD_DIM / 32;
  const int warp_id = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int heads_per_token = num_q_heads + num_kv_heads;
  if (warp_id >= num_tokens * heads_per_token) return;
  const int token = warp_id / heads_per_token;
  const int head = warp_id % heads_per_token;
  const bool is_q = head < num_q_heads;
  T* ptr = is_q ? q + ((size_t)token * num_q_heads + head) * HEAD_DIM
                : k + ((size_t)token * num_kv_heads + (head - num_q_heads)) * HEAD_DIM;
  const T* w = is_q ? q_weight : k_weight;

  float vals[kPerLane];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    vals[i] = static_cast<float>(ptr[lane + i * 32]);
    ss += vals[i] * vals[i];
  }
#pragma unroll
  for (int mask = 16; mask >= 1; mask >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, mask);
  const float rstd = rsqrtf(ss / HEAD_DIM + eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    ptr[lane + i * 32] = static_cast<T>(vals[i] * rstd * static_cast<float>(w[lane + i * 32]));
  }
}

// Welford layer norm, one warp per row; the (mean, m2, count) triples merged by xor shuffles
struct WelfordData {
  float mean;
  float m2;
  float count;
};

__device__ __forceinline__ WelfordData welford_combine(const WelfordData& a, const WelfordData& b) {
  WelfordData r;
  r.count = a.count + b.count;
  if (r.count == 0.f) {
    r.mean = 0.f;
    r.m2 = 0.f;
    return r;
  }
  const float delta = b.mean - a.mean;
  const float nb_over_n = b.count / r.count;
  r.mean = a.mean + delta * nb_over_n;
  r.m2 = a.m2 + b.m2 + delta * delta * a.count * nb_over_n;
  return r;
}

__global__ void layer_norm_welford_warp_kernel(const __half* __restrict__ x,
                                               const __half* __restrict__ gamma,
                                               const __half* __restrict__ beta,
                                               __half* __restrict__ y, float* __restrict__ mean_out,
                                               float* __restrict__ rstd_out, int rows, int cols,
                                               float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const __half* xr = x + (size_t)row * cols;
  WelfordData w{0.f, 0.f, 0.f};
  for (int c = lane; c < cols; c += 32) {
    const float v = __half2float(xr[c]);
    w.count += 1.f;
    const float d1 = v - w.mean;
    w.mean += d1 / w.count;
    w.m2 += d1 * (v - w.mean);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    WelfordData o;
    o.mean = __shfl_xor_sync(0xffffffff, w.mean, off);
    o.m2 = __shfl_xor_sync(0xffffffff, w.m2, off);
    o.count = __shfl_xor_sync(0xffffffff, w.count, off);
    w = welford_combine(w, o);
  }
  const float rstd = rsqrtf(w.m2 / w.count + eps);
  if (lane == 0) {
    mean_out[row] = w.mean;
    rstd_out[row] = rstd;
  }
  for (int c = lane; c < cols; c += 32) {
    const float v = (__half2float(xr[c]) - w.mean) * rstd;
    y[(size_t)row * cols + c] = __float2half(v * __half2float(gamma[c]) + __half2float(beta[c]));
  }
}

}  // namespace layernorm

namespace rope {

template <typename scalar_t, bool IS_NEOX>
inline __device__ void apply_token_rotary_embedding(scalar_t* __restrict__ arr,
                                                    const scalar_t* __restrict__ cos_ptr,
                                                    const scalar_t* __restrict__ sin_ptr,
                                                    int rot_offset, int embed_dim) {
  int x_index, y_index;
  scalar_t cos, sin;
  if constexpr (IS_NEOX) {
    // the rotated halves are the first and second half of the rotary dims
    x_index = rot_offset;
    y_index = embed_dim + rot_offset;
    cos = __ldg(cos_ptr + x_index);
    sin = __ldg(sin_ptr + x_index);
  } else {
    // GPT-J: adjacent pairs
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
inline __device__ void apply_rotary_embedding(scalar_t* __restrict__ query, scalar_t* __restrict__ key,
                                              const scalar_t* cache_ptr, const int head_size,
                                              const int num_heads, const int num_kv_heads,
                                              const int rot_dim, const int token_idx,
                                              const int64_t query_stride, const int64_t key_stride,
                                              const int64_t head_stride) {
  const int embed_dim = rot_dim / 2;
  const scalar_t* cos_ptr = cache_ptr;
  const scalar_t* sin_ptr = cache_ptr + embed_dim;

  const int nq = num_heads * embed_dim;
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    const int64_t token_head = token_idx * query_stride + head_idx * head_stride;
    const int rot_offset = i % embed_dim;
    apply_token_rotary_embedding<scalar_t, IS_NEOX>(query + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim);
  }

  if (key != nullptr) {
    const int nk = num_kv_heads * embed_dim;
    for (int i = threadIdx.x; i < nk; i += blockDim.x) {
      const int head_idx = i / embed_dim;
      const int64_t token_head = token_idx * key_stride + head_idx * head_stride;
      const int rot_offset = i % embed_dim;
      apply_token_rotary_embedding<scalar_t, IS_NEOX>(key + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim);
    }
  }
}

// one block per token; positions int64; cos_sin_cache [max_position, rot_dim] = [cos | sin]
template <typename scalar_t, bool IS_NEOX>
__global__ void rotary_embedding_kernel(const int64_t* __restrict__ positions,
                                        scalar_t* __restrict__ query,
                                        scalar_t* __restrict__ key,
                                        const scalar_t* __restrict__ cos_sin_cache,
                                        const int rot_dim, const int64_t query_stride,
                                        const int64_t key_stride, const int64_t head_stride,
                                        const int num_heads, const int num_kv_heads,
                                        const int head_size) {
  const int token_idx = blockIdx.x;
  int64_t pos = positions[token_idx];
  const scalar_t* cache_ptr = cos_sin_cache + pos * rot_dim;
  apply_rotary_embedding<scalar_t, IS_NEOX>(query, key, cache_ptr, head_size, num_heads, num_kv_heads,
                                            rot_dim, token_idx, query_stride, key_stride, head_stride);
}

// batched (multi-LoRA) rotary: each token's cache row shifted by its offset
template <typename scalar_t, bool IS_NEOX>
__global__ void batched_rotary_embedding_kernel(const int64_t* __restrict__ positions,
                                                scalar_t* __restrict__ query,
                                                scalar_t* __restrict__ key,
                                                const scalar_t* __restrict__ cos_sin_cache,
                                                const int64_t* __restrict__ cos_sin_cache_offsets,
                                                const int rot_dim, const int64_t query_stride,
                                                const int64_t key_stride, const int64_t head_stride,
                                                const int num_heads, const int num_kv_heads,
                                                const int head_size) {
  const int token_idx = blockIdx.x;
  int64_t pos = positions[token_idx];
  int64_t cos_sin_cache_offset = cos_sin_cache_offsets[token_idx];
  const scalar_t* cache_ptr = cos_sin_cache + (cos_sin_cache_offset + pos) * rot_dim;
  apply_rotary_embedding<scalar_t, IS_NEOX>(query, key, cache_ptr, head_size, num_heads, num_kv_heads,
                                            rot_dim, token_idx, query_stride, key_stride, head_stride);
}

}  // namespace rope

namespace layernorm {
template __global__ void fused_add_rms_norm_vec_kernel<__half, 8>(__half*, const int64_t, __half*, const __half*, const float, const int, const int);
template __global__ void rms_norm_kernel<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const int64_t, const __nv_bfloat16*, const float, const int, const int);
template __global__ void fused_qk_norm_kernel<__nv_bfloat16, 64>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, const int, const int, const int, const float);
}  // namespace layernorm
namespace rope {
template __global__ void rotary_embedding_kernel<float, true>(const int64_t*, float*, float*, const float*, const int, const int64_t, const int64_t, const int64_t, const int, const int, const int);
template __global__ void batched_rotary_embedding_kernel<__half, false>(const int64_t*, __half*, __half*, const __half*, const int64_t*, const int, const int64_t, const int64_t, const int64_t, const int, const int, const int);
}  // namespace rope
