// expect: 4:23: 'cub::WarpScan' is not a type kir knows
#include <cub/cub.cuh>
__global__ void warp_prefix(const float* in, float* out) {
  __shared__ typename cub::WarpScan<float>::TempStorage temp;
  float v = in[threadIdx.x];
  cub::WarpScan<float>(temp).InclusiveSum(v, v);
  out[threadIdx.x] = v;
}
