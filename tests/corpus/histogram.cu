// Histograms with atomics: global atomics, per-block shared-memory histograms merged with
// atomicAdd, and a "take back" pass with atomicSub; int counts, grid-stride loops.
#include <cuda_runtime.h>

#define NUM_BINS 64

__global__ void histogram_global(const int* __restrict__ data, int* __restrict__ bins, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&bins[data[i] % NUM_BINS], 1);
}

__global__ void histogram_shared(const int* __restrict__ data, int* __restrict__ bins, int n) {
    __shared__ int local[NUM_BINS];
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % NUM_BINS], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        if (local[b] != 0) atomicAdd(&bins[b], local[b]);
}

__global__ void histogram_remove(const int* __restrict__ data, int* __restrict__ bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicSub(&bins[data[i] % NUM_BINS], 1);
}

__global__ void histogram_weighted(const int* __restrict__ idx, const float* __restrict__ w,
                                   float* __restrict__ bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(bins + (idx[i] & (NUM_BINS - 1)), w[i]);
}
