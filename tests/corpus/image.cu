// Image and matrix-layout kernels (vendor-sample style): transposes through shared memory
// with and without padding, a 3x3 box blur on a 2D grid, bilinear resize, and an RGBA to
// grey conversion on uchar4 (refused: char types).
#include <cuda_runtime.h>
#include "helper_cuda.h"

#define TILE_DIM 32
#define BLOCK_ROWS 8

__global__ void transpose_naive(float* odata, const float* idata, int width, int height) {
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[x * height + (y + j)] = idata[(y + j) * width + x];
}

__global__ void transpose_coalesced(float* odata, const float* idata, int width, int height) {
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void transpose_no_bank_conflicts(float* odata, const float* idata, int width,
                                            int height) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void box_blur3x3(const float* __restrict__ in, float* __restrict__ out, int w, int h) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.f;
    int count = 0;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            const int xx = x + dx, yy = y + dy;
            if (xx >= 0 && xx < w && yy >= 0 && yy < h) {
                acc += in[yy * w + xx];
                ++count;
            }
        }
    }
    out[y * w + x] = acc / count;
}

__device__ __forceinline__ float texel(const float* img, int w, int h, int x, int y) {
    x = min(max(x, 0), w - 1);
    y = min(max(y, 0), h - 1);
    return img[y * w + x];
}

__global__ void resize_bilinear(const float* src, float* dst, int sw, int sh, int dw, int dh) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= dh) return;
    const float fx = (x + 0.5f) * sw / (float)dw - 0.5f;
    const float fy = (y + 0.5f) * sh / (float)dh - 0.5f;
    const int x0 = (int)floorf(fx), y0 = (int)floorf(fy);
    const float ax = fx - x0, ay = fy - y0;
    const float top = texel(src, sw, sh, x0, y0) * (1.f - ax) + texel(src, sw, sh, x0 + 1, y0) * ax;
    const float bot = texel(src, sw, sh, x0, y0 + 1) * (1.f - ax) + texel(src, sw, sh, x0 + 1, y0 + 1) * ax;
    dst[y * dw + x] = top * (1.f - ay) + bot * ay;
}

__global__ void rgba_to_grey(const uchar4* const rgba, unsigned char* const grey, int rows,
                             int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        uchar4 p = rgba[i];
        grey[i] = (unsigned char)(.299f * p.x + .587f * p.y + .114f * p.z);
    }
}

int main() {
    float *d_in, *d_out;
    checkCudaErrors(cudaMalloc(&d_in, 1024 * 1024 * 4));
    checkCudaErrors(cudaMalloc(&d_out, 1024 * 1024 * 4));
    dim3 grid(32, 32), block(TILE_DIM, BLOCK_ROWS);
    transpose_coalesced<<<grid, block>>>(d_out, d_in, 1024, 1024);
    return 0;
}
