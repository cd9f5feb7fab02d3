// expect: 6:11: 'cub::BlockRadixSort' is not a type kir knows
#include <cub/cub.cuh>
#define BLOCK 128

__global__ void sort_keys(int* keys) {
  typedef cub::BlockRadixSort<int, BLOCK, 1> BlockRadixSort;
  __shared__ typename BlockRadixSort::TempStorage temp;
  int k[1] = {keys[blockIdx.x * BLOCK + threadIdx.x]};
  BlockRadixSort(temp).Sort(k);
  keys[blockIdx.x * BLOCK + threadIdx.x] = k[0];
}
