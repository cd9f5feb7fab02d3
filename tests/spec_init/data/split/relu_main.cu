// Host program for relu_kernel.cu (compiled together).
#include <cuda_runtime.h>
__global__ void relu(const float* x, float* y, int n);

void run_relu(const float* d_x, float* d_y, int n) {
    int threads = 512;
    relu<<<(n + threads - 1) / threads, threads>>>(d_x, d_y, n);
}

int main() {
    int n = 2048;
    float *d_x, *d_y;
    cudaMalloc(&d_x, n * sizeof(float));
    cudaMalloc(&d_y, n * sizeof(float));
    run_relu(d_x, d_y, n);
    return 0;
}
