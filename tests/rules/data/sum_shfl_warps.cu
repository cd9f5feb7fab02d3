// Sum of squares in the style of inference engines: macros for the warp reduction, every
// warp's lane 0 parks its sum in shared memory, the first warp reduces those, and lane 0
// adds the block's sum for its row (a 2-D grid: blocks along x cover one row's columns).
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

__global__ void row_sumsq(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float warp_sums[WARP_SIZE];
    const int row = blockIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    float v = col < cols ? x[(size_t)row * cols + col] : 0.0f;
    v = v * v;
    float s = warp_sum(v);
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        float t = lane < blockDim.x / WARP_SIZE ? warp_sums[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) atomicAdd(&out[row], t);
    }
}
