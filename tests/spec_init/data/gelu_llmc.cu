/*
GELU forward in the style of llm.c's dev/cuda kernels: a checked cudaMalloc, random inputs
made by a helper, the grid from ceil_div, the launch checked afterwards.
*/
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
#define cudaCheck(err) (cudaCheckImpl(err, __FILE__, __LINE__))

void cudaCheckImpl(cudaError_t error, const char *file, int line) {
    if (error != cudaSuccess) {
        printf("[CUDA ERROR] at file %s:%d:\n%s\n", file, line, cudaGetErrorString(error));
        exit(EXIT_FAILURE);
    }
}

int ceil_div(int dividend, int divisor) {
    return (dividend + divisor - 1) / divisor;
}

float* make_random_float(size_t N) {
    float* arr = (float*)malloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        arr[i] = ((float)rand() / RAND_MAX) * 2.0 - 1.0;
    }
    return arr;
}

__global__ void gelu_forward_kernel(float* out, const float* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}

int main(int argc, char **argv) {
    srand(0);
    int B = 4;
    int T = 32;
    int C = 96;

    float* out = (float*)malloc(B * T * C * sizeof(float));
    float* inp = make_random_float(B * T * C);

    float* d_out;
    float* d_inp;
    cudaCheck(cudaMalloc(&d_out, B * T * C * sizeof(float)));
    cudaCheck(cudaMalloc(&d_inp, B * T * C * sizeof(float)));
    cudaCheck(cudaMemcpy(d_inp, inp, B * T * C * sizeof(float), cudaMemcpyHostToDevice));

    int block_size = 128;
    const int grid_size = ceil_div(B * T * C, block_size);
    gelu_forward_kernel<<<grid_size, block_size>>>(d_out, d_inp, B * T * C);
    cudaCheck(cudaGetLastError());

    free(out);
    free(inp);
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_inp));
    return 0;
}
