// Matrix transpose through a shared tile (the classic coalesced transpose): tiles of
// TILE_DIM x TILE_DIM, BLOCK_ROWS rows of threads per tile, sizes only in the launch.
#include <cuda_runtime.h>

#define TILE_DIM 16
#define BLOCK_ROWS 4

__global__ void transposeCoalesced(float *odata, const float *idata) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    int width = gridDim.x * TILE_DIM;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main(int argc, char **argv) {
    const int nx = 64;
    const int ny = 64;
    const int mem_size = nx * ny * sizeof(float);
    dim3 dimGrid(nx / TILE_DIM, ny / TILE_DIM, 1);
    dim3 dimBlock(TILE_DIM, BLOCK_ROWS, 1);
    float *h_idata = (float *)malloc(mem_size);
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) h_idata[j * nx + i] = j * nx + i;
    float *d_idata, *d_tdata;
    cudaMalloc(&d_idata, mem_size);
    cudaMalloc(&d_tdata, mem_size);
    cudaMemcpy(d_idata, h_idata, mem_size, cudaMemcpyHostToDevice);
    transposeCoalesced<<<dimGrid, dimBlock>>>(d_tdata, d_idata);
    return 0;
}
