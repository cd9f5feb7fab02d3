// Sum of n floats: out[0] += sum(in[0:n]).
//
// Launch: grid (ceil(n / 512)), block (256). Each thread adds two elements (i and
// i + blockDim.x) on the load, the block reduces its 256 partial sums with the classic
// shared-memory tree (halving the active threads each step), and thread 0 adds the block's
// partial into out[0] with atomicAdd (so the order of additions varies between runs).
#include <cuda_runtime.h>

#define BLOCK 256

__global__ void reduce_sum(const float* __restrict__ in, float* out, int n) {
    __shared__ float partial[BLOCK];

    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;

    float v = 0.0f;
    if (i < n) {
        v = in[i];
    }
    if (i + blockDim.x < n) {
        v += in[i + blockDim.x];
    }
    partial[tid] = v;
    __syncthreads();

    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
        __syncthreads();
    }

    if (tid == 0) {
        atomicAdd(&out[0], partial[0]);
    }
}
