// Stencils as HPC tutorials and the CUDA samples write them: a 7-point 3D stencil marching
// along z with the z-neighbours in registers and the xy-plane in a shared tile with halos
// (2.5D blocking); FDTD3d's radius-4 stencil with a __constant__ coefficient table and
// register queues shifted every plane; a 2D Jacobi sweep with a dynamically sized shared halo
// tile (a macro indexer) and the squared update summed per warp into a residual by atomicAdd.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// ------------------------------------------------------------------------------------------
#define BX 32
#define BY 8

__global__ void __launch_bounds__(BX * BY)
    stencil7_25d(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz,
                 float c0, float c1) {
    __shared__ float tile[BY + 2][BX + 2];
    const int i = blockIdx.x * BX + threadIdx.x;
    const int j = blockIdx.y * BY + threadIdx.y;
    const int tx = threadIdx.x + 1;
    const int ty = threadIdx.y + 1;
    const size_t slice = (size_t)nx * ny;
    const bool inside = (i < nx) && (j < ny);
    const size_t ij = (size_t)j * nx + i;

    float below = 0.0f, cur = 0.0f, above = 0.0f;
    if (inside) {
        cur = in[ij];
        above = in[slice + ij];
    }
    for (int k = 1; k < nz - 1; ++k) {
        below = cur;
        cur = above;
        if (inside) above = in[(k + 1) * slice + ij];

        __syncthreads();  // the previous plane's tile is no longer read
        if (inside) {
            tile[ty][tx] = cur;
            if (threadIdx.x == 0 && i > 0) tile[ty][0] = in[k * slice + ij - 1];
            if (threadIdx.x == BX - 1 && i + 1 < nx) tile[ty][BX + 1] = in[k * slice + ij + 1];
            if (threadIdx.y == 0 && j > 0) tile[0][tx] = in[k * slice + ij - nx];
            if (threadIdx.y == BY - 1 && j + 1 < ny) tile[BY + 1][tx] = in[k * slice + ij + nx];
        }
        __syncthreads();

        if (inside && i > 0 && i < nx - 1 && j > 0 && j < ny - 1) {
            out[k * slice + ij] = c0 * cur + c1 * (tile[ty][tx - 1] + tile[ty][tx + 1] +
                                                   tile[ty - 1][tx] + tile[ty + 1][tx] + below +
                                                   above);
        }
    }
}

// ------------------------------------------------------------------------------------------
// FDTD3d: input and output padded by RADIUS on every side; dimx, dimy multiples of the block
#define RADIUS 4
#define k_blockDimX 32
#define k_blockDimMaxY 16

__constant__ float stencil[RADIUS + 1];

__global__ void FiniteDifferencesKernel(float *output, const float *input, const int dimx,
                                        const int dimy, const int dimz) {
    bool validr = true;
    bool validw = true;
    const int gtidx = blockIdx.x * blockDim.x + threadIdx.x;
    const int gtidy = blockIdx.y * blockDim.y + threadIdx.y;
    const int ltidx = threadIdx.x;
    const int ltidy = threadIdx.y;
    const int workx = blockDim.x;
    const int worky = blockDim.y;
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float tile[k_blockDimMaxY + 2 * RADIUS][k_blockDimX + 2 * RADIUS];

    const int stride_y = dimx + 2 * RADIUS;
    const int stride_z = stride_y * (dimy + 2 * RADIUS);

    int inputIndex = 0;
    int outputIndex = 0;

    // Advance inputIndex to start of inner volume
    inputIndex += RADIUS * stride_y + RADIUS;
    // Advance inputIndex to target element
    inputIndex += gtidy * stride_y + gtidx;

    float infront[RADIUS];
    float behind[RADIUS];
    float current;

    const int tx = ltidx + RADIUS;
    const int ty = ltidy + RADIUS;

    // Check in bounds
    if ((gtidx >= dimx + RADIUS) || (gtidy >= dimy + RADIUS)) validr = false;
    if ((gtidx >= dimx) || (gtidy >= dimy)) validw = false;

    // Preload the "infront" and "behind" data
    for (int i = RADIUS - 2; i >= 0; i--) {
        if (validr) behind[i] = input[inputIndex];
        inputIndex += stride_z;
    }
    if (validr) current = input[inputIndex];
    outputIndex = inputIndex;
    inputIndex += stride_z;
    for (int i = 0; i < RADIUS; i++) {
        if (validr) infront[i] = input[inputIndex];
        inputIndex += stride_z;
    }

    // Step through the xy-planes
#pragma unroll 9
    for (int iz = 0; iz < dimz; iz++) {
        // Advance the slice (move the thread-front)
        for (int i = RADIUS - 1; i > 0; i--) behind[i] = behind[i - 1];
        behind[0] = current;
        current = infront[0];
#pragma unroll 4
        for (int i = 0; i < RADIUS - 1; i++) infront[i] = infront[i + 1];
        if (validr) infront[RADIUS - 1] = input[inputIndex];

        inputIndex += stride_z;
        outputIndex += stride_z;
        cg::sync(cta);

        // Halo above & below
        if (ltidy < RADIUS) {
            tile[ltidy][tx] = input[outputIndex - RADIUS * stride_y];
            tile[ltidy + worky + RADIUS][tx] = input[outputIndex + worky * stride_y];
        }
        // Halo left & right
        if (ltidx < RADIUS) {
            tile[ty][ltidx] = input[outputIndex - RADIUS];
            tile[ty][ltidx + workx + RADIUS] = input[outputIndex + workx];
        }
        tile[ty][tx] = current;
        cg::sync(cta);

        // Compute the output value
        float value = stencil[0] * current;
#pragma unroll 4
        for (int i = 1; i <= RADIUS; i++) {
            value += stencil[i] * (infront[i - 1] + behind[i - 1] + tile[ty - i][tx] +
                                   tile[ty + i][tx] + tile[ty][tx - i] + tile[ty][tx + i]);
        }

        // Store the output value
        if (validw) output[outputIndex] = value;
    }
}

// ------------------------------------------------------------------------------------------
// Jacobi sweep for -lap(u) = f on a grid with Dirichlet boundary; residual += sum (unew - u)^2
__inline__ __device__ float warpReduceSum(float val) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        val += __shfl_down_sync(0xffffffff, val, offset);
    return val;
}

__global__ void jacobi5_shared(const float *__restrict__ u, float *__restrict__ unew,
                               const float *__restrict__ f, float *__restrict__ residual, int nx,
                               int ny, float h2) {
    extern __shared__ float smem[];
    const int sw = blockDim.x + 2;
#define S(y, x) smem[(y) * sw + (x)]
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int si = threadIdx.x + 1;
    const int sj = threadIdx.y + 1;
    const bool in = i < nx && j < ny;

    if (in) {
        S(sj, si) = u[j * nx + i];
        if (threadIdx.x == 0 && i > 0) S(sj, 0) = u[j * nx + i - 1];
        if (threadIdx.x == blockDim.x - 1 && i + 1 < nx) S(sj, si + 1) = u[j * nx + i + 1];
        if (threadIdx.y == 0 && j > 0) S(0, si) = u[(j - 1) * nx + i];
        if (threadIdx.y == blockDim.y - 1 && j + 1 < ny) S(sj + 1, si) = u[(j + 1) * nx + i];
    }
    __syncthreads();

    float diff2 = 0.0f;
    if (in) {
        float v;
        if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1) {
            v = S(sj, si);
        } else {
            v = 0.25f * (S(sj, si - 1) + S(sj, si + 1) + S(sj - 1, si) + S(sj + 1, si) +
                         h2 * f[j * nx + i]);
        }
        unew[j * nx + i] = v;
        const float d = v - S(sj, si);
        diff2 = d * d;
    }
#undef S
    diff2 = warpReduceSum(diff2);
    if ((threadIdx.x & 31) == 0) atomicAdd(residual, diff2);
}
