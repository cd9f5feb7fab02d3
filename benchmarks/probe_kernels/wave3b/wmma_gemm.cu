// Tensor-core GEMMs as the CUDA samples (cudaTensorCoreGemm's simple_wmma_gemm,
// tf32TensorCoreGemm) and GEMM tutorials write them with the WMMA API: one warp per 16x16
// output tile straight from global memory; TF32 with the __float_to_tf32 conversion of each
// fragment element; and a block of 4x2 warps that stages 64x32-wide tiles of A and B in shared
// memory (half, padded rows) and runs a bias + ReLU epilogue through a shared staging tile.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16

// C = alpha * A * B + beta * C, A row-major M x K, B column-major K x N (ldb = K), C row-major
__global__ void simple_wmma_gemm(half *a, half *b, float *c, float *d, int m_ld, int n_ld,
                                 int k_ld, float alpha, float beta) {
    // Leading dimensions. Packed with no transpositions.
    int lda = k_ld;
    int ldb = k_ld;
    int ldc = n_ld;

    // Tile using a 2D grid
    int warpM = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    int warpN = (blockIdx.y * blockDim.y + threadIdx.y);

    // Declare the fragments
    wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, half, wmma::col_major> b_frag;
    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc_frag;
    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> c_frag;

    wmma::fill_fragment(acc_frag, 0.0f);

    // Loop over k
    for (int i = 0; i < k_ld; i += WMMA_K) {
        int aCol = i;
        int aRow = warpM * WMMA_M;
        int bCol = warpN * WMMA_N;
        int bRow = i;

        // Bounds checking
        if (aRow < m_ld && aCol < k_ld && bRow < k_ld && bCol < n_ld) {
            // Load the inputs
            wmma::load_matrix_sync(a_frag, a + aCol + aRow * lda, lda);
            wmma::load_matrix_sync(b_frag, b + bRow + bCol * ldb, ldb);

            // Perform the matrix multiplication
            wmma::mma_sync(acc_frag, a_frag, b_frag, acc_frag);
        }
    }

    // Load in the current value of c, scale it by beta, and add this our result scaled by alpha
    int cCol = warpN * WMMA_N;
    int cRow = warpM * WMMA_M;

    if (cRow < m_ld && cCol < n_ld) {
        wmma::load_matrix_sync(c_frag, c + cCol + cRow * ldc, ldc, wmma::mem_row_major);

#pragma unroll
        for (int i = 0; i < c_frag.num_elements; i++) {
            c_frag.x[i] = alpha * acc_frag.x[i] + beta * c_frag.x[i];
        }

        // Store the output
        wmma::store_matrix_sync(d + cCol + cRow * ldc, c_frag, ldc, wmma::mem_row_major);
    }
}

// ------------------------------------------------------------------------------------------
// TF32: m16n16k8 fragments of float inputs rounded to tf32
#define TF32_K 8

__global__ void wmma_tf32_gemm(const float *__restrict__ A, const float *__restrict__ B,
                               float *__restrict__ C, int M, int N, int K) {
    const int warpM = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int warpN = blockIdx.y * blockDim.y + threadIdx.y;
    if (warpM * 16 >= M || warpN * 16 >= N) return;

    wmma::fragment<wmma::matrix_a, 16, 16, TF32_K, wmma::precision::tf32, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, 16, 16, TF32_K, wmma::precision::tf32, wmma::row_major> b_frag;
    wmma::fragment<wmma::accumulator, 16, 16, TF32_K, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k = 0; k < K; k += TF32_K) {
        wmma::load_matrix_sync(a_frag, A + (warpM * 16) * K + k, K);
        wmma::load_matrix_sync(b_frag, B + k * N + warpN * 16, N);
#pragma unroll
        for (int t = 0; t < a_frag.num_elements; t++) a_frag.x[t] = wmma::__float_to_tf32(a_frag.x[t]);
#pragma unroll
        for (int t = 0; t < b_frag.num_elements; t++) b_frag.x[t] = wmma::__float_to_tf32(b_frag.x[t]);
        wmma::mma_sync(acc, a_frag, b_frag, acc);
    }
    wmma::store_matrix_sync(C + (warpM * 16) * N + warpN * 16, acc, N, wmma::mem_row_major);
}

// ------------------------------------------------------------------------------------------
// Shared-memory staged WMMA with a fused epilogue: block tile 64 x 32, 8 warps (4 x 2), each
// warp one 16x16 tile; K step 32; padded shared rows (+8 halves) against bank conflicts.
#define BM 64
#define BN 32
#define BK 32
#define SKEW 8
#define NWARPS 8

__global__ void __launch_bounds__(NWARPS * 32)
    wmma_gemm_bias_relu(const half *__restrict__ A, const half *__restrict__ B,
                        const float *__restrict__ bias, float *__restrict__ C, int M, int N,
                        int K) {
    __shared__ __align__(32) half As[BM][BK + SKEW];
    __shared__ __align__(32) half Bs[BK][BN + SKEW];
    __shared__ __align__(32) float Cs[NWARPS][WMMA_M * WMMA_N];

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int wm = warp / 2;  // 0..3
    const int wn = warp % 2;  // 0..1
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        // A tile: 64 x 32 halves = 256 threads x 8 halves
        {
            int r = tid / 4, c = (tid % 4) * 8;
            *reinterpret_cast<int4 *>(&As[r][c]) =
                *reinterpret_cast<const int4 *>(&A[(size_t)(row0 + r) * K + k0 + c]);
        }
        // B tile: 32 x 32 halves = 128 int4; the first 128 threads
        if (tid < BK * BN / 8) {
            int r = tid / 4, c = (tid % 4) * 8;
            *reinterpret_cast<int4 *>(&Bs[r][c]) =
                *reinterpret_cast<const int4 *>(&B[(size_t)(k0 + r) * N + col0 + c]);
        }
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; kk += WMMA_K) {
            wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> a_frag;
            wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> b_frag;
            wmma::load_matrix_sync(a_frag, &As[wm * WMMA_M][kk], BK + SKEW);
            wmma::load_matrix_sync(b_frag, &Bs[kk][wn * WMMA_N], BN + SKEW);
            wmma::mma_sync(acc, a_frag, b_frag, acc);
        }
        __syncthreads();
    }

    // epilogue through shared memory: bias + ReLU, each lane writes 8 elements
    wmma::store_matrix_sync(Cs[warp], acc, WMMA_N, wmma::mem_row_major);
    __syncwarp();
    const int out_r = row0 + wm * WMMA_M;
    const int out_c = col0 + wn * WMMA_N;
#pragma unroll
    for (int e = lane; e < WMMA_M * WMMA_N; e += 32) {
        int r = e / WMMA_N, c = e % WMMA_N;
        float v = Cs[warp][e] + bias[out_c + c];
        C[(size_t)(out_r + r) * N + out_c + c] = v > 0.0f ? v : 0.0f;
    }
}
