// Single-precision matrix multiply C = A * B, row-major: A is M x K, B is K x N, C is M x N.
//
// Launch: grid (ceil(N / TILE), ceil(M / TILE)), block (TILE, TILE); one thread per element
// of C. Each block walks the K dimension one TILE x TILE tile of A and of B at a time, staged
// through shared memory. Tile loads past the matrix edges write zeros, so M, N and K need not
// be multiples of TILE.
#include <cuda_runtime.h>

template <int TILE>
__global__ void sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    int num_tiles = (K + TILE - 1) / TILE;
    for (int t = 0; t < num_tiles; ++t) {
        int a_col = t * TILE + tx;
        int b_row = t * TILE + ty;
        As[ty][tx] = (row < M && a_col < K) ? A[row * K + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < K && col < N) ? B[b_row * N + col] : 0.0f;
        __syncthreads();

        #pragma unroll
        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        // The next iteration overwrites the tiles other threads may still be reading.
        __syncthreads();
    }
    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}
