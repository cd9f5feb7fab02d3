// Warp- and shared-memory idioms of older and newer engines (written for this probe): a
// FasterTransformer-style block sum over half2 with __shfl_xor_sync on half2 values, a block
// argmax through a 64-bit atomicMax on packed (ordered value, inverted index) keys, a top-1
// per row with values and indices in one dynamic shared buffer of mixed types and pointers
// advanced in loops, the pre-Volta warp-synchronous tail over volatile shared memory, and a
// struct of arrays copied by value and updated through a reference parameter.
#include <cuda_fp16.h>
#include <stdint.h>
#include <type_traits>

#define FINAL_MASK 0xffffffff

__inline__ __device__ half2 warpReduceSumH2(half2 val) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) val = __hadd2(val, __shfl_xor_sync(FINAL_MASK, val, mask, 32));
  return val;
}

__inline__ __device__ half2 blockReduceSumH2(half2 val) {
  static __shared__ half2 shared[32];
  const int lane = threadIdx.x & 0x1f;
  const int wid = threadIdx.x >> 5;
  val = warpReduceSumH2(val);
  if (lane == 0) shared[wid] = val;
  __syncthreads();
  val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : __float2half2_rn(0.f);
  val = warpReduceSumH2(val);
  return val;
}

// out[row] = (sum of even columns, sum of odd columns) in half2 arithmetic
__global__ void row_sum_half2_kernel(const half2* __restrict__ x, half2* __restrict__ out, const int n2) {
  half2 acc = __float2half2_rn(0.f);
  for (int i = threadIdx.x; i < n2; i += blockDim.x) acc = __hadd2(acc, x[blockIdx.x * n2 + i]);
  acc = blockReduceSumH2(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

__device__ __forceinline__ uint32_t ordered_bits(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// argmax of each row via one 64-bit key: (ordered value << 32) | ~index, so ties go to the lower index
__global__ void argmax_packed_u64_kernel(const float* __restrict__ logits, int* __restrict__ out_idx,
                                         unsigned long long* __restrict__ out_key, const int vocab) {
  __shared__ unsigned long long best;
  if (threadIdx.x == 0) best = 0ull;
  __syncthreads();
  const float* row = logits + (size_t)blockIdx.x * vocab;
  unsigned long long local = 0ull;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const unsigned long long key = (static_cast<unsigned long long>(ordered_bits(row[i])) << 32) |
                                   static_cast<uint32_t>(~static_cast<uint32_t>(i));
    local = key > local ? key : local;
  }
  atomicMax(&best, local);
  __syncthreads();
  if (threadIdx.x == 0) {
    out_key[blockIdx.x] = best;
    out_idx[blockIdx.x] = static_cast<int>(~static_cast<uint32_t>(best & 0xffffffffull));
  }
}

// per row: the largest value and its index, block tree over values and indices kept side by
// side in one dynamic shared buffer; the row walked by an advancing pointer
__global__ void top1_smem_mixed_kernel(const float* __restrict__ x, float* __restrict__ top_val,
                                       int* __restrict__ top_idx, const int n) {
  extern __shared__ char smem_raw[];
  float* s_val = reinterpret_cast<float*>(smem_raw);
  int* s_idx = reinterpret_cast<int*>(smem_raw + blockDim.x * sizeof(float));
  const float* p = x + (size_t)blockIdx.x * n + threadIdx.x;
  float best = -INFINITY;
  int best_i = -1;
  for (int i = threadIdx.x; i < n; i += blockDim.x, p += blockDim.x) {
    const float v = *p;
    if (v > best) {
      best = v;
      best_i = i;
    }
  }
  s_val[threadIdx.x] = best;
  s_idx[threadIdx.x] = best_i;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = s_val[threadIdx.x + s];
      const int oi = s_idx[threadIdx.x + s];
      if (ov > s_val[threadIdx.x] || (ov == s_val[threadIdx.x] && oi < s_idx[threadIdx.x])) {
        s_val[threadIdx.x] = ov;
        s_idx[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    top_val[blockIdx.x] = s_val[0];
    top_idx[blockIdx.x] = s_idx[0];
  }
}

// the warp-synchronous tail of old reductions: no barrier below 64, volatile shared memory
template <unsigned int blockSize>
__device__ void warpReduce(volatile float* sdata, unsigned int tid) {
  if (blockSize >= 64) sdata[tid] += sdata[tid + 32];
  if (blockSize >= 32) sdata[tid] += sdata[tid + 16];
  if (blockSize >= 16) sdata[tid] += sdata[tid + 8];
  if (blockSize >= 8) sdata[tid] += sdata[tid + 4];
  if (blockSize >= 4) sdata[tid] += sdata[tid + 2];
  if (blockSize >= 2) sdata[tid] += sdata[tid + 1];
}

template <unsigned int blockSize>
__global__ void sum_sq_volatile_kernel(const float* __restrict__ x, float* __restrict__ out, const int n) {
  __shared__ float sdata[blockSize];
  const unsigned int tid = threadIdx.x;
  float s = 0.f;
  for (int i = tid; i < n; i += blockSize) {
    const float v = x[blockIdx.x * n + i];
    s += v * v;
  }
  sdata[tid] = s;
  __syncthreads();
  if (blockSize >= 256) {
    if (tid < 128) sdata[tid] += sdata[tid + 128];
    __syncthreads();
  }
  if (blockSize >= 128) {
    if (tid < 64) sdata[tid] += sdata[tid + 64];
    __syncthreads();
  }
  if (tid < 32) warpReduce<blockSize>(sdata, tid);
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

// running (max, sum) of a softmax over chunks: the state copied by value, merged through a
// reference, the copy kept as the previous state
struct SoftmaxState {
  float m[2];
  float s[2];
};

__device__ __forceinline__ void update_state(SoftmaxState& st, const float* v, int j) {
  const float m_new = fmaxf(st.m[j], v[j]);
  st.s[j] = st.s[j] * __expf(st.m[j] - m_new) + __expf(v[j] - m_new);
  st.m[j] = m_new;
}

__global__ void softmax_state_copy_kernel(const float2* __restrict__ x, float* __restrict__ lse,
                                          float* __restrict__ prev_lse, const int n) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  SoftmaxState st;
  st.m[0] = st.m[1] = -INFINITY;
  st.s[0] = st.s[1] = 0.f;
  SoftmaxState before_last = st;
  for (int i = 0; i < n; ++i) {
    const float2 v2 = x[row * n + i];
    const float v[2] = {v2.x, v2.y};
    if (i == n - 1) before_last = st;
    update_state(st, v, 0);
    update_state(st, v, 1);
  }
  lse[2 * row + 0] = st.m[0] + logf(st.s[0]);
  lse[2 * row + 1] = st.m[1] + logf(st.s[1]);
  prev_lse[2 * row + 0] = before_last.m[0] + logf(before_last.s[0]);
  prev_lse[2 * row + 1] = before_last.m[1] + logf(before_last.s[1]);
}


// the sampled token's log-probability and rank (1 + how many logits beat it), as samplers
// report them; the accumulator type chosen from the element type
template <typename scalar_t, int BLOCK>
__global__ void sampled_logprob_rank_kernel(const scalar_t* __restrict__ logits,
                                            const int64_t* __restrict__ sampled,
                                            float* __restrict__ logprob, int* __restrict__ rank,
                                            const int vocab) {
  using acc_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
  __shared__ acc_t s_red[BLOCK];
  __shared__ int s_cnt[BLOCK];
  const scalar_t* row = logits + (size_t)blockIdx.x * vocab;
  const scalar_t tok = row[sampled[blockIdx.x]];

  acc_t m = -INFINITY;
  int beats = 0;
  for (int i = threadIdx.x; i < vocab; i += BLOCK) {
    m = max(m, static_cast<acc_t>(row[i]));
    bool gt;
    if constexpr (std::is_same_v<scalar_t, __half>) gt = __hgt(row[i], tok);
    else gt = row[i] > tok;
    beats += gt;
  }
  s_red[threadIdx.x] = m;
  s_cnt[threadIdx.x] = beats;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s_red[threadIdx.x] = max(s_red[threadIdx.x], s_red[threadIdx.x + s]);
      s_cnt[threadIdx.x] += s_cnt[threadIdx.x + s];
    }
    __syncthreads();
  }
  const acc_t row_max = s_red[0];
  const int total_beats = s_cnt[0];
  __syncthreads();
  acc_t sum = 0;
  for (int i = threadIdx.x; i < vocab; i += BLOCK) sum += exp(static_cast<acc_t>(row[i]) - row_max);
  s_red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) s_red[threadIdx.x] += s_red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    logprob[blockIdx.x] = static_cast<float>(static_cast<acc_t>(tok) - row_max - log(s_red[0]));
    rank[blockIdx.x] = total_beats + 1;
  }
}

template __global__ void sampled_logprob_rank_kernel<__half, 128>(const __half*, const int64_t*, float*, int*, const int);
template __global__ void sum_sq_volatile_kernel<128>(const float*, float*, const int);
