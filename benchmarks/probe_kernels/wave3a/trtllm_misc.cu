// TensorRT-LLM / lmdeploy style kernels with their host-side launchers (written for this
// probe): the fused QKV bias-add and transpose to [B, H, S, D], int8 KV quantization with a
// per-head scale and zero point over a fixed-size Array<T, N> with operator[], a vocab-parallel
// embedding lookup with int64 ids, the last token's hidden state gathered by cumulative
// lengths, bias-add + softmax over a padded vocab with end ids for finished beams, and logits
// soft-capping on float4 loads.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cfloat>
#include <cstdint>

namespace tensorrt_llm {
namespace kernels {

static constexpr uint32_t FINAL_MASK = 0xffffffff;

template <typename T, int N>
struct Array {
  T a[N];
  __device__ __host__ constexpr T& operator[](int i) noexcept { return a[i]; }
  __device__ __host__ constexpr const T& operator[](int i) const noexcept { return a[i]; }
  static constexpr int size() { return N; }
};

template <typename T>
__inline__ __device__ T warpReduceSum(T val) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) val += __shfl_xor_sync(FINAL_MASK, val, mask, 32);
  return val;
}

template <typename T>
__inline__ __device__ T warpReduceMax(T val) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) val = max(val, __shfl_xor_sync(FINAL_MASK, val, mask, 32));
  return val;
}

template <typename T>
__inline__ __device__ T blockReduceSum(T val) {
  static __shared__ T shared[32];
  const int lane = threadIdx.x & 0x1f;
  const int wid = threadIdx.x >> 5;
  val = warpReduceSum<T>(val);
  if (lane == 0) shared[wid] = val;
  __syncthreads();
  val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : (T)(0.0f);
  val = warpReduceSum<T>(val);
  return val;
}

template <typename T>
__inline__ __device__ T blockReduceMax(T val) {
  static __shared__ T shared[32];
  const int lane = threadIdx.x & 0x1f;
  const int wid = threadIdx.x >> 5;
  val = warpReduceMax(val);
  if (lane == 0) shared[wid] = val;
  __syncthreads();
  val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : -1e20f;
  val = warpReduceMax(val);
  return val;
}

// qkv: [token_num, 3, head_num, size_per_head] -> q/k/v: [batch, head_num, seq_len, size_per_head]
template <typename T>
__global__ void add_fusedQKV_bias_transpose_kernel(T* q_buf, T* k_buf, T* v_buf,
                                                   const T* __restrict__ QKV, const T* __restrict__ qkv_bias,
                                                   const int batch_size, const int seq_len,
                                                   const int head_num, const int size_per_head) {
  const int n = head_num * size_per_head;
  for (int index = blockDim.x * blockIdx.x + threadIdx.x; index < batch_size * seq_len * 3 * n;
       index += gridDim.x * blockDim.x) {
    const int bias_id = index % (3 * n);
    const int token_idx = index / (3 * n);
    const int row_offset = bias_id % n;
    const int qkv_id = bias_id / n;
    const int target_batch_id = token_idx / seq_len;
    const int seq_id = token_idx % seq_len;
    const int head_id = row_offset / size_per_head;
    const int size_id = row_offset % size_per_head;
    T val = QKV[index];
    if (qkv_bias != nullptr) val = val + qkv_bias[bias_id];
    const int target = target_batch_id * (head_num * seq_len * size_per_head) +
                       head_id * seq_len * size_per_head + seq_id * size_per_head + size_id;
    if (qkv_id == 0) {
      q_buf[target] = val;
    } else if (qkv_id == 1) {
      k_buf[target] = val;
    } else {
      v_buf[target] = val;
    }
  }
}

// u8 = clamp(round((x - zero) / scale) + 128), N values a thread through Array<T, N>
template <typename T, int N>
__global__ void quant_kv_int8_kernel(uint8_t* __restrict__ dst, const T* __restrict__ src,
                                     const float* __restrict__ scale, const float* __restrict__ zero,
                                     const int num_tokens, const int num_heads, const int head_dim) {
  const int64_t vec_idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t total_vecs = (int64_t)num_tokens * num_heads * head_dim / N;
  if (vec_idx >= total_vecs) return;
  const int head = (vec_idx * N / head_dim) % num_heads;
  const float inv_scale = 1.f / scale[head];
  const float zp = zero[head];
  Array<T, N> in;
  Array<uint8_t, N> out;
#pragma unroll
  for (int i = 0; i < N; ++i) in[i] = src[vec_idx * N + i];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float q = __float2int_rn((static_cast<float>(in[i]) - zp) * inv_scale) + 128.f;
    out[i] = static_cast<uint8_t>(fminf(fmaxf(q, 0.f), 255.f));
  }
#pragma unroll
  for (int i = 0; i < N; ++i) dst[vec_idx * N + i] = out[i];
}

// rows of a vocab-parallel embedding table: ids outside [vocab_start, vocab_end) give zeros
template <typename T>
__global__ void embedding_lookup_vocab_parallel_kernel(T* __restrict__ output,
                                                       const int64_t* __restrict__ input_ids,
                                                       const T* __restrict__ weight,
                                                       const int64_t num_tokens, const int hidden,
                                                       const int64_t vocab_start,
                                                       const int64_t vocab_end) {
  for (int64_t index = blockIdx.x * blockDim.x + threadIdx.x; index < num_tokens * hidden;
       index += (int64_t)blockDim.x * gridDim.x) {
    const int64_t word_index = index / hidden;
    const int col_index = index % hidden;
    const int64_t id = input_ids[word_index];
    const bool in_range = id >= vocab_start && id < vocab_end;
    output[index] = in_range ? __ldg(&weight[(id - vocab_start) * hidden + col_index]) : T(0.f);
  }
}

// the hidden state of each sequence's last token, sequences packed by cumulative lengths
template <typename T>
__global__ void lookup_last_token_hidden_kernel(T* __restrict__ out, const T* __restrict__ hidden_states,
                                                const int* __restrict__ cu_seqlens, const int hidden) {
  const int b = blockIdx.x;
  const int last = cu_seqlens[b + 1] - 1;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[(size_t)b * hidden + i] = hidden_states[(size_t)last * hidden + i];
  }
}

// softmax(logits + bias) over the real vocab; padded columns get 0; a finished beam puts
// all its mass on its end id
template <typename T>
__global__ void addBiasSoftMax(T* logits, const T* bias, const int* end_ids, const bool* finished,
                               const int vocab_size, const int vocab_size_padded) {
  const int bid = blockIdx.x;
  const bool finish = finished != nullptr ? finished[bid] : false;
  const int offset = bid * vocab_size_padded;
  float max_val = -1 * FLT_MAX;
  const bool IS_FP16 = sizeof(T) == 2;
  const T MAX_T_VAL = (IS_FP16) ? (T)65504.f : (T)FLT_MAX;
  __shared__ float s_max_val;
  __shared__ float s_sum_val;

  for (int tid = threadIdx.x; tid < vocab_size_padded; tid += blockDim.x) {
    if (tid < vocab_size) {
      if (finish) {
        logits[offset + tid] = (tid == end_ids[bid]) ? MAX_T_VAL : -MAX_T_VAL;
      } else {
        T bias_val = (bias != nullptr) ? bias[tid] : (T)0.0f;
        logits[offset + tid] += bias_val;
      }
    } else {
      logits[offset + tid] = -MAX_T_VAL;
    }
    max_val = max(max_val, (float)logits[offset + tid]);
  }

  max_val = blockReduceMax<float>((float)max_val);
  if (threadIdx.x == 0) s_max_val = max_val;
  __syncthreads();

  float sum_val = 0.0f;
  for (int tid = threadIdx.x; tid < vocab_size_padded; tid += blockDim.x) {
    logits[offset + tid] = __expf((float)logits[offset + tid] - s_max_val);
    sum_val += (float)logits[offset + tid];
  }

  sum_val = blockReduceSum<float>(sum_val);
  if (threadIdx.x == 0) s_sum_val = sum_val;
  __syncthreads();

  for (int tid = threadIdx.x; tid < vocab_size_padded; tid += blockDim.x) {
    logits[offset + tid] = ((float)logits[offset + tid] / (s_sum_val + 1e-6f));
  }
}

// logits = cap * tanh(logits / cap) / temperature[row], four at a time
__global__ void softcap_temperature_f4_kernel(float* __restrict__ logits,
                                              const float* __restrict__ temperatures,
                                              const float cap, const int vocab) {
  const int row = blockIdx.y;
  float4* row4 = reinterpret_cast<float4*>(logits + (size_t)row * vocab);
  const float inv_t = 1.0f / temperatures[row];
  const float inv_cap = 1.0f / cap;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab / 4; i += blockDim.x * gridDim.x) {
    float4 v = row4[i];
    v.x = cap * tanhf(v.x * inv_cap) * inv_t;
    v.y = cap * tanhf(v.y * inv_cap) * inv_t;
    v.z = cap * tanhf(v.z * inv_cap) * inv_t;
    v.w = cap * tanhf(v.w * inv_cap) * inv_t;
    row4[i] = v;
  }
}

// ---- host launchers, as the engines' invoke* functions are written ----
template <typename T>
void invokeAddFusedQKVBiasTranspose(T* q_buf, T* k_buf, T* v_buf, const T* QKV, const T* qkv_bias,
                                    const int batch_size, const int seq_len, const int head_num,
                                    const int size_per_head, cudaStream_t stream) {
  const int m = batch_size * seq_len;
  const int n = head_num * size_per_head;
  dim3 block(384);
  dim3 grid((int)(ceil(1.0 * m * n / 384)));
  add_fusedQKV_bias_transpose_kernel<T><<<grid, block, 0, stream>>>(
      q_buf, k_buf, v_buf, QKV, qkv_bias, batch_size, seq_len, head_num, size_per_head);
}

template <typename T>
void invokeQuantKvInt8(uint8_t* dst, const T* src, const float* scale, const float* zero,
                       int num_tokens, int num_heads, int head_dim, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t vecs = (int64_t)num_tokens * num_heads * head_dim / kVec;
  quant_kv_int8_kernel<T, kVec><<<(vecs + 255) / 256, 256, 0, stream>>>(
      dst, src, scale, zero, num_tokens, num_heads, head_dim);
}

template void invokeAddFusedQKVBiasTranspose<half>(half*, half*, half*, const half*, const half*, const int, const int, const int, const int, cudaStream_t);
template void invokeQuantKvInt8<half>(uint8_t*, const half*, const float*, const float*, int, int, int, cudaStream_t);
template __global__ void embedding_lookup_vocab_parallel_kernel<__nv_bfloat16>(__nv_bfloat16*, const int64_t*, const __nv_bfloat16*, const int64_t, const int, const int64_t, const int64_t);
template __global__ void lookup_last_token_hidden_kernel<float>(float*, const float*, const int*, const int);
template __global__ void addBiasSoftMax<float>(float*, const float*, const int*, const bool*, const int, const int);

}  // namespace kernels
}  // namespace tensorrt_llm
