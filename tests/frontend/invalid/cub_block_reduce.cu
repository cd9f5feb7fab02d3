// expect: 4:23: 'cub::BlockReduce' is not a type kir knows
#include <cub/cub.cuh>
__global__ void block_max(const float* in, float* out) {
  __shared__ typename cub::BlockReduce<float, 256>::TempStorage temp;
  float v = in[blockIdx.x * 256 + threadIdx.x];
  float m = cub::BlockReduce<float, 256>(temp).Reduce(v, cub::Max());
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}
