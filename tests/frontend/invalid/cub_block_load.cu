// expect: 4:23: 'cub::BlockLoad' is not a type kir knows
#include <cub/cub.cuh>
__global__ void striped_copy(const float* in, float* out) {
  __shared__ typename cub::BlockLoad<float, 128, 4>::TempStorage temp;
  float items[4];
  cub::BlockLoad<float, 128, 4>(temp).Load(in + blockIdx.x * 512, items);
  for (int k = 0; k < 4; ++k) out[blockIdx.x * 512 + threadIdx.x * 4 + k] = items[k];
}
