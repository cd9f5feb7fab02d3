// Integer and low-precision semantics as engines lean on them (written for this probe): an
// int8 GEMV over packed words with __dp4a on signed bytes, q4 nibbles made signed with
// __vsubss4, a murmur-style uint32 hash for per-request random numbers, the order-preserving
// float-to-uint key of radix top-k with a shared atomicMax, ballot-based compaction of the
// tokens routed to an expert, sliding-window block arithmetic on negative numbers, and a
// half2 dot product accumulated with __hfma2 as ggml's f16 path does.
#include <cuda_fp16.h>
#include <stdint.h>

// y[r] = sum_c W[r, c] * x[c] (int8, 4 a word) * w_scale[r] * x_scale; one warp per row
__global__ void int8_gemv_dp4a_kernel(const int8_t* __restrict__ W, const int8_t* __restrict__ x,
                                      const float* __restrict__ w_scale, const float x_scale,
                                      float* __restrict__ y, const int rows, const int cols) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int* w4 = reinterpret_cast<const int*>(W + (size_t)row * cols);
  const int* x4 = reinterpret_cast<const int*>(x);
  int acc = 0;
  for (int i = lane; i < cols / 4; i += 32) acc = __dp4a(w4[i], x4[i], acc);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);
  if (lane == 0) y[row] = static_cast<float>(acc) * w_scale[row] * x_scale;
}

// q4: two nibbles a byte, value = nibble - 8; 8 values of a packed word made signed bytes
// with __vsubss4 and multiplied with int8 activations by __dp4a
__global__ void q4_dot_vsub_kernel(const uint32_t* __restrict__ qw, const int* __restrict__ xq,
                                   int* __restrict__ out, const int words_per_row) {
  const int row = blockIdx.x;
  int sum = 0;
  for (int i = threadIdx.x; i < words_per_row; i += blockDim.x) {
    const uint32_t q = qw[row * words_per_row + i];
    const int lo = __vsubss4(q & 0x0F0F0F0F, 0x08080808);
    const int hi = __vsubss4((q >> 4) & 0x0F0F0F0F, 0x08080808);
    sum = __dp4a(lo, xq[2 * i + 0], sum);
    sum = __dp4a(hi, xq[2 * i + 1], sum);
  }
  __shared__ int partial[32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffff, sum, off);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < blockDim.x / 32; ++w) total += partial[w];
    out[row] = total;
  }
}

// per-request uniform numbers in [0, 1): a hash of (seed, row, column)
__device__ __forceinline__ uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

__global__ void hash_uniform_kernel(float* __restrict__ out, uint32_t* __restrict__ raw,
                                    const uint64_t* __restrict__ seeds, const int n) {
  const int row = blockIdx.y;
  const uint64_t seed = seeds[row];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = fmix32(static_cast<uint32_t>(seed) ^ fmix32(static_cast<uint32_t>(seed >> 32) + i * 0x9e3779b9u));
    raw[row * n + i] = h;
    out[row * n + i] = (h >> 8) * (1.0f / 16777216.0f);
  }
}

// radix top-k's key: a float's bits made to order as unsigned ints (negative floats flipped)
__device__ __forceinline__ uint32_t float_to_ordered(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ float ordered_to_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// each row's max through a shared atomicMax on the keys, and how many keys share its top byte
__global__ void row_max_ordered_key_kernel(const float* __restrict__ x, float* __restrict__ row_max,
                                           uint32_t* __restrict__ max_key, int* __restrict__ top_bucket,
                                           const int n) {
  __shared__ uint32_t s_max;
  __shared__ int s_count;
  if (threadIdx.x == 0) {
    s_max = 0u;
    s_count = 0;
  }
  __syncthreads();
  const float* r = x + (size_t)blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicMax(&s_max, float_to_ordered(r[i]));
  __syncthreads();
  const uint32_t top = s_max >> 24;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if ((float_to_ordered(r[i]) >> 24) == top) atomicAdd(&s_count, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    row_max[blockIdx.x] = ordered_to_float(s_max);
    max_key[blockIdx.x] = s_max;
    top_bucket[blockIdx.x] = s_count;
  }
}

// one warp gathers, in order, the positions routed to `expert` (ballot + popc of lower lanes)
__global__ void gather_expert_tokens_kernel(const int* __restrict__ topk_ids, int* __restrict__ positions,
                                            int* __restrict__ counts, const int numel) {
  const int expert = blockIdx.x;
  const int lane = threadIdx.x;
  int base = 0;
  for (int start = 0; start < numel; start += 32) {
    const int i = start + lane;
    const bool hit = i < numel && topk_ids[i] == expert;
    const unsigned mask = __ballot_sync(0xffffffff, hit);
    const int rank = __popc(mask & ((1u << lane) - 1u));
    if (hit) positions[expert * numel + base + rank] = i;
    base += __popc(mask);
  }
  if (lane == 0) counts[expert] = base;
}

// sliding-window attention's first block and offsets, with C's truncating division
__global__ void sliding_window_blocks_kernel(const int* __restrict__ seq_lens, int* __restrict__ first_block,
                                             int* __restrict__ rem, int* __restrict__ shifted,
                                             const int window, const int block_size, const int num_seqs) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= num_seqs) return;
  const int start = seq_lens[s] - window;  // negative for short sequences
  first_block[s] = start / block_size;
  rem[s] = start % block_size;
  shifted[s] = start >> 2;
}

// ggml's f16 dot: half2 products accumulated in half2, summed in float at the end
__global__ void dot_half2_hfma_kernel(const half2* __restrict__ a, const half2* __restrict__ b,
                                      float* __restrict__ out, const int n2) {
  const int row = blockIdx.x;
  half2 acc = __float2half2_rn(0.0f);
  for (int i = threadIdx.x; i < n2; i += 32) acc = __hfma2(a[row * n2 + i], b[i], acc);
  float s = __low2float(acc) + __high2float(acc);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
  if (threadIdx.x == 0) out[row] = s;
}
