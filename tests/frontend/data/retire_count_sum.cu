// A one-launch sum that keeps its count of finished blocks in a __device__ variable (the
// CUDA threadFenceReduction sample's layout, written again): each block reduces its share in
// shared memory, thread 0 writes the block's partial, fences and counts the block in; the
// block that finishes last adds the partials and sets the count back to zero. The ticket
// is atomicInc's, which wraps at its limit (gridDim.x: never reached here).
#define BLOCK 256

__device__ unsigned int blocks_done = 0;

__global__ void retire_count_sum(const float* g_in, float* g_partial, float* g_total,
                                 unsigned int n) {
    __shared__ float sdata[BLOCK];
    __shared__ bool am_last;
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (BLOCK * 2) + threadIdx.x;
    float sum = 0.0f;
    if (i < n) sum = g_in[i];
    if (i + BLOCK < n) sum += g_in[i + BLOCK];
    sdata[tid] = sum;
    __syncthreads();
    for (unsigned int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] = sum = sum + sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) {
        g_partial[blockIdx.x] = sdata[0];
        __threadfence();
        unsigned int ticket = atomicInc(&blocks_done, gridDim.x);
        am_last = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (am_last) {
        float total = 0.0f;
        for (unsigned int b = tid; b < gridDim.x; b += BLOCK) total += g_partial[b];
        sdata[tid] = total;
        __syncthreads();
        for (unsigned int s = BLOCK / 2; s > 0; s >>= 1) {
            if (tid < s) sdata[tid] = total = total + sdata[tid + s];
            __syncthreads();
        }
        if (tid == 0) {
            g_total[0] = sdata[0];
            blocks_done = 0;
        }
    }
}
