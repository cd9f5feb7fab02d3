// Image and stencil kernels (written for this probe): constant-memory convolution with a
// shared halo tile, separable row/column convolution, 7-point 3D stencil, Sobel on bytes.
#include <cuda_runtime.h>
#include <stdint.h>

#define MASK_RADIUS 2
#define MASK_WIDTH (2 * MASK_RADIUS + 1)
#define TILE_W 16
#define TILE_H 16
#define SHARED_W (TILE_W + 2 * MASK_RADIUS)
#define SHARED_H (TILE_H + 2 * MASK_RADIUS)

__constant__ float d_Mask[MASK_WIDTH * MASK_WIDTH];

// 2D convolution, zero padding; the block loads a (TILE+2R)^2 halo tile in strides
__global__ void conv2d_tiled(const float* __restrict__ in, float* __restrict__ out,
                             int width, int height) {
    __shared__ float tile[SHARED_H][SHARED_W];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * TILE_W - MASK_RADIUS;
    const int y0 = blockIdx.y * TILE_H - MASK_RADIUS;

    for (int dy = ty; dy < SHARED_H; dy += TILE_H) {
        for (int dx = tx; dx < SHARED_W; dx += TILE_W) {
            int gx = x0 + dx, gy = y0 + dy;
            tile[dy][dx] = (gx >= 0 && gx < width && gy >= 0 && gy < height)
                               ? in[gy * width + gx] : 0.0f;
        }
    }
    __syncthreads();

    const int ox = blockIdx.x * TILE_W + tx;
    const int oy = blockIdx.y * TILE_H + ty;
    if (ox < width && oy < height) {
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < MASK_WIDTH; ++i)
#pragma unroll
            for (int j = 0; j < MASK_WIDTH; ++j)
                sum += d_Mask[i * MASK_WIDTH + j] * tile[ty + i][tx + j];
        out[oy * width + ox] = sum;
    }
}

// separable convolution, CUDA-samples style: row pass with clamp-to-edge, no bounds checks
#define KERNEL_RADIUS 4
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
#define ROWS_BLOCKDIM_X 16
#define ROWS_BLOCKDIM_Y 4
#define ROWS_RESULT_STEPS 4
#define ROWS_HALO_STEPS 1

__constant__ float c_Kernel[KERNEL_LENGTH];

__global__ void convolutionRowsKernel(float *d_Dst, float *d_Src, int imageW, int imageH,
                                      int pitch) {
    __shared__ float s_Data[ROWS_BLOCKDIM_Y][(ROWS_RESULT_STEPS + 2 * ROWS_HALO_STEPS) * ROWS_BLOCKDIM_X];

    // Offset to the left halo edge
    const int baseX = (blockIdx.x * ROWS_RESULT_STEPS - ROWS_HALO_STEPS) * ROWS_BLOCKDIM_X + threadIdx.x;
    const int baseY = blockIdx.y * ROWS_BLOCKDIM_Y + threadIdx.y;

    d_Src += baseY * pitch + baseX;
    d_Dst += baseY * pitch + baseX;

    // Load main data
#pragma unroll
    for (int i = ROWS_HALO_STEPS; i < ROWS_HALO_STEPS + ROWS_RESULT_STEPS; i++) {
        s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X] = d_Src[i * ROWS_BLOCKDIM_X];
    }

    // Load left halo
#pragma unroll
    for (int i = 0; i < ROWS_HALO_STEPS; i++) {
        s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X] =
            (baseX >= -i * ROWS_BLOCKDIM_X) ? d_Src[i * ROWS_BLOCKDIM_X] : 0;
    }

    // Load right halo
#pragma unroll
    for (int i = ROWS_HALO_STEPS + ROWS_RESULT_STEPS; i < ROWS_HALO_STEPS + ROWS_RESULT_STEPS + ROWS_HALO_STEPS; i++) {
        s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X] =
            (imageW - baseX > i * ROWS_BLOCKDIM_X) ? d_Src[i * ROWS_BLOCKDIM_X] : 0;
    }

    // Compute and store results
    __syncthreads();
#pragma unroll
    for (int i = ROWS_HALO_STEPS; i < ROWS_HALO_STEPS + ROWS_RESULT_STEPS; i++) {
        float sum = 0;

#pragma unroll
        for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++) {
            sum += c_Kernel[KERNEL_RADIUS - j] * s_Data[threadIdx.y][threadIdx.x + i * ROWS_BLOCKDIM_X + j];
        }

        d_Dst[i * ROWS_BLOCKDIM_X] = sum;
    }
}

// 7-point 3D Jacobi stencil, 2D thread grid marching in z, registers for the z-neighbours
__global__ void stencil7_3d(const float* __restrict__ in, float* __restrict__ out,
                            const int nx, const int ny, const int nz,
                            const float c0, const float c1) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 1 || j < 1 || i >= nx - 1 || j >= ny - 1) return;
    const size_t sx = 1, sy = nx, sz = (size_t)nx * ny;

    float below = in[0 * sz + j * sy + i];
    float cur = in[1 * sz + j * sy + i];
    for (int k = 1; k < nz - 1; ++k) {
        const size_t idx = k * sz + j * sy + i * sx;
        float above = in[idx + sz];
        out[idx] = c0 * cur +
                   c1 * (in[idx - sx] + in[idx + sx] + in[idx - sy] + in[idx + sy] + below + above);
        below = cur;
        cur = above;
    }
}

// Sobel magnitude on an 8-bit image, clamped reads, saturating store
__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

__device__ __forceinline__ unsigned char px(const unsigned char* img, int x, int y, int w, int h) {
    return img[clampi(y, 0, h - 1) * w + clampi(x, 0, w - 1)];
}

__global__ void sobel_u8(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                         int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int gx = -px(src, x - 1, y - 1, w, h) - 2 * px(src, x - 1, y, w, h) - px(src, x - 1, y + 1, w, h)
             + px(src, x + 1, y - 1, w, h) + 2 * px(src, x + 1, y, w, h) + px(src, x + 1, y + 1, w, h);
    int gy = -px(src, x - 1, y - 1, w, h) - 2 * px(src, x, y - 1, w, h) - px(src, x + 1, y - 1, w, h)
             + px(src, x - 1, y + 1, w, h) + 2 * px(src, x, y + 1, w, h) + px(src, x + 1, y + 1, w, h);
    float mag = sqrtf((float)(gx * gx + gy * gy));
    dst[y * w + x] = (unsigned char)min(255, __float2int_rn(mag));
}

// median-free "unsharp" via uchar4 RGBA box filter: pixels as uchar4, float accumulate
__global__ void box3_rgba(const uchar4* __restrict__ src, uchar4* __restrict__ dst, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            uchar4 p = src[clampi(y + dy, 0, h - 1) * w + clampi(x + dx, 0, w - 1)];
            acc.x += p.x; acc.y += p.y; acc.z += p.z; acc.w += p.w;
        }
    const float inv = 1.0f / 9.0f;
    dst[y * w + x] = make_uchar4((unsigned char)(acc.x * inv + 0.5f), (unsigned char)(acc.y * inv + 0.5f),
                                 (unsigned char)(acc.z * inv + 0.5f), (unsigned char)(acc.w * inv + 0.5f));
}
