// One-launch sum with a "last block done" finish (the pattern of CUDA's threadFenceReduction
// sample, written again): every block folds a grid-stride share of the input into one
// partial, publishes it to a workspace, fences, and takes a ticket from a counter; the block
// that takes the last ticket adds the partials up and writes the total. The workspace and the
// counter are kernel arguments the spec declares as scratch.
#include <cuda_runtime.h>

#define THREADS 128

__device__ __forceinline__ float warp_total(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void last_block_sum(const float* __restrict__ x, float* __restrict__ total,
                               float* partials, unsigned int* tickets, int n) {
    __shared__ float warp_sums[THREADS / 32];
    __shared__ bool is_last;
    const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    float v = 0.0f;
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < n; i += gridDim.x * THREADS)
        v += x[i];
    v = warp_total(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? warp_sums[lane] : 0.0f;
        v = warp_total(v);
        if (lane == 0) {
            partials[blockIdx.x] = v;
            __threadfence();  // the partial is visible before the ticket is
            const unsigned int ticket = atomicAdd(tickets, 1u);
            is_last = ticket == gridDim.x - 1;
        }
    }
    __syncthreads();
    if (!is_last) return;

    float s = 0.0f;
    for (int b = threadIdx.x; b < gridDim.x; b += THREADS)
        s += partials[b];
    s = warp_total(s);
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int w = 0; w < THREADS / 32; ++w) sum += warp_sums[w];
        total[0] = sum;
        tickets[0] = 0;  // ready for the next launch
    }
}
