// y = A x, one warp per row of A, the vector x staged in shared memory in chunks the whole
// block loads together (inference engines' "warp GEMV" for batch-1 decoding). Rows past the
// end are skipped by the bounds check, not by an early return, so every thread reaches the
// barriers.
#define WARP 32
#define CHUNK 256

__device__ __forceinline__ float warp_all_sum(float v) {
    #pragma unroll
    for (int mask = WARP / 2; mask > 0; mask >>= 1)
        v += __shfl_xor_sync(0xffffffff, v, mask);
    return v;
}

__global__ void gemv_warp_rows(const float* __restrict__ A, const float* __restrict__ x,
                               float* __restrict__ y, int rows, int cols) {
    __shared__ float xs[CHUNK];
    const int lane = threadIdx.x % WARP;
    const int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    float acc = 0.f;
    for (int base = 0; base < cols; base += CHUNK) {
        for (int i = threadIdx.x; i < CHUNK; i += blockDim.x)
            xs[i] = base + i < cols ? x[base + i] : 0.f;
        __syncthreads();
        if (row < rows) {
            for (int c = lane; c < CHUNK && base + c < cols; c += WARP)
                acc += A[(size_t)row * cols + base + c] * xs[c];
        }
        __syncthreads();
    }
    acc = warp_all_sum(acc);
    if (row < rows && lane == 0)
        y[row] = acc;
}
