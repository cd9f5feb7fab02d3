// C = alpha * A.B + beta * C for row-major matrices of any size: a shared-memory tiled GEMM in
// the style of a BLAS-like library, written differently from examples/sgemm.cu (a #define'd
// tile, 2-D shared arrays, the k loop stepping by TILE, if/else tile loads with unsigned
// thread indices, and an alpha/beta epilogue that reads C).
#define TILE 32

__global__ void gemm_ab(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ float sA[TILE][TILE];
    __shared__ float sB[TILE][TILE];
    const int r = blockIdx.y * TILE + threadIdx.y;
    const int c = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        if (r < M && k0 + threadIdx.x < K)
            sA[threadIdx.y][threadIdx.x] = A[r * K + k0 + threadIdx.x];
        else
            sA[threadIdx.y][threadIdx.x] = 0.f;
        if (k0 + threadIdx.y < K && c < N)
            sB[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * N + c];
        else
            sB[threadIdx.y][threadIdx.x] = 0.f;
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TILE; ++kk)
            sum += sA[threadIdx.y][kk] * sB[kk][threadIdx.x];
        __syncthreads();
    }
    if (r < M && c < N)
        C[r * N + c] = alpha * sum + beta * C[r * N + c];
}
