// MoE routing kernels in the style of vLLM / SGLang / TensorRT-LLM (written for this probe):
// a warp-per-token top-k gating softmax over experts with AlignedArray loads and butterfly
// (value, expert) reductions; a block-size alignment of routed tokens counted per thread in
// dynamic shared memory; the same counts with shared atomics and a cub::BlockScan; an
// expand / finalize pair over expanded rows with int4 copies; a sum over the top-k outputs.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cub/cub.cuh>
#include <stdint.h>

#define WARP_SIZE 32
#define CEILDIV(x, y) (((x) + (y) - 1) / (y))

namespace moe {

template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedArray {
  T data[N];
};

// One row of THREADS_PER_ROW lanes per token; VPT experts per lane, read in one 16-byte load.
template <int VPT, int NUM_EXPERTS, int WARPS_PER_CTA, int BYTES_PER_LDG>
__launch_bounds__(WARPS_PER_CTA* WARP_SIZE) __global__
    void topk_gating_softmax(const float* __restrict__ input, const bool* __restrict__ finished,
                             float* __restrict__ output, const int num_rows,
                             int* __restrict__ indices, int* __restrict__ source_rows, const int k,
                             const int start_expert, const int end_expert) {
  static constexpr int ELTS_PER_LDG = BYTES_PER_LDG / sizeof(float);
  static constexpr int ELTS_PER_ROW = NUM_EXPERTS;
  static constexpr int THREADS_PER_ROW = ELTS_PER_ROW / VPT;
  static constexpr int LDG_PER_THREAD = VPT / ELTS_PER_LDG;
  static_assert(VPT % ELTS_PER_LDG == 0, "VPT must be a multiple of the load width");
  static_assert(WARP_SIZE % THREADS_PER_ROW == 0, "rows must not straddle warps");
  static constexpr int ELTS_PER_WARP = WARP_SIZE * VPT;
  static constexpr int ROWS_PER_WARP = ELTS_PER_WARP / ELTS_PER_ROW;
  static constexpr int ROWS_PER_CTA = WARPS_PER_CTA * ROWS_PER_WARP;

  const int cta_base_row = blockIdx.x * ROWS_PER_CTA;
  const int warp_base_row = cta_base_row + threadIdx.y * ROWS_PER_WARP;
  const int thread_row_in_warp = threadIdx.x / THREADS_PER_ROW;
  const int thread_row = warp_base_row + thread_row_in_warp;
  if (thread_row >= num_rows) return;
  const bool row_is_active = finished ? !finished[thread_row] : true;

  const float* thread_row_ptr = input + thread_row * ELTS_PER_ROW;
  const int thread_group_idx = threadIdx.x % THREADS_PER_ROW;
  const int first_elt_read_by_thread = thread_group_idx * ELTS_PER_LDG;
  const float* thread_read_ptr = thread_row_ptr + first_elt_read_by_thread;

  using AccessType = AlignedArray<float, ELTS_PER_LDG>;
  float row_chunk[VPT];
  AccessType* row_chunk_vec_ptr = reinterpret_cast<AccessType*>(&row_chunk);
  const AccessType* vec_thread_read_ptr = reinterpret_cast<const AccessType*>(thread_read_ptr);
#pragma unroll
  for (int ii = 0; ii < LDG_PER_THREAD; ++ii) {
    row_chunk_vec_ptr[ii] = vec_thread_read_ptr[ii * THREADS_PER_ROW];
  }

  // softmax: max, then exp, then sum, each reduced over the row's lanes
  float thread_max = row_chunk[0];
#pragma unroll
  for (int ii = 1; ii < VPT; ++ii) thread_max = max(thread_max, row_chunk[ii]);
#pragma unroll
  for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
    thread_max = max(thread_max, __shfl_xor_sync(0xFFFFFFFF, thread_max, mask, THREADS_PER_ROW));
  }
  float row_sum = 0;
#pragma unroll
  for (int ii = 0; ii < VPT; ++ii) {
    row_chunk[ii] = expf(row_chunk[ii] - thread_max);
    row_sum += row_chunk[ii];
  }
#pragma unroll
  for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
    row_sum += __shfl_xor_sync(0xFFFFFFFF, row_sum, mask, THREADS_PER_ROW);
  }
  const float reciprocal_row_sum = 1.f / row_sum;
#pragma unroll
  for (int ii = 0; ii < VPT; ++ii) row_chunk[ii] = row_chunk[ii] * reciprocal_row_sum;

  // top-k: each round the lanes agree on the largest (lowest expert on ties), its owner clears it
  static constexpr int COLS_PER_GROUP_LDG = ELTS_PER_LDG * THREADS_PER_ROW;
  int start_col = first_elt_read_by_thread;
  for (int k_idx = 0; k_idx < k; ++k_idx) {
    float max_val = row_chunk[0];
    int expert = start_col;
#pragma unroll
    for (int ldg = 0, col = start_col; ldg < LDG_PER_THREAD; ++ldg, col += COLS_PER_GROUP_LDG) {
#pragma unroll
      for (int ii = 0; ii < ELTS_PER_LDG; ++ii) {
        float val = row_chunk[ldg * ELTS_PER_LDG + ii];
        if (val > max_val) {
          max_val = val;
          expert = col + ii;
        }
      }
    }
#pragma unroll
    for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
      float other_max = __shfl_xor_sync(0xFFFFFFFF, max_val, mask, THREADS_PER_ROW);
      int other_expert = __shfl_xor_sync(0xFFFFFFFF, expert, mask, THREADS_PER_ROW);
      if (other_max > max_val || (other_max == max_val && other_expert < expert)) {
        max_val = other_max;
        expert = other_expert;
      }
    }
    if (thread_group_idx == 0) {
      const bool node_uses_expert = expert >= start_expert && expert < end_expert;
      const bool should_process_row = row_is_active && node_uses_expert;
      const int idx = k * thread_row + k_idx;
      output[idx] = max_val;
      indices[idx] = should_process_row ? (expert - start_expert) : NUM_EXPERTS;
      source_rows[k_idx * num_rows + thread_row] = thread_row;
    }
    if (k_idx + 1 < k) {
      const int ldg_group_for_expert = expert / COLS_PER_GROUP_LDG;
      const int thread_to_clear_in_group = (expert / ELTS_PER_LDG) % THREADS_PER_ROW;
      if (thread_group_idx == thread_to_clear_in_group) {
        const int offset_for_expert = expert % ELTS_PER_LDG;
        row_chunk[ldg_group_for_expert * ELTS_PER_LDG + offset_for_expert] = -10000.f;
      }
    }
  }
}

// Routed tokens grouped by expert, each expert's run padded to a multiple of block_size.
// counts is (blockDim.x + 1) x num_experts in dynamic shared memory: row t + 1 holds thread
// t's own counts, turned into per-thread starting ranks by a column prefix sum.
template <typename scalar_t>
__global__ void moe_align_block_size_kernel(const scalar_t* __restrict__ topk_ids,
                                            int32_t* __restrict__ sorted_token_ids,
                                            int32_t* __restrict__ expert_ids,
                                            int32_t* __restrict__ total_tokens_post_pad,
                                            int32_t num_experts, int32_t block_size,
                                            size_t numel, int32_t max_num_tokens_padded) {
  extern __shared__ int32_t smem[];
  int32_t* counts = smem;
  int32_t* cumsum = smem + (blockDim.x + 1) * num_experts;
  const size_t per_thread = CEILDIV(numel, blockDim.x);
  const size_t start = threadIdx.x * per_thread;
  const size_t stop = min(numel, start + per_thread);

  for (int e = 0; e < num_experts; ++e) counts[(threadIdx.x + 1) * num_experts + e] = 0;
  for (size_t i = start; i < stop; ++i) {
    ++counts[(threadIdx.x + 1) * num_experts + static_cast<int>(topk_ids[i])];
  }
  __syncthreads();

  if (threadIdx.x < num_experts) {
    counts[threadIdx.x] = 0;
    for (int t = 1; t <= blockDim.x; ++t) {
      counts[t * num_experts + threadIdx.x] += counts[(t - 1) * num_experts + threadIdx.x];
    }
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    cumsum[0] = 0;
    for (int e = 1; e <= num_experts; ++e) {
      const int n = counts[blockDim.x * num_experts + e - 1];
      cumsum[e] = cumsum[e - 1] + CEILDIV(n, block_size) * block_size;
    }
    *total_tokens_post_pad = cumsum[num_experts];
  }
  __syncthreads();

  // padding slots hold numel, an id no token has
  for (int i = threadIdx.x; i < max_num_tokens_padded; i += blockDim.x) sorted_token_ids[i] = numel;
  __syncthreads();
  if (threadIdx.x < num_experts) {
    for (int i = cumsum[threadIdx.x]; i < cumsum[threadIdx.x + 1]; i += block_size) {
      expert_ids[i / block_size] = threadIdx.x;
    }
  }
  for (size_t i = start; i < stop; ++i) {
    const int32_t e = static_cast<int32_t>(topk_ids[i]);
    const int32_t rank = counts[threadIdx.x * num_experts + e] + cumsum[e];
    sorted_token_ids[rank] = static_cast<int32_t>(i);
    ++counts[threadIdx.x * num_experts + e];
  }
}

// The counting half with shared atomics and the padded offsets from a cub::BlockScan.
template <int BLOCK_THREADS>
__global__ void moe_expert_offsets_cub(const int32_t* __restrict__ topk_ids,
                                       int32_t* __restrict__ expert_offsets,
                                       int32_t* __restrict__ expert_ids,
                                       int32_t* __restrict__ total_tokens_post_pad,
                                       int num_experts, int block_size, int numel) {
  using BlockScan = cub::BlockScan<int32_t, BLOCK_THREADS>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ int32_t shared_counts[BLOCK_THREADS];
  __shared__ int32_t shared_offsets[BLOCK_THREADS + 1];

  shared_counts[threadIdx.x] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < numel; i += BLOCK_THREADS) {
    atomicAdd(&shared_counts[topk_ids[i]], 1);
  }
  __syncthreads();

  int32_t padded = 0;
  if (threadIdx.x < num_experts) padded = CEILDIV(shared_counts[threadIdx.x], block_size) * block_size;
  int32_t offset;
  int32_t total;
  BlockScan(scan_storage).ExclusiveSum(padded, offset, total);
  shared_offsets[threadIdx.x] = offset;
  if (threadIdx.x == 0) shared_offsets[num_experts] = total;
  __syncthreads();

  if (threadIdx.x <= num_experts) expert_offsets[threadIdx.x] = shared_offsets[threadIdx.x];
  if (threadIdx.x == 0) *total_tokens_post_pad = total;
  if (threadIdx.x < num_experts) {
    for (int i = shared_offsets[threadIdx.x]; i < shared_offsets[threadIdx.x + 1]; i += block_size)
      expert_ids[i / block_size] = threadIdx.x;
  }
}

// Each expanded row (token, k) copies its source row, 16 bytes at a time.
template <typename T>
__global__ void expand_input_rows_kernel(const T* __restrict__ unpermuted_input,
                                         T* __restrict__ permuted_output,
                                         const int* __restrict__ expanded_dest_row_to_expanded_source_row,
                                         int* __restrict__ expanded_source_row_to_expanded_dest_row,
                                         const int64_t num_rows, const int64_t cols, const int k) {
  const int64_t expanded_dest_row = blockIdx.x;
  const int64_t expanded_source_row = expanded_dest_row_to_expanded_source_row[expanded_dest_row];
  // the reverse map is optional (a caller that builds it itself passes nullptr)
  if (threadIdx.x == 0 && expanded_source_row_to_expanded_dest_row != nullptr) {
    expanded_source_row_to_expanded_dest_row[expanded_source_row] = static_cast<int>(expanded_dest_row);
  }
  const int64_t source_row = expanded_source_row % num_rows;
  constexpr int ELEM_PER_THREAD = 16 / sizeof(T);
  const int4* source_row_ptr = reinterpret_cast<const int4*>(unpermuted_input + source_row * cols);
  int4* dest_row_ptr = reinterpret_cast<int4*>(permuted_output + expanded_dest_row * cols);
  const int64_t num_elems_in_col = cols / ELEM_PER_THREAD;
  for (int64_t elem_index = threadIdx.x; elem_index < num_elems_in_col; elem_index += blockDim.x) {
    dest_row_ptr[elem_index] = source_row_ptr[elem_index];
  }
}

// out[row] = sum_k scale[row, k] * (expanded[dest(row, k)] + bias[expert(row, k)]), in float
template <typename T, bool HAS_BIAS>
__global__ void finalize_moe_routing_kernel(const T* __restrict__ expanded_permuted_rows,
                                            T* __restrict__ reduced_unpermuted_output,
                                            const T* __restrict__ bias,
                                            const float* __restrict__ scales,
                                            const int* __restrict__ expanded_source_row_to_expanded_dest_row,
                                            const int* __restrict__ expert_for_source_row,
                                            const int cols, const int k, const int num_rows) {
  const int original_row = blockIdx.x;
  T* reduced_row_ptr = reduced_unpermuted_output + original_row * cols;
  for (int tid = threadIdx.x; tid < cols; tid += blockDim.x) {
    float thread_output = 0.f;
    for (int k_idx = 0; k_idx < k; ++k_idx) {
      const int expanded_original_row = original_row + k_idx * num_rows;
      const int expanded_permuted_row = expanded_source_row_to_expanded_dest_row[expanded_original_row];
      const float row_scale = scales[original_row * k + k_idx];
      const T* expanded_permuted_rows_row_ptr = expanded_permuted_rows + expanded_permuted_row * cols;
      float v = static_cast<float>(expanded_permuted_rows_row_ptr[tid]);
      if constexpr (HAS_BIAS) {
        const int expert_idx = expert_for_source_row[original_row * k + k_idx];
        v += static_cast<float>(bias[expert_idx * cols + tid]);
      }
      thread_output += row_scale * v;
    }
    reduced_row_ptr[tid] = static_cast<T>(thread_output);
  }
}

// out[token, d] = sum over the token's TOPK expert outputs
template <typename scalar_t, int TOPK>
__global__ void moe_sum_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                               const int d) {
  const int64_t token_idx = blockIdx.x;
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    scalar_t x = 0.0;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) {
      x += __ldg(&input[token_idx * TOPK * d + k * d + idx]);
    }
    out[token_idx * d + idx] = x;
  }
}

}  // namespace moe

// explicit instantiations, as a dispatch file would spell them
template __global__ void moe::topk_gating_softmax<4, 16, 4, 16>(const float*, const bool*, float*, const int, int*, int*, const int, const int, const int);
template __global__ void moe::moe_align_block_size_kernel<int32_t>(const int32_t*, int32_t*, int32_t*, int32_t*, int32_t, int32_t, size_t, int32_t);
template __global__ void moe::moe_expert_offsets_cub<128>(const int32_t*, int32_t*, int32_t*, int32_t*, int, int, int);
template __global__ void moe::expand_input_rows_kernel<__half>(const __half*, __half*, const int*, int*, const int64_t, const int64_t, const int);
template __global__ void moe::finalize_moe_routing_kernel<float, true>(const float*, float*, const float*, const float*, const int*, const int*, const int, const int, const int);
template __global__ void moe::moe_sum_kernel<__nv_bfloat16, 2>(__nv_bfloat16*, const __nv_bfloat16*, const int);
