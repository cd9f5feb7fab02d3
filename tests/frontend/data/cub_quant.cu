// Per-row int8 quantization (written for kir's tests): the block size a template value, the
// row's absolute maximum reduced by a typedef'd cub::BlockReduce with cuda::maximum; the row's
// count of negative values through cub::BlockReduce<int, ...> named in full; each warp's sum
// of the row's first elements through cub::WarpReduce, kept by its lane 0, and the maximum of
// the first 12 of each 16 of them through a WarpReduce of 16 lanes.
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

template <int BLOCK>
__global__ void quantize_rows(const float* __restrict__ x, signed char* __restrict__ q,
                              float* __restrict__ scales, int* __restrict__ negatives,
                              float* __restrict__ warp_sums, float* __restrict__ group_max,
                              int cols) {
  typedef cub::BlockReduce<float, BLOCK> BlockReduceF;
  __shared__ typename BlockReduceF::TempStorage max_storage;
  __shared__ typename cub::BlockReduce<int, BLOCK>::TempStorage count_storage;
  typedef cub::WarpReduce<float> WarpSum;
  __shared__ typename WarpSum::TempStorage warp_storage[BLOCK / 32];
  typedef cub::WarpReduce<float, 16> GroupMax;
  __shared__ typename GroupMax::TempStorage group_storage[BLOCK / 16];

  const float* row = x + blockIdx.x * cols;
  float amax = 0.0f;
  int nneg = 0;
  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    amax = fmaxf(amax, fabsf(row[c]));
    nneg += row[c] < 0.0f;
  }
  const float row_max = BlockReduceF(max_storage).Reduce(amax, cuda::maximum<>());
  const int row_negatives = cub::BlockReduce<int, BLOCK>(count_storage).Sum(nneg);

  const int warp = threadIdx.x / 32;
  const float first = threadIdx.x < cols ? row[threadIdx.x] : 0.0f;
  const float warp_sum = WarpSum(warp_storage[warp]).Sum(first);
  if (threadIdx.x % 32 == 0) warp_sums[blockIdx.x * (BLOCK / 32) + warp] = warp_sum;
  const float group = GroupMax(group_storage[threadIdx.x / 16]).Reduce(first, cuda::maximum<>(),
                                                                       12);
  if (threadIdx.x % 16 == 0) group_max[blockIdx.x * (BLOCK / 16) + threadIdx.x / 16] = group;

  __shared__ float s_scale;
  if (threadIdx.x == 0) {
    s_scale = row_max > 0.0f ? row_max / 127.0f : 1.0f;
    scales[blockIdx.x] = s_scale;
    negatives[blockIdx.x] = row_negatives;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += BLOCK)
    q[blockIdx.x * cols + c] = (signed char)rintf(row[c] / s_scale);
}
