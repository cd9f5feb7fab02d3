// Attention-side kernels of serving engines (written for this probe, in the style of vLLM,
// FlashInfer and SGLang): paged-attention decode over a block table with warp dot products and
// a block softmax, the v2 reduction over partitions, KV-cache writes through an int64 slot
// mapping (vLLM's x-split key layout and the flash layout), merging two partial attention
// states by their log-sum-exp with 128-bit packs, a FlashInfer-style online-softmax decode
// with a state struct, and the block copy across layers through int64 pointer tables.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>
#include <stdint.h>
#include <cmath>

#define WARP_SIZE 32
#define DIVIDE_ROUND_UP(a, b) (((a) + (b) - 1) / (b))

namespace attn {

// conversions overloaded by type, as the dtype headers of such engines have them
inline __device__ float to_float(float u) { return u; }
inline __device__ float to_float(__half u) { return __half2float(u); }
inline __device__ float to_float(__nv_bfloat16 u) { return __bfloat162float(u); }
inline __device__ void from_float(float& dst, float src) { dst = src; }
inline __device__ void from_float(__half& dst, float src) { dst = __float2half(src); }
inline __device__ void from_float(__nv_bfloat16& dst, float src) { dst = __float2bfloat16(src); }

template <int NUM_WARPS>
inline __device__ float block_sum(float* red_smem, float sum) {
  const int warp = threadIdx.x / WARP_SIZE;
  const int lane = threadIdx.x % WARP_SIZE;
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask >= 1; mask /= 2) sum += __shfl_xor_sync(uint32_t(-1), sum, mask);
  if (lane == 0) red_smem[warp] = sum;
  __syncthreads();
  if (lane < NUM_WARPS) sum = red_smem[lane];
#pragma unroll
  for (int mask = NUM_WARPS / 2; mask >= 1; mask /= 2) sum += __shfl_xor_sync(uint32_t(-1), sum, mask);
  return __shfl_sync(uint32_t(-1), sum, 0);
}

// One block per (head, sequence). k/v cache: [num_blocks, num_kv_heads, BLOCK_SIZE, HEAD_SIZE].
template <typename scalar_t, int HEAD_SIZE, int BLOCK_SIZE, int NUM_THREADS>
__global__ void paged_attention_decode_kernel(
    scalar_t* __restrict__ out, const scalar_t* __restrict__ q,
    const scalar_t* __restrict__ k_cache, const scalar_t* __restrict__ v_cache,
    const int num_kv_heads, const float scale, const int* __restrict__ block_tables,
    const int* __restrict__ seq_lens, const int max_num_blocks_per_seq,
    const float* __restrict__ alibi_slopes, const int q_stride, const int kv_block_stride,
    const int kv_head_stride) {
  constexpr int NUM_WARPS = NUM_THREADS / WARP_SIZE;
  constexpr int ELEMS_PER_LANE = HEAD_SIZE / WARP_SIZE;
  const int head_idx = blockIdx.x;
  const int num_heads = gridDim.x;
  const int seq_idx = blockIdx.y;
  const int seq_len = seq_lens[seq_idx];
  const int num_queries_per_kv = num_heads / num_kv_heads;
  const int kv_head_idx = head_idx / num_queries_per_kv;
  const float alibi_slope = alibi_slopes == nullptr ? 0.f : alibi_slopes[head_idx];
  const int warp_idx = threadIdx.x / WARP_SIZE;
  const int lane = threadIdx.x % WARP_SIZE;

  float q_vec[ELEMS_PER_LANE];
  const scalar_t* q_ptr = q + seq_idx * q_stride + head_idx * HEAD_SIZE;
#pragma unroll
  for (int i = 0; i < ELEMS_PER_LANE; ++i) q_vec[i] = to_float(q_ptr[lane + i * WARP_SIZE]) * scale;

  extern __shared__ char shared_mem[];
  float* logits = reinterpret_cast<float*>(shared_mem);
  __shared__ float red_smem[2 * NUM_WARPS];

  const int* block_table = block_tables + seq_idx * max_num_blocks_per_seq;
  float qk_max = -FLT_MAX;
  for (int token_idx = warp_idx; token_idx < seq_len; token_idx += NUM_WARPS) {
    const int64_t physical_block_number = static_cast<int64_t>(block_table[token_idx / BLOCK_SIZE]);
    const int block_offset = token_idx % BLOCK_SIZE;
    const scalar_t* k_ptr = k_cache + physical_block_number * kv_block_stride +
                            kv_head_idx * kv_head_stride + block_offset * HEAD_SIZE;
    float qk = 0.f;
#pragma unroll
    for (int i = 0; i < ELEMS_PER_LANE; ++i) qk += q_vec[i] * to_float(k_ptr[lane + i * WARP_SIZE]);
#pragma unroll
    for (int mask = WARP_SIZE / 2; mask >= 1; mask /= 2) qk += __shfl_xor_sync(uint32_t(-1), qk, mask);
    qk += (alibi_slope != 0) ? alibi_slope * (token_idx - seq_len + 1) : 0;
    if (lane == 0) logits[token_idx] = qk;
    qk_max = fmaxf(qk_max, qk);
  }
  if (lane == 0) red_smem[warp_idx] = qk_max;
  __syncthreads();
  qk_max = lane < NUM_WARPS ? red_smem[lane] : -FLT_MAX;
#pragma unroll
  for (int mask = NUM_WARPS / 2; mask >= 1; mask /= 2) qk_max = fmaxf(qk_max, __shfl_xor_sync(uint32_t(-1), qk_max, mask));
  qk_max = __shfl_sync(uint32_t(-1), qk_max, 0);

  float exp_sum = 0.f;
  for (int i = threadIdx.x; i < seq_len; i += NUM_THREADS) {
    const float val = __expf(logits[i] - qk_max);
    logits[i] = val;
    exp_sum += val;
  }
  exp_sum = block_sum<NUM_WARPS>(&red_smem[NUM_WARPS], exp_sum);
  const float inv_sum = __fdividef(1.f, exp_sum + 1e-6f);
  for (int i = threadIdx.x; i < seq_len; i += NUM_THREADS) logits[i] *= inv_sum;
  __syncthreads();

  scalar_t* out_ptr = out + (seq_idx * num_heads + head_idx) * HEAD_SIZE;
  for (int d = threadIdx.x; d < HEAD_SIZE; d += NUM_THREADS) {
    float acc = 0.f;
    for (int t = 0; t < seq_len; ++t) {
      const int64_t blk = block_table[t / BLOCK_SIZE];
      acc += logits[t] * to_float(v_cache[blk * kv_block_stride + kv_head_idx * kv_head_stride +
                                          (t % BLOCK_SIZE) * HEAD_SIZE + d]);
    }
    from_float(out_ptr[d], acc);
  }
}

// Combines the partitions of a long sequence: rescale each partition's exp sum by its max.
template <typename scalar_t, int HEAD_SIZE, int NUM_THREADS, int PARTITION_SIZE>
__global__ void paged_attention_v2_reduce_kernel(
    scalar_t* __restrict__ out, const float* __restrict__ exp_sums,
    const float* __restrict__ max_logits, const scalar_t* __restrict__ tmp_out,
    const int* __restrict__ seq_lens, const int max_num_partitions) {
  const int num_heads = gridDim.x;
  const int head_idx = blockIdx.x;
  const int seq_idx = blockIdx.y;
  const int seq_len = seq_lens[seq_idx];
  const int num_partitions = DIVIDE_ROUND_UP(seq_len, PARTITION_SIZE);
  constexpr int NUM_WARPS = NUM_THREADS / WARP_SIZE;
  const int warp_idx = threadIdx.x / WARP_SIZE;
  const int lane = threadIdx.x % WARP_SIZE;

  extern __shared__ char shared_mem[];
  __shared__ float red_smem[2 * NUM_WARPS];
  float* shared_max_logits = reinterpret_cast<float*>(shared_mem);
  const float* max_logits_ptr = max_logits + seq_idx * num_heads * max_num_partitions + head_idx * max_num_partitions;
  float max_logit = -FLT_MAX;
  for (int i = threadIdx.x; i < num_partitions; i += blockDim.x) {
    const float l = max_logits_ptr[i];
    shared_max_logits[i] = l;
    max_logit = fmaxf(max_logit, l);
  }
  __syncthreads();
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask >= 1; mask /= 2) max_logit = fmaxf(max_logit, __shfl_xor_sync(uint32_t(-1), max_logit, mask));
  if (lane == 0) red_smem[warp_idx] = max_logit;
  __syncthreads();
  max_logit = lane < NUM_WARPS ? red_smem[lane] : -FLT_MAX;
#pragma unroll
  for (int mask = NUM_WARPS / 2; mask >= 1; mask /= 2) max_logit = fmaxf(max_logit, __shfl_xor_sync(uint32_t(-1), max_logit, mask));
  max_logit = __shfl_sync(uint32_t(-1), max_logit, 0);

  float* shared_exp_sums = reinterpret_cast<float*>(shared_mem + sizeof(float) * num_partitions);
  const float* exp_sums_ptr = exp_sums + seq_idx * num_heads * max_num_partitions + head_idx * max_num_partitions;
  float global_exp_sum = 0.0f;
  for (int i = threadIdx.x; i < num_partitions; i += blockDim.x) {
    float l = shared_max_logits[i];
    float rescaled_exp_sum = exp_sums_ptr[i] * expf(l - max_logit);
    global_exp_sum += rescaled_exp_sum;
    shared_exp_sums[i] = rescaled_exp_sum;
  }
  __syncthreads();
  global_exp_sum = block_sum<NUM_WARPS>(&red_smem[NUM_WARPS], global_exp_sum);
  const float inv_global_exp_sum = __fdividef(1.0f, global_exp_sum + 1e-6f);

  const scalar_t* tmp_out_ptr = tmp_out + seq_idx * num_heads * max_num_partitions * HEAD_SIZE +
                                head_idx * max_num_partitions * HEAD_SIZE;
  scalar_t* out_ptr = out + seq_idx * num_heads * HEAD_SIZE + head_idx * HEAD_SIZE;
#pragma unroll
  for (int i = threadIdx.x; i < HEAD_SIZE; i += NUM_THREADS) {
    float acc = 0.0f;
    for (int j = 0; j < num_partitions; ++j) {
      acc += to_float(tmp_out_ptr[j * HEAD_SIZE + i]) * shared_exp_sums[j] * inv_global_exp_sum;
    }
    from_float(out_ptr[i], acc);
  }
}

// key_cache: [num_blocks, num_heads, head_size / x, block_size, x]
// value_cache: [num_blocks, num_heads, head_size, block_size]
template <typename scalar_t>
__global__ void reshape_and_cache_kernel(const scalar_t* __restrict__ key,
                                         const scalar_t* __restrict__ value,
                                         scalar_t* __restrict__ key_cache,
                                         scalar_t* __restrict__ value_cache,
                                         const int64_t* __restrict__ slot_mapping,
                                         const int key_stride, const int value_stride,
                                         const int num_heads, const int head_size,
                                         const int block_size, const int x) {
  const int64_t token_idx = blockIdx.x;
  const int64_t slot_idx = slot_mapping[token_idx];
  if (slot_idx < 0) return;  // padding token
  const int64_t block_idx = slot_idx / block_size;
  const int64_t block_offset = slot_idx % block_size;
  const int n = num_heads * head_size;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t src_key_idx = token_idx * key_stride + i;
    const int64_t src_value_idx = token_idx * value_stride + i;
    const int head_idx = i / head_size;
    const int head_offset = i % head_size;
    const int x_idx = head_offset / x;
    const int x_offset = head_offset % x;
    const int64_t tgt_key_idx = block_idx * num_heads * (head_size / x) * block_size * x +
                                head_idx * (head_size / x) * block_size * x + x_idx * block_size * x +
                                block_offset * x + x_offset;
    const int64_t tgt_value_idx = block_idx * num_heads * head_size * block_size +
                                  head_idx * head_size * block_size + head_offset * block_size +
                                  block_offset;
    key_cache[tgt_key_idx] = key[src_key_idx];
    value_cache[tgt_value_idx] = value[src_value_idx];
  }
}

// flash layout: [num_blocks, block_size, num_heads, head_size], given by its strides
template <typename scalar_t>
__global__ void reshape_and_cache_flash_kernel(const scalar_t* __restrict__ key,
                                               const scalar_t* __restrict__ value,
                                               scalar_t* __restrict__ key_cache,
                                               scalar_t* __restrict__ value_cache,
                                               const int64_t* __restrict__ slot_mapping,
                                               const int64_t block_stride, const int64_t page_stride,
                                               const int64_t head_stride, const int64_t key_stride,
                                               const int64_t value_stride, const int num_heads,
                                               const int head_size, const int block_size) {
  const int64_t token_idx = blockIdx.x;
  const int64_t slot_idx = slot_mapping[token_idx];
  if (slot_idx < 0) return;
  const int64_t block_idx = slot_idx / block_size;
  const int64_t block_offset = slot_idx % block_size;
  const int n_elems = num_heads * head_size;
  const scalar_t* __restrict__ key_src = key + token_idx * key_stride;
  const scalar_t* __restrict__ value_src = value + token_idx * value_stride;
  scalar_t* __restrict__ key_dst = key_cache + block_idx * block_stride + block_offset * page_stride;
  scalar_t* __restrict__ value_dst = value_cache + block_idx * block_stride + block_offset * page_stride;
  for (int i = threadIdx.x; i < n_elems; i += blockDim.x) {
    const int h = i / head_size;
    const int d = i % head_size;
    key_dst[h * head_stride + d] = key_src[i];
    value_dst[h * head_stride + d] = value_src[i];
  }
}

// Merge two partial attentions of the same queries (prefix and suffix) by their LSE.
// output: [num_tokens, num_heads, head_size]; lse: [num_heads, num_tokens]
template <typename scalar_t, int NUM_THREADS>
__global__ void merge_attn_states_kernel(scalar_t* output, float* output_lse,
                                         const scalar_t* prefix_output, const float* prefix_lse,
                                         const scalar_t* suffix_output, const float* suffix_lse,
                                         const int num_tokens, const int num_heads,
                                         const int head_size) {
  using pack_128b_t = uint4;
  const uint pack_size = 16 / sizeof(scalar_t);
  const uint threads_per_head = head_size / pack_size;
  const uint global_idx = blockIdx.x * NUM_THREADS + threadIdx.x;
  const uint token_head_threads = num_tokens * num_heads * threads_per_head;
  if (global_idx >= token_head_threads) return;

  const uint token_head_idx = global_idx / threads_per_head;
  const uint pack_idx = global_idx % threads_per_head;
  const uint token_idx = token_head_idx / num_heads;
  const uint head_idx = token_head_idx % num_heads;
  const uint pack_offset = pack_idx * pack_size;
  const uint head_offset = token_idx * num_heads * head_size + head_idx * head_size;
  const scalar_t* prefix_head_ptr = prefix_output + head_offset;
  const scalar_t* suffix_head_ptr = suffix_output + head_offset;
  scalar_t* output_head_ptr = output + head_offset;

  float p_lse = prefix_lse[head_idx * num_tokens + token_idx];
  float s_lse = suffix_lse[head_idx * num_tokens + token_idx];
  p_lse = std::isinf(p_lse) ? -std::numeric_limits<float>::infinity() : p_lse;
  s_lse = std::isinf(s_lse) ? -std::numeric_limits<float>::infinity() : s_lse;
  const float max_lse = fmaxf(p_lse, s_lse);
  p_lse = p_lse - max_lse;
  s_lse = s_lse - max_lse;
  const float p_se = expf(p_lse);
  const float s_se = expf(s_lse);
  const float out_se = p_se + s_se;
  const float p_scale = p_se / out_se;
  const float s_scale = s_se / out_se;

  if (pack_offset < head_size) {
    pack_128b_t p_out_pack = reinterpret_cast<const pack_128b_t*>(prefix_head_ptr)[pack_offset / pack_size];
    pack_128b_t s_out_pack = reinterpret_cast<const pack_128b_t*>(suffix_head_ptr)[pack_offset / pack_size];
    pack_128b_t o_out_pack;
#pragma unroll
    for (uint i = 0; i < pack_size; ++i) {
      const float p_out_f = to_float(reinterpret_cast<const scalar_t*>(&p_out_pack)[i]);
      const float s_out_f = to_float(reinterpret_cast<const scalar_t*>(&s_out_pack)[i]);
      const float o_out_f = p_out_f * p_scale + (s_out_f * s_scale);
      from_float(reinterpret_cast<scalar_t*>(&o_out_pack)[i], o_out_f);
    }
    reinterpret_cast<pack_128b_t*>(output_head_ptr)[pack_offset / pack_size] = o_out_pack;
  }
  if (output_lse != nullptr && pack_idx == 0) {
    const float out_lse = logf(out_se) + max_lse;
    output_lse[head_idx * num_tokens + token_idx] = out_lse;
  }
}

// FlashInfer-style decode: each warp folds its tokens into an online-softmax state, the
// warps' states are merged through shared memory by warp 0.
template <int VEC>
struct state_t {
  float o[VEC];
  float m;
  float d;

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < VEC; ++i) o[i] = 0.f;
    m = -INFINITY;
    d = 0.f;
  }

  __device__ __forceinline__ void merge(const float* other_o, float other_m, float other_d) {
    const float m_prev = m, d_prev = d;
    m = fmaxf(m_prev, other_m);
    const float s_prev = expf(m_prev - m);
    const float s_other = expf(other_m - m);
    d = d_prev * s_prev + other_d * s_other;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o[i] = o[i] * s_prev + other_o[i] * s_other;
  }

  __device__ __forceinline__ void normalize() {
#pragma unroll
    for (int i = 0; i < VEC; ++i) o[i] = __fdividef(o[i], d);
  }
};

// q: [num_qo_heads, HEAD_DIM]; k, v: [seq_len, num_kv_heads, HEAD_DIM]; one block per qo head
template <int HEAD_DIM, int NUM_WARPS>
__global__ void single_decode_online_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                            const float* __restrict__ v, float* __restrict__ o,
                                            float* __restrict__ lse, const int seq_len,
                                            const int num_kv_heads, const float sm_scale) {
  constexpr int VEC = HEAD_DIM / WARP_SIZE;
  const int qo_head = blockIdx.x;
  const int group = gridDim.x / num_kv_heads;
  const int kv_head = qo_head / group;
  const int warp = threadIdx.y;
  const int lane = threadIdx.x;

  float qv[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) qv[i] = q[qo_head * HEAD_DIM + lane * VEC + i] * sm_scale;

  state_t<VEC> st;
  st.init();
  for (int t = warp; t < seq_len; t += NUM_WARPS) {
    const float* kp = k + ((size_t)t * num_kv_heads + kv_head) * HEAD_DIM + lane * VEC;
    const float* vp = v + ((size_t)t * num_kv_heads + kv_head) * HEAD_DIM + lane * VEC;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += qv[i] * kp[i];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    float one_v[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) one_v[i] = vp[i];
    st.merge(one_v, s, 1.f);
  }

  __shared__ float smem_o[NUM_WARPS][HEAD_DIM];
  __shared__ float smem_md[NUM_WARPS][2];
#pragma unroll
  for (int i = 0; i < VEC; ++i) smem_o[warp][lane * VEC + i] = st.o[i];
  if (lane == 0) {
    smem_md[warp][0] = st.m;
    smem_md[warp][1] = st.d;
  }
  __syncthreads();
  if (warp == 0) {
    st.init();
    for (int w = 0; w < NUM_WARPS; ++w) {
      st.merge(&smem_o[w][lane * VEC], smem_md[w][0], smem_md[w][1]);
    }
    st.normalize();
#pragma unroll
    for (int i = 0; i < VEC; ++i) o[qo_head * HEAD_DIM + lane * VEC + i] = st.o[i];
    if (lane == 0) lse[qo_head] = st.m + logf(st.d);
  }
}

// Copies whole cache blocks in every layer: the layers' caches are reached through tables of
// their addresses, the pairs (src, dst) through block_mapping. One block per (layer, pair).
template <typename scalar_t>
__global__ void copy_blocks_kernel(int64_t* key_cache_ptrs, int64_t* value_cache_ptrs,
                                   const int64_t* __restrict__ block_mapping,
                                   const int numel_per_block) {
  const int layer_idx = blockIdx.x;
  const int pair_idx = blockIdx.y;
  scalar_t* key_cache = reinterpret_cast<scalar_t*>(key_cache_ptrs[layer_idx]);
  scalar_t* value_cache = reinterpret_cast<scalar_t*>(value_cache_ptrs[layer_idx]);
  const int64_t src_block_number = block_mapping[2 * pair_idx];
  const int64_t dst_block_number = block_mapping[2 * pair_idx + 1];
  const int64_t src_block_offset = src_block_number * numel_per_block;
  const int64_t dst_block_offset = dst_block_number * numel_per_block;
  for (int i = threadIdx.x; i < numel_per_block; i += blockDim.x) {
    key_cache[dst_block_offset + i] = key_cache[src_block_offset + i];
  }
  for (int i = threadIdx.x; i < numel_per_block; i += blockDim.x) {
    value_cache[dst_block_offset + i] = value_cache[src_block_offset + i];
  }
}


// ---- paged attention with thread groups and vector traits ----
// A group of THREAD_GROUP_SIZE lanes shares one key token; each lane holds VEC_SIZE-wide
// slices of q and k typed through Vec<> specializations; the key cache is x-split:
// [num_blocks, num_kv_heads, HEAD_SIZE / x, BLOCK_SIZE, x].
template <typename T, int VEC_SIZE>
struct Vec {};
template <> struct Vec<float, 1> { using Type = float; };
template <> struct Vec<float, 2> { using Type = float2; };
template <> struct Vec<float, 4> { using Type = float4; };

inline __device__ float dot(float a, float b) { return a * b; }
inline __device__ float dot(float2 a, float2 b) { return a.x * b.x + a.y * b.y; }
inline __device__ float dot(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

template <int THREAD_GROUP_SIZE, typename VecT, int N>
inline __device__ float qk_dot_(const VecT (&q)[N], const VecT (&k)[N]) {
  float qk = dot(q[0], k[0]);
#pragma unroll
  for (int ii = 1; ii < N; ++ii) qk += dot(q[ii], k[ii]);
#pragma unroll
  for (int mask = THREAD_GROUP_SIZE / 2; mask >= 1; mask /= 2) qk += __shfl_xor_sync(uint32_t(-1), qk, mask);
  return qk;
}

template <typename T, int THREAD_GROUP_SIZE>
struct Qk_dot {
  template <typename VecT, int N>
  static inline __device__ float dot(const VecT (&q)[N], const VecT (&k)[N]) {
    return qk_dot_<THREAD_GROUP_SIZE>(q, k);
  }
};

template <typename scalar_t, int HEAD_SIZE, int BLOCK_SIZE, int NUM_THREADS>
__global__ void paged_attention_v1_grouped_kernel(
    float* __restrict__ out, const scalar_t* __restrict__ q, const scalar_t* __restrict__ k_cache,
    const scalar_t* __restrict__ v_cache, const int num_kv_heads, const float scale,
    const int* __restrict__ block_tables, const int* __restrict__ seq_lens,
    const int max_num_blocks_per_seq, const int q_stride, const int kv_block_stride,
    const int kv_head_stride) {
  constexpr int THREAD_GROUP_SIZE = (WARP_SIZE / BLOCK_SIZE > 1) ? WARP_SIZE / BLOCK_SIZE : 1;
  constexpr int NUM_THREAD_GROUPS = NUM_THREADS / THREAD_GROUP_SIZE;
  constexpr int NUM_TOKENS_PER_THREAD_GROUP = DIVIDE_ROUND_UP(BLOCK_SIZE, WARP_SIZE);
  constexpr int NUM_WARPS = NUM_THREADS / WARP_SIZE;
  constexpr int VEC_SIZE = (16 / (THREAD_GROUP_SIZE * sizeof(scalar_t)) > 1) ? 16 / (THREAD_GROUP_SIZE * sizeof(scalar_t)) : 1;
  using K_vec = typename Vec<scalar_t, VEC_SIZE>::Type;
  using Q_vec = typename Vec<scalar_t, VEC_SIZE>::Type;
  constexpr int NUM_ELEMS_PER_THREAD = HEAD_SIZE / THREAD_GROUP_SIZE;
  constexpr int NUM_VECS_PER_THREAD = NUM_ELEMS_PER_THREAD / VEC_SIZE;
  constexpr int x = 16 / sizeof(scalar_t);

  const int thread_idx = threadIdx.x;
  const int warp_idx = thread_idx / WARP_SIZE;
  const int lane = thread_idx % WARP_SIZE;
  const int head_idx = blockIdx.x;
  const int num_heads = gridDim.x;
  const int seq_idx = blockIdx.y;
  const int seq_len = seq_lens[seq_idx];
  const int num_seq_blocks = DIVIDE_ROUND_UP(seq_len, BLOCK_SIZE);
  const int kv_head_idx = head_idx / (num_heads / num_kv_heads);
  const int thread_group_idx = thread_idx / THREAD_GROUP_SIZE;
  const int thread_group_offset = thread_idx % THREAD_GROUP_SIZE;

  const scalar_t* q_ptr = q + seq_idx * q_stride + head_idx * HEAD_SIZE;
  __shared__ Q_vec q_vecs[THREAD_GROUP_SIZE][NUM_VECS_PER_THREAD];
#pragma unroll
  for (int i = thread_group_idx; i < NUM_VECS_PER_THREAD; i += NUM_THREAD_GROUPS) {
    const int vec_idx = thread_group_offset + i * THREAD_GROUP_SIZE;
    q_vecs[thread_group_offset][i] = *reinterpret_cast<const Q_vec*>(q_ptr + vec_idx * VEC_SIZE);
  }
  __syncthreads();

  extern __shared__ char shared_mem[];
  float* logits = reinterpret_cast<float*>(shared_mem);
  __shared__ float red_smem[2 * NUM_WARPS];
  const int* block_table = block_tables + seq_idx * max_num_blocks_per_seq;
  float qk_max = -FLT_MAX;

  for (int block_idx = warp_idx; block_idx < num_seq_blocks; block_idx += NUM_WARPS) {
    const int64_t physical_block_number = static_cast<int64_t>(block_table[block_idx]);
    for (int i = 0; i < NUM_TOKENS_PER_THREAD_GROUP; i++) {
      const int physical_block_offset = (thread_group_idx + i * WARP_SIZE) % BLOCK_SIZE;
      const int token_idx = block_idx * BLOCK_SIZE + physical_block_offset;
      K_vec k_vecs[NUM_VECS_PER_THREAD];
#pragma unroll
      for (int j = 0; j < NUM_VECS_PER_THREAD; j++) {
        const scalar_t* k_ptr = k_cache + physical_block_number * kv_block_stride +
                                kv_head_idx * kv_head_stride + physical_block_offset * x;
        const int vec_idx = thread_group_offset + j * THREAD_GROUP_SIZE;
        const int offset1 = (vec_idx * VEC_SIZE) / x;
        const int offset2 = (vec_idx * VEC_SIZE) % x;
        k_vecs[j] = *reinterpret_cast<const K_vec*>(k_ptr + offset1 * BLOCK_SIZE * x + offset2);
      }
      float qk = scale * Qk_dot<scalar_t, THREAD_GROUP_SIZE>::dot(q_vecs[thread_group_offset], k_vecs);
      if (thread_group_offset == 0) {
        const bool mask = token_idx >= seq_len;
        logits[token_idx] = mask ? 0.f : qk;
        qk_max = mask ? qk_max : fmaxf(qk_max, qk);
      }
    }
  }
#pragma unroll
  for (int mask = WARP_SIZE / 2; mask >= THREAD_GROUP_SIZE; mask /= 2) qk_max = fmaxf(qk_max, __shfl_xor_sync(uint32_t(-1), qk_max, mask));
  if (lane == 0) red_smem[warp_idx] = qk_max;
  __syncthreads();
  qk_max = lane < NUM_WARPS ? red_smem[lane] : -FLT_MAX;
#pragma unroll
  for (int mask = NUM_WARPS / 2; mask >= 1; mask /= 2) qk_max = fmaxf(qk_max, __shfl_xor_sync(uint32_t(-1), qk_max, mask));
  qk_max = __shfl_sync(uint32_t(-1), qk_max, 0);

  float exp_sum = 0.f;
  for (int i = thread_idx; i < seq_len; i += NUM_THREADS) {
    const float val = __expf(logits[i] - qk_max);
    logits[i] = val;
    exp_sum += val;
  }
  exp_sum = block_sum<NUM_WARPS>(&red_smem[NUM_WARPS], exp_sum);
  const float inv_sum = __fdividef(1.f, exp_sum + 1e-6f);
  for (int i = thread_idx; i < seq_len; i += NUM_THREADS) logits[i] *= inv_sum;
  __syncthreads();

  // value: [num_blocks, num_kv_heads, HEAD_SIZE, BLOCK_SIZE]; one output dim per thread
  for (int d = thread_idx; d < HEAD_SIZE; d += NUM_THREADS) {
    float acc = 0.f;
    for (int t = 0; t < seq_len; ++t) {
      const int64_t blk = block_table[t / BLOCK_SIZE];
      acc += logits[t] * to_float(v_cache[blk * kv_block_stride + kv_head_idx * kv_head_stride + d * BLOCK_SIZE + t % BLOCK_SIZE]);
    }
    out[(seq_idx * num_heads + head_idx) * HEAD_SIZE + d] = acc;
  }
}

// FlashInfer-style append of new tokens to a paged KV cache (NHD pages); the cache described by
// a struct passed as a __grid_constant__ parameter
struct paged_kv_t {
  int page_size;
  int num_heads;
  int head_dim;
  float* k_data;
  float* v_data;
  const int* indices;  // page ids, request after request
  const int* indptr;   // first entry of each request in indices
};

__global__ void append_paged_kv_cache_kernel(const __grid_constant__ paged_kv_t paged_kv,
                                             const float* __restrict__ append_key,
                                             const float* __restrict__ append_value,
                                             const int* __restrict__ batch_indices,
                                             const int* __restrict__ positions, const int nnz) {
  const int i = blockIdx.x;
  if (i >= nnz) return;
  const int b = batch_indices[i];
  const int pos = positions[i];
  const int page_iter = paged_kv.indptr[b] + pos / paged_kv.page_size;
  const int entry = pos % paged_kv.page_size;
  const int page = paged_kv.indices[page_iter];
  const int n = paged_kv.num_heads * paged_kv.head_dim;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const size_t dst = ((size_t)page * paged_kv.page_size + entry) * n + j;
    paged_kv.k_data[dst] = append_key[(size_t)i * n + j];
    paged_kv.v_data[dst] = append_value[(size_t)i * n + j];
  }
}

template __global__ void paged_attention_v1_grouped_kernel<float, 64, 16, 128>(float*, const float*, const float*, const float*, const int, const float, const int*, const int*, const int, const int, const int, const int);
template __global__ void paged_attention_decode_kernel<__half, 64, 16, 128>(__half*, const __half*, const __half*, const __half*, const int, const float, const int*, const int*, const int, const float*, const int, const int, const int);
template __global__ void paged_attention_v2_reduce_kernel<float, 64, 64, 32>(float*, const float*, const float*, const float*, const int*, const int);
template __global__ void reshape_and_cache_kernel<float>(const float*, const float*, float*, float*, const int64_t*, const int, const int, const int, const int, const int, const int);
template __global__ void reshape_and_cache_flash_kernel<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, const int64_t*, const int64_t, const int64_t, const int64_t, const int64_t, const int64_t, const int, const int, const int);
template __global__ void merge_attn_states_kernel<__half, 128>(__half*, float*, const __half*, const float*, const __half*, const float*, const int, const int, const int);
template __global__ void single_decode_online_kernel<64, 4>(const float*, const float*, const float*, float*, float*, const int, const int, const float);
template __global__ void copy_blocks_kernel<float>(int64_t*, int64_t*, const int64_t*, const int);

}  // namespace attn
