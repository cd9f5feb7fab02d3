// GEMM-tutorial kernels with tilings the earlier waves did not use: a 128x128x8 block tile with
// 8x8 thread tiles split into four 4x4 quadrants (A transposed in shared memory, float4 loads
// and stores), a batched strided GEMM over blockIdx.z with long long strides, a 64x64 tile
// double-buffered with cp.async through inline PTX, the globalToShmemAsyncCopy sample's
// cg::memcpy_async staging, and a warp-per-row GEMV with float4 loads and a shuffle reduction.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;

// ------------------------------------------------------------------------------------------
// 128 x 128 block tile, BK = 8, 256 threads as 16 x 16, each thread 8 x 8 outputs at rows
// {ty*4 .. ty*4+3, 64+ty*4 .. 64+ty*4+3} and the same columns pattern.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8

__global__ void __launch_bounds__(256)
    sgemm_128x128x8(int M, int N, int K, float alpha, const float *__restrict__ A,
                    const float *__restrict__ B, float beta, float *__restrict__ C) {
    __shared__ __align__(16) float As[BK][BM];  // A tile transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % 16;
    const int ty = tid / 16;

    A += blockIdx.y * BM * K;
    B += blockIdx.x * BN;
    C += blockIdx.y * BM * N + blockIdx.x * BN;

    // A tile 128 x 8 = 256 float4: row tid/2, column (tid%2)*4
    const int a_row = tid >> 1;
    const int a_col = (tid & 1) << 2;
    // B tile 8 x 128 = 256 float4: row tid/32, column (tid%32)*4
    const int b_row = tid >> 5;
    const int b_col = (tid & 31) << 2;

    float acc[TM][TN] = {0.0f};
    float ra[TM];
    float rb[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        float4 av = reinterpret_cast<const float4 *>(A + a_row * K + a_col)[0];
        As[a_col + 0][a_row] = av.x;
        As[a_col + 1][a_row] = av.y;
        As[a_col + 2][a_row] = av.z;
        As[a_col + 3][a_row] = av.w;
        *reinterpret_cast<float4 *>(&Bs[b_row][b_col]) =
            reinterpret_cast<const float4 *>(B + b_row * N + b_col)[0];
        __syncthreads();
        A += BK;
        B += BK * N;

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            *reinterpret_cast<float4 *>(&ra[0]) = *reinterpret_cast<const float4 *>(&As[k][ty * 4]);
            *reinterpret_cast<float4 *>(&ra[4]) = *reinterpret_cast<const float4 *>(&As[k][ty * 4 + 64]);
            *reinterpret_cast<float4 *>(&rb[0]) = *reinterpret_cast<const float4 *>(&Bs[k][tx * 4]);
            *reinterpret_cast<float4 *>(&rb[4]) = *reinterpret_cast<const float4 *>(&Bs[k][tx * 4 + 64]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = (i < 4) ? ty * 4 + i : 64 + ty * 4 + (i - 4);
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = (j < 4) ? tx * 4 : 64 + tx * 4;
            float4 c = *reinterpret_cast<float4 *>(&C[row * N + col]);
            c.x = alpha * acc[i][j + 0] + beta * c.x;
            c.y = alpha * acc[i][j + 1] + beta * c.y;
            c.z = alpha * acc[i][j + 2] + beta * c.z;
            c.w = alpha * acc[i][j + 3] + beta * c.w;
            *reinterpret_cast<float4 *>(&C[row * N + col]) = c;
        }
    }
}

#undef BM
#undef BN
#undef BK

// ------------------------------------------------------------------------------------------
// batched strided GEMM (cublasSgemmStridedBatched semantics, row-major): C_b = A_b * B_b
#define TILE 16
__global__ void sgemm_strided_batched(int M, int N, int K, const float *__restrict__ A,
                                      long long strideA, const float *__restrict__ B,
                                      long long strideB, float *__restrict__ C, long long strideC,
                                      int batchCount) {
    __shared__ float sA[TILE][TILE];
    __shared__ float sB[TILE][TILE + 1];
    const int batch = blockIdx.z;
    if (batch >= batchCount) return;
    A += batch * strideA;
    B += batch * strideB;
    C += batch * strideC;

    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        const int ak = t * TILE + threadIdx.x;
        const int bk = t * TILE + threadIdx.y;
        sA[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[(size_t)row * K + ak] : 0.0f;
        sB[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[(size_t)bk * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) sum = fmaf(sA[threadIdx.y][k], sB[k][threadIdx.x], sum);
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = sum;
}

// ------------------------------------------------------------------------------------------
// cp.async double buffering through inline PTX: 64 x 64 tile, BK = 16, 256 threads, 4 x 4 each
__device__ __forceinline__ void cp_async_16(void *smem_ptr, const void *gmem_ptr) {
    unsigned int smem_addr = static_cast<unsigned int>(__cvta_generic_to_shared(smem_ptr));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr), "l"(gmem_ptr));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#define CA_BM 64
#define CA_BN 64
#define CA_BK 16

__global__ void __launch_bounds__(256)
    sgemm_cp_async(const float *__restrict__ A, const float *__restrict__ B,
                   float *__restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float As[2][CA_BM][CA_BK];
    __shared__ __align__(16) float Bs[2][CA_BK][CA_BN];

    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const float *gA = A + (size_t)blockIdx.y * CA_BM * K;
    const float *gB = B + blockIdx.x * CA_BN;

    // each thread moves one float4 of A (64 x 16 = 256 float4) and one of B (16 x 64)
    const int a_r = tid / 4, a_c = (tid % 4) * 4;
    const int b_r = tid / 16, b_c = (tid % 16) * 4;

    float acc[4][4] = {};
    const int ntiles = K / CA_BK;

    cp_async_16(&As[0][a_r][a_c], gA + (size_t)a_r * K + a_c);
    cp_async_16(&Bs[0][b_r][b_c], gB + (size_t)b_r * N + b_c);
    cp_async_commit();

    for (int t = 0; t < ntiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < ntiles) {
            const int k0 = (t + 1) * CA_BK;
            cp_async_16(&As[cur ^ 1][a_r][a_c], gA + (size_t)a_r * K + k0 + a_c);
            cp_async_16(&Bs[cur ^ 1][b_r][b_c], gB + (size_t)(k0 + b_r) * N + b_c);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < CA_BK; ++k) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[cur][ty * 4 + i][k];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[cur][k][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

    float *gC = C + (size_t)(blockIdx.y * CA_BM + ty * 4) * N + blockIdx.x * CA_BN + tx * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4 *>(gC + (size_t)i * N) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// ------------------------------------------------------------------------------------------
// globalToShmemAsyncCopy-style: whole tile rows copied with cg::memcpy_async, then cg::wait
template <int BLOCK_SIZE>
__global__ void MatrixMulAsyncCopySingleStage(float *__restrict__ C, const float *__restrict__ A,
                                              const float *__restrict__ B, int wA, int wB) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];

    int bx = blockIdx.x, by = blockIdx.y;
    int tx = threadIdx.x, ty = threadIdx.y;
    int aBegin = wA * BLOCK_SIZE * by;
    int aEnd = aBegin + wA - 1;
    int aStep = BLOCK_SIZE;
    int bBegin = BLOCK_SIZE * bx;
    int bStep = BLOCK_SIZE * wB;

    float Csub = 0.0f;
    for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {
        for (int r = 0; r < BLOCK_SIZE; ++r) {
            cg::memcpy_async(cta, As[r], A + a + wA * r, sizeof(float) * BLOCK_SIZE);
            cg::memcpy_async(cta, Bs[r], B + b + wB * r, sizeof(float) * BLOCK_SIZE);
        }
        cg::wait(cta);
#pragma unroll
        for (int k = 0; k < BLOCK_SIZE; ++k) Csub += As[ty][k] * Bs[k][tx];
        cg::sync(cta);
    }
    int c = wB * BLOCK_SIZE * by + BLOCK_SIZE * bx;
    C[c + wB * ty + tx] = Csub;
}

template __global__ void MatrixMulAsyncCopySingleStage<16>(float *, const float *, const float *,
                                                           int, int);

// ------------------------------------------------------------------------------------------
// GEMV y = A x: one warp per row, float4 loads, xor-shuffle reduction; K % 128 == 0
#define WARP_SIZE 32
__global__ void sgemv_warp_f4(const float *__restrict__ A, const float *__restrict__ x,
                              float *__restrict__ y, int M, int K) {
    const int warps_per_block = blockDim.x / WARP_SIZE;
    const int row = blockIdx.x * warps_per_block + threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    if (row >= M) return;
    const float4 *a4 = reinterpret_cast<const float4 *>(A + (size_t)row * K);
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float sum = 0.0f;
#pragma unroll 4
    for (int i = lane; i < K / 4; i += WARP_SIZE) {
        float4 a = __ldg(&a4[i]);
        float4 b = __ldg(&x4[i]);
        sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        sum += __shfl_xor_sync(0xffffffff, sum, offset);
    if (lane == 0) y[row] = sum;
}
