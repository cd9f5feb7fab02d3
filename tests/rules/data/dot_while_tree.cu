// Dot product as the CUDA-by-example books write it: a grid-stride loop with the running
// sum in a register, a shared cache, a while-loop halving tree, one atomicAdd per block.
#define THREADS_PER_BLOCK 128

__global__ void dot(const float *a, const float *b, float *c, int N) {
    __shared__ float cache[THREADS_PER_BLOCK];
    int tid = threadIdx.x + blockIdx.x * blockDim.x;
    int cacheIndex = threadIdx.x;

    float temp = 0;
    while (tid < N) {
        temp += a[tid] * b[tid];
        tid += blockDim.x * gridDim.x;
    }
    cache[cacheIndex] = temp;
    __syncthreads();

    int i = blockDim.x / 2;
    while (i != 0) {
        if (cacheIndex < i)
            cache[cacheIndex] += cache[cacheIndex + i];
        __syncthreads();
        i /= 2;
    }
    if (cacheIndex == 0)
        atomicAdd(c, cache[0]);
}
