// A reduction in the CUDA samples' style (written for kir's tests): the block size a
// template value, cooperative groups used unqualified after `using namespace`, the warp
// mask shifted out of 0xffffffff by a count the block size gives (full for whole warps), a
// ballot over that mask counting the warps' partial sums.
#include <cooperative_groups.h>

using namespace cooperative_groups;

template <class T>
struct SharedMemory {
    __device__ inline operator T *() {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }
};

template <class T, unsigned int blockSize, bool nIsPow2>
__global__ void reduce_samples(const T *__restrict__ g_idata, T *__restrict__ g_odata,
                               unsigned int n) {
    thread_block cta = this_thread_block();
    T *sdata = SharedMemory<T>();
    unsigned int tid = threadIdx.x;
    unsigned int gridSize = blockSize * gridDim.x;
    unsigned int maskLength = (blockSize & 31);
    maskLength = (maskLength > 0) ? (32 - maskLength) : maskLength;
    const unsigned int mask = (0xffffffff) >> maskLength;

    T mySum = 0;
    if (nIsPow2) {
        unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
        gridSize = gridSize << 1;
        while (i < n) {
            mySum += g_idata[i];
            if ((i + blockSize) < n) mySum += g_idata[i + blockSize];
            i += gridSize;
        }
    } else {
        unsigned int i = blockIdx.x * blockSize + threadIdx.x;
        while (i < n) {
            mySum += g_idata[i];
            i += gridSize;
        }
    }
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        mySum += __shfl_down_sync(mask, mySum, offset);
    if ((tid % warpSize) == 0) sdata[tid / warpSize] = mySum;
    sync(cta);

    const unsigned int shmem_extent = (blockSize / warpSize) > 0 ? (blockSize / warpSize) : 1;
    const unsigned int ballot_result = __ballot_sync(mask, tid < shmem_extent);
    if (tid < warpSize) {  // the first warp adds the warps' sums, its other lanes add 0
        mySum = (tid < shmem_extent) ? sdata[tid] : (T)0;
        for (int offset = warpSize / 2; offset > 0; offset /= 2)
            mySum += __shfl_down_sync(mask, mySum, offset);
    }
    // every lane of the first warp agrees on how many partial sums there were
    thread_block_tile<32> warp = tiled_partition<32>(cta);
    unsigned int voters = reduce(warp, (tid < shmem_extent) ? 1u : 0u, plus<unsigned int>());
    if (tid == 0) {
        g_odata[2 * blockIdx.x] = mySum;
        g_odata[2 * blockIdx.x + 1] = (T)(__popc(ballot_result) == voters);
    }
}
