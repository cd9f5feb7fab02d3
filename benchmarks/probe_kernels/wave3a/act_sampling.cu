// Activations and sampling helpers of serving engines (written for this probe, in the style
// of vLLM, SGLang and FlashInfer): silu-and-mul on packed __nv_bfloat162 pairs with a scalar
// tail, act-and-mul through a function-object template parameter, FATReLU-and-mul, a block
// argmax with cub::KeyValuePair / cub::ArgMax, a warp argmax over (value, index) pairs,
// repetition / frequency / presence penalties, top-k masking of logits by a pivot search with
// CUB block reductions, min-p renormalization, and inverse-CDF sampling with cub::BlockScan.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cub/cub.cuh>
#include <cuda/std/limits>
#include <stdint.h>
#include <climits>

namespace act {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

// out[t, :d] = silu(x[t, :d]) * x[t, d:2d], two bf16 a load where d allows
__global__ void silu_and_mul_bf16x2_kernel(__nv_bfloat16* __restrict__ out,
                                           const __nv_bfloat16* __restrict__ input, const int d) {
  const int64_t token_idx = blockIdx.x;
  const __nv_bfloat16* x = input + token_idx * 2 * d;
  const __nv_bfloat16* y = x + d;
  __nv_bfloat16* o = out + token_idx * d;
  const int d2 = d / 2;
  const bool aligned = (d % 2) == 0;
  if (aligned) {
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(x);
    const __nv_bfloat162* y2 = reinterpret_cast<const __nv_bfloat162*>(y);
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(o);
    for (int i = threadIdx.x; i < d2; i += blockDim.x) {
      const float2 xf = __bfloat1622float2(x2[i]);
      const float2 yf = __bfloat1622float2(y2[i]);
      o2[i] = __floats2bfloat162_rn(silu(xf.x) * yf.x, silu(xf.y) * yf.y);
    }
  } else {
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      o[i] = __float2bfloat16(silu(__bfloat162float(x[i])) * __bfloat162float(y[i]));
    }
  }
}

struct GeluTanh {
  __device__ __forceinline__ float operator()(float x) const {
    const float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    const float kKappa = 0.044715f;
    const float inner = kBeta * (x + kKappa * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
  }
};

struct GeluErf {
  __device__ __forceinline__ float operator()(float x) const {
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865475f));
  }
};

// act first: out = act(x) * y; else out = x * act(y)
template <typename scalar_t, typename Act, bool act_first>
__global__ void act_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                                   const int d) {
  const int64_t token_idx = blockIdx.x;
  Act act;
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const float x = static_cast<float>(__ldg(&input[token_idx * 2 * d + idx]));
    const float y = static_cast<float>(__ldg(&input[token_idx * 2 * d + d + idx]));
    out[token_idx * d + idx] = static_cast<scalar_t>(act_first ? act(x) * y : x * act(y));
  }
}

// FATReLU: x if x > threshold else 0, times the gate
template <typename scalar_t>
__global__ void fatrelu_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                                       const int d, const float threshold) {
  const int64_t token_idx = blockIdx.x;
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const scalar_t x = input[token_idx * 2 * d + idx];
    const scalar_t y = input[token_idx * 2 * d + d + idx];
    const float f = (float)x;
    const scalar_t a = f > threshold ? x : (scalar_t)0.0f;
    out[token_idx * d + idx] = a * y;
  }
}

}  // namespace act

namespace sampling {

// argmax of each row: a (index, value) pair per thread, reduced with cub::ArgMax
template <int BLOCK_THREADS>
__global__ void argmax_kernel(const float* __restrict__ logits, int64_t* __restrict__ out_ids,
                              float* __restrict__ out_vals, const int vocab_size) {
  using KVP = cub::KeyValuePair<int, float>;
  using BlockReduce = cub::BlockReduce<KVP, BLOCK_THREADS>;
  __shared__ typename BlockReduce::TempStorage temp_storage;
  const float* row = logits + (int64_t)blockIdx.x * vocab_size;
  KVP best(-1, -cuda::std::numeric_limits<float>::infinity());
  for (int i = threadIdx.x; i < vocab_size; i += BLOCK_THREADS) {
    const float v = row[i];
    if (v > best.value) {
      best.key = i;
      best.value = v;
    }
  }
  const KVP total = BlockReduce(temp_storage).Reduce(best, cub::ArgMax());
  if (threadIdx.x == 0) {
    out_ids[blockIdx.x] = total.key;
    out_vals[blockIdx.x] = total.value;
  }
}

// one warp per row; ties go to the lower index
__global__ void greedy_argmax_warp_kernel(const __half* __restrict__ logits, int* __restrict__ ids,
                                          const int rows, const int vocab) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  float best = -INFINITY;
  int best_idx = 0x7fffffff;
  for (int i = lane; i < vocab; i += 32) {
    const float v = __half2float(logits[(size_t)row * vocab + i]);
    if (v > best) {
      best = v;
      best_idx = i;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_down_sync(0xffffffff, best, offset);
    const int oi = __shfl_down_sync(0xffffffff, best_idx, offset);
    if (ov > best || (ov == best && oi < best_idx)) {
      best = ov;
      best_idx = oi;
    }
  }
  if (lane == 0) ids[row] = best_idx;
}

// logits[r, v] with penalties from the output token counts of row r:
// repetition (divide positive / multiply negative), frequency (count), presence (seen)
template <typename scalar_t>
__global__ void apply_penalties_kernel(scalar_t* __restrict__ logits,
                                       const int32_t* __restrict__ output_bin_counts,
                                       const bool* __restrict__ prompt_mask,
                                       const float* __restrict__ repetition_penalties,
                                       const float* __restrict__ frequency_penalties,
                                       const float* __restrict__ presence_penalties,
                                       const int num_seqs, const int vocab_size) {
  const int seq = blockIdx.y;
  const int tok = blockIdx.x * blockDim.x + threadIdx.x;
  if (tok >= vocab_size) return;
  const int64_t idx = (int64_t)seq * vocab_size + tok;
  float logit = static_cast<float>(logits[idx]);
  const int count = output_bin_counts[idx];
  const bool seen = count > 0 || prompt_mask[idx];
  if (seen) {
    const float rep = repetition_penalties[seq];
    logit = logit > 0 ? logit / rep : logit * rep;
  }
  logit -= frequency_penalties[seq] * static_cast<float>(count);
  logit -= presence_penalties[seq] * static_cast<float>(count > 0);
  logits[idx] = static_cast<scalar_t>(logit);
}

// Keep the top k logits of each row, -inf elsewhere: the pivot found by bisection between the
// row's min and max, counting the logits at or above it with a block reduction.
template <int BLOCK_THREADS>
__global__ void top_k_mask_logits_kernel(const float* __restrict__ logits,
                                         float* __restrict__ masked_logits,
                                         const int* __restrict__ top_k_arr, const int top_k_val,
                                         const int d, const int num_iters) {
  const int row = blockIdx.x;
  const int k = top_k_arr == nullptr ? top_k_val : top_k_arr[row];
  const float* in = logits + (size_t)row * d;
  float* out = masked_logits + (size_t)row * d;

  typedef cub::BlockReduce<float, BLOCK_THREADS> BlockReduceF;
  typedef cub::BlockReduce<int, BLOCK_THREADS> BlockReduceI;
  __shared__ typename BlockReduceF::TempStorage red_f;
  __shared__ typename BlockReduceI::TempStorage red_i;
  __shared__ float s_lo, s_hi;

  float lmax = -INFINITY, lmin = INFINITY;
  for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) {
    lmax = fmaxf(lmax, in[i]);
    lmin = fminf(lmin, in[i]);
  }
  const float row_max = BlockReduceF(red_f).Reduce(lmax, cuda::maximum<>{});
  __syncthreads();
  const float row_min = BlockReduceF(red_f).Reduce(lmin, cuda::minimum<>{});
  if (threadIdx.x == 0) {
    s_lo = row_min;
    s_hi = row_max;
  }
  __syncthreads();

  if (k < d) {
    for (int it = 0; it < num_iters; ++it) {
      const float lo = s_lo, hi = s_hi;
      const float mid = (lo + hi) * 0.5f;
      int cnt = 0;
      for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) cnt += in[i] >= mid;
      const int total = BlockReduceI(red_i).Sum(cnt);
      __syncthreads();
      if (threadIdx.x == 0) {
        if (total >= k) s_lo = mid;
        else s_hi = mid;
      }
      __syncthreads();
    }
  }
  const float pivot = k < d ? s_lo : -INFINITY;
  for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) out[i] = in[i] >= pivot ? in[i] : -INFINITY;
}

// min-p: drop probabilities below min_p * max, renormalize the rest
template <int BLOCK_THREADS>
__global__ void min_p_renorm_kernel(const float* __restrict__ probs, float* __restrict__ out,
                                    const float* __restrict__ min_p_arr, const int d) {
  using BlockReduce = cub::BlockReduce<float, BLOCK_THREADS>;
  __shared__ typename BlockReduce::TempStorage storage;
  __shared__ float s_thresh, s_sum;
  const float* p = probs + (size_t)blockIdx.x * d;
  float m = 0.f;
  for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) m = max(m, p[i]);
  m = BlockReduce(storage).Reduce(m, cuda::maximum<>());
  if (threadIdx.x == 0) s_thresh = m * min_p_arr[blockIdx.x];
  __syncthreads();
  const float thresh = s_thresh;
  float s = 0.f;
  for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) s += p[i] >= thresh ? p[i] : 0.f;
  s = BlockReduce(storage).Sum(s);
  if (threadIdx.x == 0) s_sum = s;
  __syncthreads();
  const float inv = 1.f / s_sum;
  for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) {
    out[(size_t)blockIdx.x * d + i] = p[i] >= thresh ? p[i] * inv : 0.f;
  }
}

// Inverse-CDF sampling: the first index whose running sum of probabilities exceeds u * total.
// BLOCK_THREADS * ITEMS consecutive values a round; a thread's items scanned locally, the
// threads' totals by cub::BlockScan; the smallest index found by a min reduction. The CUB
// collectives share one union of storage, as FlashInfer's sampling kernels do.
template <int BLOCK_THREADS, int ITEMS>
__global__ void sampling_from_probs_kernel(const float* __restrict__ probs,
                                           const float* __restrict__ uniform_samples,
                                           int* __restrict__ output, const int d) {
  using BlockScan = cub::BlockScan<float, BLOCK_THREADS>;
  using BlockReduceF = cub::BlockReduce<float, BLOCK_THREADS>;
  using BlockReduceI = cub::BlockReduce<int, BLOCK_THREADS>;
  struct SamplingTempStorage {
    union {
      typename BlockScan::TempStorage scan;
      typename BlockReduceF::TempStorage reduce_f;
      typename BlockReduceI::TempStorage reduce_i;
    } block_prim;
    float total;
    int last_found;
  };
  __shared__ SamplingTempStorage temp_storage;
  const float* p = probs + (size_t)blockIdx.x * d;

  float local = 0.f;
  for (int i = threadIdx.x; i < d; i += BLOCK_THREADS) local += p[i];
  const float total = BlockReduceF(temp_storage.block_prim.reduce_f).Sum(local);
  if (threadIdx.x == 0) temp_storage.total = total;
  __syncthreads();
  const float u = uniform_samples[blockIdx.x] * temp_storage.total;

  int sampled_id = d - 1;
  float aggregate = 0.f;
  for (int base = 0; base < d; base += BLOCK_THREADS * ITEMS) {
    float items[ITEMS];
    float thread_sum = 0.f;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int i = base + threadIdx.x * ITEMS + j;
      items[j] = i < d ? p[i] : 0.f;
      thread_sum += items[j];
    }
    float prefix, round_total;
    BlockScan(temp_storage.block_prim.scan).ExclusiveSum(thread_sum, prefix, round_total);
    __syncthreads();
    int found = INT_MAX;
    float run = aggregate + prefix;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      run += items[j];
      const int i = base + threadIdx.x * ITEMS + j;
      if (i < d && run > u && found == INT_MAX) found = i;
    }
    const int first = BlockReduceI(temp_storage.block_prim.reduce_i).Reduce(found, cuda::minimum<>());
    if (threadIdx.x == 0) temp_storage.last_found = first;
    __syncthreads();
    if (temp_storage.last_found != INT_MAX) {
      sampled_id = temp_storage.last_found;
      break;
    }
    aggregate += round_total;
  }
  if (threadIdx.x == 0) output[blockIdx.x] = sampled_id;
}

}  // namespace sampling

namespace act {
template __global__ void act_and_mul_kernel<__half, GeluTanh, true>(__half*, const __half*, const int);
template __global__ void fatrelu_and_mul_kernel<__half>(__half*, const __half*, const int, const float);
}  // namespace act
namespace sampling {
template __global__ void argmax_kernel<128>(const float*, int64_t*, float*, const int);
template __global__ void apply_penalties_kernel<float>(float*, const int32_t*, const bool*, const float*, const float*, const float*, const int, const int);
template __global__ void top_k_mask_logits_kernel<128>(const float*, float*, const int*, const int, const int, const int);
template __global__ void min_p_renorm_kernel<128>(const float*, float*, const float*, const int);
template __global__ void sampling_from_probs_kernel<64, 4>(const float*, const float*, int*, const int);
}  // namespace sampling
