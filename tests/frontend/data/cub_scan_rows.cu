// Running values along rows (written for kir's tests): a block per row of the block's
// length, its running maximum (cub::BlockScan's InclusiveScan with cuda::maximum) and the
// maximum of what came before each element, seeded by the row's floor (ExclusiveScan); per
// warp, prefix sums with each warp's total (cub::WarpScan's InclusiveSum), and per group of
// 8 lanes, integer ranks (cub::WarpScan<int, 8>'s ExclusiveSum).
#include <cub/cub.cuh>

#define ROW 128

__global__ void running_rows(const float* __restrict__ x, const float* __restrict__ floors,
                             float* __restrict__ running_max, float* __restrict__ before_max,
                             float* __restrict__ warp_prefix, float* __restrict__ warp_totals,
                             int* __restrict__ ranks) {
  using RowScan = cub::BlockScan<float, ROW>;
  using WarpSums = cub::WarpScan<float>;
  using GroupRanks = cub::WarpScan<int, 8>;
  __shared__ typename RowScan::TempStorage row_storage;
  __shared__ typename WarpSums::TempStorage warp_storage[ROW / 32];
  __shared__ typename GroupRanks::TempStorage group_storage[ROW / 8];

  const int i = blockIdx.x * ROW + threadIdx.x;
  const float v = x[i];
  float m, b;
  RowScan(row_storage).InclusiveScan(v, m, cuda::maximum<>());
  __syncthreads();  // the storage is used again
  RowScan(row_storage).ExclusiveScan(v, b, floors[blockIdx.x], cuda::maximum<>());
  running_max[i] = m;
  before_max[i] = b;

  float s, total;
  WarpSums(warp_storage[threadIdx.x / 32]).InclusiveSum(v, s, total);
  warp_prefix[i] = s;
  if (threadIdx.x % 32 == 0) warp_totals[i / 32] = total;

  int rank;
  GroupRanks(group_storage[threadIdx.x / 8]).ExclusiveSum(v > 0.0f ? 1 : 0, rank);
  ranks[i] = rank;
}
