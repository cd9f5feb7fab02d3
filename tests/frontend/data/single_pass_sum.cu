// A single-pass sum in the style of vendor reduction samples (written again for kir's
// tests): a templated block size and power-of-two flag, shared memory through a conversion
// operator over extern __shared__, cooperative-groups syncs and a tile shuffle tail, block
// partials written to the output, then a __device__ count of retired blocks taken with
// atomicInc after a __threadfence; the last block sums the partials into element 0.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

template <class T>
struct SharedArray {
    __device__ inline operator T*() {
        extern __shared__ int __smem[];
        return (T*)__smem;
    }
};

template <unsigned int blockSize>
__device__ void block_sum(float* sdata, float mySum, const unsigned int tid, cg::thread_block cta) {
    sdata[tid] = mySum;
    cg::sync(cta);
    if (blockSize >= 512) { if (tid < 256) sdata[tid] = mySum = mySum + sdata[tid + 256]; cg::sync(cta); }
    if (blockSize >= 256) { if (tid < 128) sdata[tid] = mySum = mySum + sdata[tid + 128]; cg::sync(cta); }
    if (blockSize >= 128) { if (tid < 64) sdata[tid] = mySum = mySum + sdata[tid + 64]; cg::sync(cta); }
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64) mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2)
            mySum += tile32.shfl_down(mySum, offset);
    }
    if (cta.thread_rank() == 0) sdata[0] = mySum;
}

template <unsigned int blockSize, bool nIsPow2>
__device__ void block_share(const float* g_idata, float* g_odata, unsigned int n, cg::thread_block cta) {
    float* sdata = SharedArray<float>();
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
    unsigned int gridSize = blockSize * 2 * gridDim.x;
    float mySum = 0;
    while (i < n) {
        mySum += g_idata[i];
        if (nIsPow2 || i + blockSize < n) mySum += g_idata[i + blockSize];
        i += gridSize;
    }
    block_sum<blockSize>(sdata, mySum, tid, cta);
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

__device__ unsigned int retired = 0;

template <unsigned int blockSize, bool nIsPow2>
__global__ void single_pass_sum(const float* g_idata, float* g_odata, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    block_share<blockSize, nIsPow2>(g_idata, g_odata, n, cta);
    if (gridDim.x > 1) {
        const unsigned int tid = threadIdx.x;
        __shared__ bool amLast;
        float* smem = SharedArray<float>();
        if (tid == 0) {
            __threadfence();
            unsigned int ticket = atomicInc(&retired, gridDim.x);
            amLast = (ticket == gridDim.x - 1);
        }
        cg::sync(cta);
        if (amLast) {
            int i = tid;
            float mySum = 0;
            while (i < gridDim.x) {
                mySum += g_odata[i];
                i += blockSize;
            }
            block_sum<blockSize>(smem, mySum, tid, cta);
            if (tid == 0) {
                g_odata[0] = smem[0];
                retired = 0;
            }
        }
    }
}

template __global__ void single_pass_sum<256, false>(const float*, float*, unsigned int);
