// expect: 7:14: dependent type names
#include <cub/cub.cuh>

template <int BLOCK>
__global__ void block_sum(const float* in, float* out, int n) {
  typedef cub::BlockReduce<float, BLOCK> BlockReduce;
  __shared__ typename BlockReduce::TempStorage temp;
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float s = BlockReduce(temp).Sum(i < n ? in[i] : 0.f);
  if (threadIdx.x == 0) atomicAdd(out, s);
}
