// Naive SGEMM, C = alpha * A @ B + beta * C, in the style of GEMM tutorials: one thread per
// element of C, a CEIL_DIV macro for the grid, matrices filled by a host helper.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A,
                            const float *B, float beta, float *C) {
    const uint x = blockIdx.x * blockDim.x + threadIdx.x;
    const uint y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < M && y < N) {
        float tmp = 0.0;
        for (int i = 0; i < K; ++i) {
            tmp += A[x * K + i] * B[i * N + y];
        }
        C[x * N + y] = alpha * tmp + beta * C[x * N + y];
    }
}

void randomize_matrix(float *mat, int N) {
    for (int i = 0; i < N; i++) {
        float tmp = (float)(rand() % 5) + 0.01 * (rand() % 5);
        tmp = (rand() % 2 == 0) ? tmp : tmp * (-1.);
        mat[i] = tmp;
    }
}

int main(int argc, char **argv) {
    int m = 70, n = 48, k = 33;
    float alpha = 0.5, beta = 3.0;
    float *A = nullptr, *B = nullptr, *C = nullptr;
    float *dA = nullptr, *dB = nullptr, *dC = nullptr;

    A = (float *)malloc(sizeof(float) * m * k);
    B = (float *)malloc(sizeof(float) * k * n);
    C = (float *)malloc(sizeof(float) * m * n);
    randomize_matrix(A, m * k);
    randomize_matrix(B, k * n);
    randomize_matrix(C, m * n);

    cudaMalloc((void **)&dA, sizeof(float) * m * k);
    cudaMalloc((void **)&dB, sizeof(float) * k * n);
    cudaMalloc((void **)&dC, sizeof(float) * m * n);
    cudaMemcpy(dA, A, sizeof(float) * m * k, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B, sizeof(float) * k * n, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C, sizeof(float) * m * n, cudaMemcpyHostToDevice);

    dim3 gridDim(CEIL_DIV(m, 32), CEIL_DIV(n, 32));
    dim3 blockDim(32, 32);
    sgemm_naive<<<gridDim, blockDim>>>(m, n, k, alpha, dA, dB, beta, dC);
    cudaMemcpy(C, dC, sizeof(float) * m * n, cudaMemcpyDeviceToHost);
    printf("C[0] = %f\n", C[0]);
    return 0;
}
