// int8 weight x int8 activation GEMV in the style of quantized inference engines: a warp per
// output row, four int8 values read at once as one int and multiplied by __dp4a, int32
// accumulation, one scale per row and one per activation vector. No bounds check on K
// (a multiple of 128), rows past M are skipped.
#include <cstdint>
#include <cuda_runtime.h>

#define WARP_SIZE 32
#define ROWS_PER_BLOCK 4

static __device__ __forceinline__ int get_int_b4(const int8_t* x, const int i32) {
    return reinterpret_cast<const int*>(x)[i32];   // four int8 values, little-endian
}

static __device__ __forceinline__ int warp_reduce_sum(int x) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        x += __shfl_xor_sync(0xffffffff, x, offset, WARP_SIZE);
    }
    return x;
}

__global__ void mul_mat_vec_q8(const int8_t* __restrict__ vx, const int8_t* __restrict__ vy,
                               const float* __restrict__ row_scale, const float y_scale,
                               float* __restrict__ dst, int* __restrict__ dst_i32,
                               const int ncols, const int nrows) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y;
    if (row >= nrows) {
        return;
    }
    const int8_t* x_row = vx + (int64_t)row * ncols;
    int sumi = 0;
    for (int i = threadIdx.x; i < ncols / 4; i += WARP_SIZE) {
        sumi = __dp4a(get_int_b4(x_row, i), get_int_b4(vy, i), sumi);
    }
    sumi = warp_reduce_sum(sumi);
    if (threadIdx.x == 0) {
        dst_i32[row] = sumi;
        dst[row] = row_scale[row] * y_scale * (float)sumi;
    }
}
