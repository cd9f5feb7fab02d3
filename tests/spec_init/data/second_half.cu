// Differences over the second half of a buffer, launched on a pointer into it.
#include <cuda_runtime.h>

__global__ void diff_half(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] - x[i - 1];
}

int main() {
    int total = 1024;
    int half = total / 2;
    float *d_data, *d_out;
    float* h = (float*)malloc(total * sizeof(float));
    for (int i = 0; i < total; i++) h[i] = (float)rand() / RAND_MAX;
    cudaMalloc(&d_data, total * sizeof(float));
    cudaMalloc(&d_out, half * sizeof(float));
    cudaMemcpy(d_data, h, total * sizeof(float), cudaMemcpyHostToDevice);
    diff_half<<<(half + 63) / 64, 64>>>(d_data + half, d_out, half);
    return 0;
}
