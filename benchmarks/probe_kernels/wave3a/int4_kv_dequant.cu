// Low-bit weight and KV-cache dequantization tricks of AWQ / GPTQ / lmdeploy / TensorRT-LLM
// (written for this probe, without inline PTX): int4 nibbles turned into halves by OR-ing them
// under the exponent of 1024 (0x6400) and subtracting it (or scaling by 1/16 and subtracting
// 64 for the high nibbles), u8 KV values spread into halves with __byte_perm, a scatter-add of
// expert outputs with atomicAdd on __half2, an absmax through an atomicCAS loop on float
// bits, and per-expert counts with the sm_80 warp reduction __reduce_add_sync.
#include <cuda_fp16.h>
#include <stdint.h>

// eight 4-bit values (packed in AWQ's interleaved order 0 2 4 6 1 3 5 7) to four half2 pairs
__device__ __forceinline__ void dequantize_s4_to_fp16x2(uint32_t source, half2* result) {
  uint32_t h[4];
  static constexpr uint32_t BOTTOM_MASK = 0x000f000f;
  static constexpr uint32_t TOP_MASK = 0x00f000f0;
  static constexpr uint32_t I4s_TO_F16s_MAGIC_NUM = 0x64006400;
  const uint32_t top_i4s = source >> 8;
  h[0] = (source & BOTTOM_MASK) | I4s_TO_F16s_MAGIC_NUM;
  h[1] = (source & TOP_MASK) | I4s_TO_F16s_MAGIC_NUM;
  h[2] = (top_i4s & BOTTOM_MASK) | I4s_TO_F16s_MAGIC_NUM;
  h[3] = (top_i4s & TOP_MASK) | I4s_TO_F16s_MAGIC_NUM;
  const half2* hv = reinterpret_cast<const half2*>(h);
  const half2 fp16_top_magic = __halves2half2(__ushort_as_half(0x6400), __ushort_as_half(0x6400));  // 1024
  const half2 one_sixteenth = __halves2half2(__ushort_as_half(0x2c00), __ushort_as_half(0x2c00));   // 1/16
  const half2 neg_64 = __halves2half2(__ushort_as_half(0xd400), __ushort_as_half(0xd400));          // -64
  result[0] = __hsub2(hv[0], fp16_top_magic);
  result[1] = __hfma2(hv[1], one_sixteenth, neg_64);
  result[2] = __hsub2(hv[2], fp16_top_magic);
  result[3] = __hfma2(hv[3], one_sixteenth, neg_64);
}

// w[k, n] = (q[k, n] - z[k / G, n]) * s[k / G, n]; one thread per packed int32 (8 columns)
template <int GROUP_SIZE>
__global__ void awq_dequantize_kernel(const int* __restrict__ qweight, const half* __restrict__ scales,
                                      const int* __restrict__ qzeros, half* __restrict__ out,
                                      const int K, const int N8) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int k = blockIdx.y * blockDim.y + threadIdx.y;
  if (j >= N8 || k >= K) return;
  const int g = k / GROUP_SIZE;
  half2 w[4], z[4];
  dequantize_s4_to_fp16x2(static_cast<uint32_t>(qweight[k * N8 + j]), w);
  dequantize_s4_to_fp16x2(static_cast<uint32_t>(qzeros[g * N8 + j]), z);
  const half2* s2 = reinterpret_cast<const half2*>(scales + ((size_t)g * N8 + j) * 8);
  half2* o2 = reinterpret_cast<half2*>(out + ((size_t)k * N8 + j) * 8);
#pragma unroll
  for (int i = 0; i < 4; ++i) o2[i] = __hmul2(__hsub2(w[i], z[i]), s2[i]);
}

// four u8 KV values to two half2 with __byte_perm and 1024's exponent; x = (u - 128) * s + zp
__device__ __forceinline__ void u8x4_to_half2x2(uint32_t q, half2* out) {
  uint32_t h[2];
  h[0] = __byte_perm(q, 0x64646464u, 0x7150);
  h[1] = __byte_perm(q, 0x64646464u, 0x7352);
  const half2 magic = __float2half2_rn(1024.f + 128.f);
  out[0] = __hsub2(reinterpret_cast<const half2*>(h)[0], magic);
  out[1] = __hsub2(reinterpret_cast<const half2*>(h)[1], magic);
}

__global__ void dequant_kv_u8_kernel(const uint32_t* __restrict__ cache, half* __restrict__ out,
                                     const float* __restrict__ scale, const float* __restrict__ zero,
                                     const int num_heads, const int head_dim, const int n_words) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_words) return;
  const int head = (i * 4 / head_dim) % num_heads;
  const half2 s2 = __float2half2_rn(scale[head]);
  const half2 z2 = __float2half2_rn(zero[head]);
  half2 v[2];
  u8x4_to_half2x2(cache[i], v);
  half2* o = reinterpret_cast<half2*>(out) + 2 * i;
  o[0] = __hfma2(v[0], s2, z2);
  o[1] = __hfma2(v[1], s2, z2);
}

// out[token, :] += weight * expert_out[row, :] for every routed row, two halves an atomic
__global__ void moe_scatter_add_half2_kernel(half* __restrict__ out, const half* __restrict__ expert_out,
                                             const int* __restrict__ row_to_token,
                                             const float* __restrict__ row_weight, const int hidden) {
  const int row = blockIdx.x;
  const int token = row_to_token[row];
  const half2 w = __float2half2_rn(row_weight[row]);
  const half2* src = reinterpret_cast<const half2*>(expert_out + (size_t)row * hidden);
  half2* dst = reinterpret_cast<half2*>(out + (size_t)token * hidden);
  for (int i = threadIdx.x; i < hidden / 2; i += blockDim.x) atomicAdd(&dst[i], __hmul2(src[i], w));
}

// the tensor's absmax by a compare-and-swap loop on the float's bits
__device__ __forceinline__ void atomic_max_float_cas(float* addr, float value) {
  int* addr_as_int = reinterpret_cast<int*>(addr);
  int old = *addr_as_int;
  int assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= value) break;
    old = atomicCAS(addr_as_int, assumed, __float_as_int(value));
  } while (assumed != old);
}

__global__ void absmax_cas_kernel(const float* __restrict__ x, float* __restrict__ amax, const int n) {
  float m = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) m = fmaxf(m, fabsf(x[i]));
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, off));
  if ((threadIdx.x & 31) == 0) atomic_max_float_cas(amax, m);
}

// tokens routed to each expert: a warp vote per expert and __reduce_add_sync over the warp
__global__ void expert_histogram_reduce_sync_kernel(const int* __restrict__ topk_ids, int* __restrict__ counts,
                                                    const int numel, const int num_experts) {
  const int lane = threadIdx.x & 31;
  for (int e = 0; e < num_experts; ++e) {
    unsigned total = 0;
    for (int base = blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < numel; base += gridDim.x * blockDim.x) {
      const int i = base + lane;
      const unsigned hit = (i < numel && topk_ids[i] == e) ? 1u : 0u;
      total += __reduce_add_sync(0xffffffff, hit);
    }
    if (lane == 0 && total) atomicAdd(&counts[e], static_cast<int>(total));
  }
}

template __global__ void awq_dequantize_kernel<32>(const int*, const half*, const int*, half*, const int, const int);
