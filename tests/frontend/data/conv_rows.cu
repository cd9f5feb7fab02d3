// Row pass of a separable convolution, the filter in constant memory (set by the host with
// cudaMemcpyToSymbol), each block staging its row segment plus the apron in shared memory.
#define KERNEL_RADIUS 4
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
#define ROWS_BLOCKDIM_X 32
#define ROWS_BLOCKDIM_Y 4

__constant__ float c_Kernel[KERNEL_LENGTH];
__constant__ int c_width;

__global__ void convolutionRowsKernel(float* d_Dst, const float* d_Src, int imageH) {
    __shared__ float s_Data[ROWS_BLOCKDIM_Y][ROWS_BLOCKDIM_X + 2 * KERNEL_RADIUS];
    const int x = blockIdx.x * ROWS_BLOCKDIM_X + threadIdx.x;
    const int y = blockIdx.y * ROWS_BLOCKDIM_Y + threadIdx.y;
    const int row = min(y, imageH - 1);
    s_Data[threadIdx.y][threadIdx.x + KERNEL_RADIUS] = x < c_width ? d_Src[row * c_width + x] : 0.0f;
    if (threadIdx.x < KERNEL_RADIUS) {
        int left = x - KERNEL_RADIUS, right = x + ROWS_BLOCKDIM_X;
        s_Data[threadIdx.y][threadIdx.x] = left >= 0 ? d_Src[row * c_width + left] : 0.0f;
        s_Data[threadIdx.y][threadIdx.x + ROWS_BLOCKDIM_X + KERNEL_RADIUS] =
            right < c_width ? d_Src[row * c_width + right] : 0.0f;
    }
    __syncthreads();
    if (x >= c_width || y >= imageH) return;
    float sum = 0;
#pragma unroll
    for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++)
        sum += c_Kernel[KERNEL_RADIUS - j] * s_Data[threadIdx.y][threadIdx.x + KERNEL_RADIUS + j];
    d_Dst[y * c_width + x] = sum;
}
