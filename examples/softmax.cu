// Row softmax: y[r, c] = exp(x[r, c] - max_c x[r, :]) / sum_c exp(x[r, c] - max).
//
// Launch: grid (rows), block (256): one block per row, each thread strides over the row.
// Max and sum are reduced within each warp by __shfl_xor_sync, then across the 8 warps
// through a small shared array.
#include <cuda_runtime.h>
#include <math.h>
#include <float.h>

#define BLOCK 256
#define WARPS (BLOCK / 32)
#define FULL_MASK 0xffffffffu

__device__ float warp_reduce_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
    }
    return v;
}

__device__ float warp_reduce_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(FULL_MASK, v, offset);
    }
    return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float warp_max[WARPS];
    __shared__ float warp_sum[WARPS];

    int row = blockIdx.x;
    int tid = threadIdx.x;
    int lane = tid % 32;
    int warp = tid / 32;
    const float* in = x + row * cols;
    float* out = y + row * cols;

    // 1. row max
    float local_max = -FLT_MAX;
    for (int c = tid; c < cols; c += BLOCK) {
        local_max = fmaxf(local_max, in[c]);
    }
    local_max = warp_reduce_max(local_max);
    if (lane == 0) {
        warp_max[warp] = local_max;
    }
    __syncthreads();
    float row_max = warp_max[0];
    for (int w = 1; w < WARPS; w++) {
        row_max = fmaxf(row_max, warp_max[w]);
    }

    // 2. sum of exponentials
    float local_sum = 0.0f;
    for (int c = tid; c < cols; c += BLOCK) {
        local_sum += expf(in[c] - row_max);
    }
    local_sum = warp_reduce_sum(local_sum);
    if (lane == 0) {
        warp_sum[warp] = local_sum;
    }
    __syncthreads();
    float row_sum = 0.0f;
    for (int w = 0; w < WARPS; w++) {
        row_sum += warp_sum[w];
    }

    // 3. normalize
    float inv_sum = 1.0f / row_sum;
    for (int c = tid; c < cols; c += BLOCK) {
        out[c] = expf(in[c] - row_max) * inv_sum;
    }
}
