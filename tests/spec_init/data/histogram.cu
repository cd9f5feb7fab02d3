// A histogram with global atomics: bins start at zero, every input adds one to its bin.
#include <cuda_runtime.h>
#include <cstdlib>

const int NUM_BINS = 16;

__global__ void histogram(const int *data, unsigned int *bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&bins[data[i]], 1u);
    }
}

int main() {
    int n = 3000;
    int *h_data = new int[n];
    for (int i = 0; i < n; i++) h_data[i] = rand() % NUM_BINS;
    int *d_data;
    unsigned int *d_bins;
    cudaMalloc(&d_data, n * sizeof(int));
    cudaMalloc(&d_bins, NUM_BINS * sizeof(unsigned int));
    cudaMemcpy(d_data, h_data, n * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemset(d_bins, 0, NUM_BINS * sizeof(unsigned int));
    histogram<<<(n + 255) / 256, 256>>>(d_data, d_bins, n);
    cudaDeviceSynchronize();
    delete[] h_data;
    return 0;
}
