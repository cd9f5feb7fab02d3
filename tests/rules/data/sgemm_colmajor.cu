// Column-major SGEMM (BLAS convention): C = A * B, every matrix stored by columns.
// Launch: grid (ceil(M / 16), ceil(N / 16)), block (16, 16). A is K x M, B is N x K in memory.
__global__ void sgemm_colmajor(int M, int N, int K, const float* A, int lda, const float* B,
                               int ldb, float* C, int ldc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;   // row of C
    int j = blockIdx.y * blockDim.y + threadIdx.y;   // column of C
    if (i < M && j < N) {
        float sum = 0.0f;
        for (int p = 0; p < K; ++p) sum += A[i + p * lda] * B[p + j * ldb];
        C[i + j * ldc] = sum;
    }
}
