// Batched matmul, one output element per thread: C[b] = A[b] @ B[b] for each of `batch`
// independent M x K by K x N products stored back to back; blockIdx.z is the batch.
//
// Launch: grid (ceil(N / 16), ceil(M / 16), batch), block (16, 16).
#include <cuda_runtime.h>

__global__ void bmm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    const int b = blockIdx.z;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int p = 0; p < K; ++p) {
            acc += A[(b * M + i) * K + p] * B[(b * K + p) * N + j];
        }
        C[(b * M + i) * N + j] = acc;
    }
}
