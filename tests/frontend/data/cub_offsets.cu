// Expert offsets as MoE routing computes them (written for kir's tests): the tokens routed
// to each expert counted with shared-memory atomics, each count padded to a multiple of the
// block of tokens a GEMM takes, and the padded counts turned into offsets by cub::BlockScan
// (ExclusiveSum with the block's aggregate, the total the caller allocates).
#include <cub/cub.cuh>

template <int BLOCK>
__global__ void expert_offsets(const int* __restrict__ topk_ids, int* __restrict__ offsets,
                               int* __restrict__ total, int numel, int num_experts,
                               int block_size) {
  __shared__ int counts[BLOCK];
  typedef cub::BlockScan<int, BLOCK> BlockScan;
  __shared__ typename BlockScan::TempStorage scan_storage;

  counts[threadIdx.x] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < numel; i += BLOCK) atomicAdd(&counts[topk_ids[i]], 1);
  __syncthreads();

  const int count = threadIdx.x < num_experts ? counts[threadIdx.x] : 0;
  const int padded = (count + block_size - 1) / block_size * block_size;
  int offset, all;
  BlockScan(scan_storage).ExclusiveSum(padded, offset, all);
  if (threadIdx.x < num_experts) offsets[threadIdx.x] = offset;
  if (threadIdx.x == 0) *total = all;
}
