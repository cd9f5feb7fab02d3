// expect: 6:11: 'cub::BlockScan' is not a type kir knows
#include <cub/cub.cuh>
#define BLOCK 128

__global__ void block_offsets(const int* counts, int* offsets) {
  typedef cub::BlockScan<int, BLOCK> BlockScan;
  __shared__ typename BlockScan::TempStorage temp;
  int c = counts[blockIdx.x * BLOCK + threadIdx.x];
  BlockScan(temp).ExclusiveSum(c, c);
  offsets[blockIdx.x * BLOCK + threadIdx.x] = c;
}
