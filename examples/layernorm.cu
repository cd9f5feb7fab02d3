// Layer normalization over the last axis:
//   y[r, c] = (x[r, c] - mean_r) * rsqrt(var_r + eps) * gamma[c] + beta[c]
//
// Launch: grid (ceil(n_rows / 4)), block (128): one warp of 32 threads per row, 4 rows per
// block. The mean is reduced with __shfl_xor_sync (every lane gets it); the variance with
// __shfl_down_sync into lane 0 and then broadcast with __shfl_sync. The last block may hold
// fewer than 4 rows: warps past n_rows return at once (there is no block barrier).
#include <cuda_runtime.h>
#include <math.h>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ gamma,
                               const float* __restrict__ beta, float* __restrict__ y,
                               int n_rows, int n_cols, float eps) {
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;
    int rows_per_block = blockDim.x / WARP_SIZE;
    int row = blockIdx.x * rows_per_block + warp;
    if (row >= n_rows) {
        return;
    }
    const float* xr = x + row * n_cols;
    float* yr = y + row * n_cols;

    float sum = 0.0f;
    for (int c = lane; c < n_cols; c += WARP_SIZE) {
        sum += xr[c];
    }
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        sum += __shfl_xor_sync(FULL_MASK, sum, offset);
    }
    float mean = sum / n_cols;

    float sq = 0.0f;
    for (int c = lane; c < n_cols; c += WARP_SIZE) {
        float diff = xr[c] - mean;
        sq += diff * diff;
    }
    #pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        sq += __shfl_down_sync(FULL_MASK, sq, offset);
    }
    // Only lane 0 holds the full sum after the down-sweep: broadcast it.
    float var = __shfl_sync(FULL_MASK, sq, 0) / n_cols;
    float rstd = rsqrtf(var + eps);

    for (int c = lane; c < n_cols; c += WARP_SIZE) {
        yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
}
