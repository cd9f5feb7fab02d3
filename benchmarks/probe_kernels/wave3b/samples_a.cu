// CUDA-samples-style kernels, first batch: separable convolution (columns pass, __constant__
// filter, shared apron), histogram256 with per-warp sub-histograms and its merge kernel,
// sortingNetworks' odd-even merge sort in shared memory (Comparator on references), mergeSort's
// shared-memory stage with binary-search ranks, fastWalshTransform's two kernels, and
// shfl_scan's warp-shuffle inclusive scan.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

typedef unsigned int uint;
#define UMUL(a, b) __umul24((a), (b))
#define UMAD(a, b, c) (UMUL((a), (b)) + (c))

// ------------------------------------------------------------------------------------------
// convolutionSeparable: column pass
#define KERNEL_RADIUS 8
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
__constant__ float c_Kernel[KERNEL_LENGTH];

#define COLUMNS_BLOCKDIM_X 16
#define COLUMNS_BLOCKDIM_Y 8
#define COLUMNS_RESULT_STEPS 4
#define COLUMNS_HALO_STEPS 1

__global__ void convolutionColumnsKernel(float *d_Dst, float *d_Src, int imageW, int imageH,
                                         int pitch) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float s_Data[COLUMNS_BLOCKDIM_X]
                           [(COLUMNS_RESULT_STEPS + 2 * COLUMNS_HALO_STEPS) * COLUMNS_BLOCKDIM_Y + 1];

    // Offset to the upper halo edge
    const int baseX = blockIdx.x * COLUMNS_BLOCKDIM_X + threadIdx.x;
    const int baseY =
        (blockIdx.y * COLUMNS_RESULT_STEPS - COLUMNS_HALO_STEPS) * COLUMNS_BLOCKDIM_Y + threadIdx.y;
    d_Src += baseY * pitch + baseX;
    d_Dst += baseY * pitch + baseX;

    // Main data
#pragma unroll
    for (int i = COLUMNS_HALO_STEPS; i < COLUMNS_HALO_STEPS + COLUMNS_RESULT_STEPS; i++) {
        s_Data[threadIdx.x][threadIdx.y + i * COLUMNS_BLOCKDIM_Y] =
            d_Src[i * COLUMNS_BLOCKDIM_Y * pitch];
    }
    // Upper halo
#pragma unroll
    for (int i = 0; i < COLUMNS_HALO_STEPS; i++) {
        s_Data[threadIdx.x][threadIdx.y + i * COLUMNS_BLOCKDIM_Y] =
            (baseY >= -i * COLUMNS_BLOCKDIM_Y) ? d_Src[i * COLUMNS_BLOCKDIM_Y * pitch] : 0;
    }
    // Lower halo
#pragma unroll
    for (int i = COLUMNS_HALO_STEPS + COLUMNS_RESULT_STEPS;
         i < COLUMNS_HALO_STEPS + COLUMNS_RESULT_STEPS + COLUMNS_HALO_STEPS; i++) {
        s_Data[threadIdx.x][threadIdx.y + i * COLUMNS_BLOCKDIM_Y] =
            (imageH - baseY > i * COLUMNS_BLOCKDIM_Y) ? d_Src[i * COLUMNS_BLOCKDIM_Y * pitch] : 0;
    }
    cg::sync(cta);

#pragma unroll
    for (int i = COLUMNS_HALO_STEPS; i < COLUMNS_HALO_STEPS + COLUMNS_RESULT_STEPS; i++) {
        float sum = 0;
#pragma unroll
        for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++) {
            sum += c_Kernel[KERNEL_RADIUS - j] *
                   s_Data[threadIdx.x][threadIdx.y + i * COLUMNS_BLOCKDIM_Y + j];
        }
        d_Dst[i * COLUMNS_BLOCKDIM_Y * pitch] = sum;
    }
}

// ------------------------------------------------------------------------------------------
// histogram256: one sub-histogram per warp in shared memory, shared atomics
#define HISTOGRAM256_BIN_COUNT 256
#define LOG2_WARP_SIZE 5U
#define WARP_COUNT 6
#define HISTOGRAM256_THREADBLOCK_SIZE (WARP_COUNT << LOG2_WARP_SIZE)
#define HISTOGRAM256_THREADBLOCK_MEMORY (WARP_COUNT * HISTOGRAM256_BIN_COUNT)
#define MERGE_THREADBLOCK_SIZE 256

inline __device__ void addByte(uint *s_WarpHist, uint data) { atomicAdd(s_WarpHist + data, 1); }

inline __device__ void addWord(uint *s_WarpHist, uint data) {
    addByte(s_WarpHist, (data >> 0) & 0xFFU);
    addByte(s_WarpHist, (data >> 8) & 0xFFU);
    addByte(s_WarpHist, (data >> 16) & 0xFFU);
    addByte(s_WarpHist, (data >> 24) & 0xFFU);
}

__global__ void histogram256Kernel(uint *d_PartialHistograms, uint *d_Data, uint dataCount) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ uint s_Hist[HISTOGRAM256_THREADBLOCK_MEMORY];
    uint *s_WarpHist = s_Hist + (threadIdx.x >> LOG2_WARP_SIZE) * HISTOGRAM256_BIN_COUNT;

#pragma unroll
    for (uint i = 0; i < (HISTOGRAM256_THREADBLOCK_MEMORY / HISTOGRAM256_THREADBLOCK_SIZE); i++) {
        s_Hist[threadIdx.x + i * HISTOGRAM256_THREADBLOCK_SIZE] = 0;
    }
    cg::sync(cta);

    for (uint pos = UMAD(blockIdx.x, blockDim.x, threadIdx.x); pos < dataCount;
         pos += UMUL(blockDim.x, gridDim.x)) {
        uint data = d_Data[pos];
        addWord(s_WarpHist, data);
    }
    cg::sync(cta);

    for (uint bin = threadIdx.x; bin < HISTOGRAM256_BIN_COUNT; bin += HISTOGRAM256_THREADBLOCK_SIZE) {
        uint sum = 0;
        for (uint i = 0; i < WARP_COUNT; i++) {
            sum += s_Hist[bin + i * HISTOGRAM256_BIN_COUNT];
        }
        d_PartialHistograms[blockIdx.x * HISTOGRAM256_BIN_COUNT + bin] = sum;
    }
}

// one block per bin: add that bin over all partial histograms
__global__ void mergeHistogram256Kernel(uint *d_Histogram, uint *d_PartialHistograms,
                                        uint histogramCount) {
    cg::thread_block cta = cg::this_thread_block();
    uint sum = 0;
    for (uint i = threadIdx.x; i < histogramCount; i += MERGE_THREADBLOCK_SIZE) {
        sum += d_PartialHistograms[blockIdx.x + i * HISTOGRAM256_BIN_COUNT];
    }
    __shared__ uint data[MERGE_THREADBLOCK_SIZE];
    data[threadIdx.x] = sum;
    for (uint stride = MERGE_THREADBLOCK_SIZE / 2; stride > 0; stride >>= 1) {
        cg::sync(cta);
        if (threadIdx.x < stride) {
            data[threadIdx.x] += data[threadIdx.x + stride];
        }
    }
    if (threadIdx.x == 0) {
        d_Histogram[blockIdx.x] = data[0];
    }
}

// ------------------------------------------------------------------------------------------
// sortingNetworks: Batcher's odd-even merge sort of SHARED_SIZE_LIMIT key/value pairs per block
#define SHARED_SIZE_LIMIT 1024U

__device__ inline void Comparator(uint &keyA, uint &valA, uint &keyB, uint &valB, uint dir) {
    uint t;
    if ((keyA > keyB) == dir) {
        t = keyA;
        keyA = keyB;
        keyB = t;
        t = valA;
        valA = valB;
        valB = t;
    }
}

__global__ void oddEvenMergeSortShared(uint *d_DstKey, uint *d_DstVal, uint *d_SrcKey,
                                       uint *d_SrcVal, uint arrayLength, uint dir) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ uint s_key[SHARED_SIZE_LIMIT];
    __shared__ uint s_val[SHARED_SIZE_LIMIT];

    d_SrcKey += blockIdx.x * SHARED_SIZE_LIMIT + threadIdx.x;
    d_SrcVal += blockIdx.x * SHARED_SIZE_LIMIT + threadIdx.x;
    d_DstKey += blockIdx.x * SHARED_SIZE_LIMIT + threadIdx.x;
    d_DstVal += blockIdx.x * SHARED_SIZE_LIMIT + threadIdx.x;
    s_key[threadIdx.x + 0] = d_SrcKey[0];
    s_val[threadIdx.x + 0] = d_SrcVal[0];
    s_key[threadIdx.x + (SHARED_SIZE_LIMIT / 2)] = d_SrcKey[(SHARED_SIZE_LIMIT / 2)];
    s_val[threadIdx.x + (SHARED_SIZE_LIMIT / 2)] = d_SrcVal[(SHARED_SIZE_LIMIT / 2)];

    for (uint size = 2; size <= arrayLength; size <<= 1) {
        uint stride = size / 2;
        uint offset = threadIdx.x & (stride - 1);
        {
            cg::sync(cta);
            uint pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
            Comparator(s_key[pos + 0], s_val[pos + 0], s_key[pos + stride], s_val[pos + stride],
                       dir);
            stride >>= 1;
        }
        for (; stride > 0; stride >>= 1) {
            cg::sync(cta);
            uint pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
            if (offset >= stride)
                Comparator(s_key[pos - stride], s_val[pos - stride], s_key[pos + 0],
                           s_val[pos + 0], dir);
        }
    }
    cg::sync(cta);
    d_DstKey[0] = s_key[threadIdx.x + 0];
    d_DstVal[0] = s_val[threadIdx.x + 0];
    d_DstKey[(SHARED_SIZE_LIMIT / 2)] = s_key[threadIdx.x + (SHARED_SIZE_LIMIT / 2)];
    d_DstVal[(SHARED_SIZE_LIMIT / 2)] = s_val[threadIdx.x + (SHARED_SIZE_LIMIT / 2)];
}

// ------------------------------------------------------------------------------------------
// mergeSort: stable merge sort of a shared segment, ranks from binary searches
#define MERGE_SHARED_SIZE 512U


template <uint sortDir>
static inline __device__ uint binarySearchInclusive(uint val, uint *data, uint L, uint stride) {
    if (L == 0) return 0;
    uint pos = 0;
    for (; stride > 0; stride >>= 1) {
        uint newPos = umin(pos + stride, L);
        if ((sortDir && (data[newPos - 1] <= val)) || (!sortDir && (data[newPos - 1] >= val)))
            pos = newPos;
    }
    return pos;
}

template <uint sortDir>
static inline __device__ uint binarySearchExclusive(uint val, uint *data, uint L, uint stride) {
    if (L == 0) return 0;
    uint pos = 0;
    for (; stride > 0; stride >>= 1) {
        uint newPos = umin(pos + stride, L);
        if ((sortDir && (data[newPos - 1] < val)) || (!sortDir && (data[newPos - 1] > val)))
            pos = newPos;
    }
    return pos;
}

template <uint sortDir>
__global__ void mergeSortSharedKernel(uint *d_DstKey, uint *d_DstVal, uint *d_SrcKey,
                                      uint *d_SrcVal, uint arrayLength) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ uint s_key[MERGE_SHARED_SIZE];
    __shared__ uint s_val[MERGE_SHARED_SIZE];

    d_SrcKey += blockIdx.x * MERGE_SHARED_SIZE + threadIdx.x;
    d_SrcVal += blockIdx.x * MERGE_SHARED_SIZE + threadIdx.x;
    d_DstKey += blockIdx.x * MERGE_SHARED_SIZE + threadIdx.x;
    d_DstVal += blockIdx.x * MERGE_SHARED_SIZE + threadIdx.x;
    s_key[threadIdx.x + 0] = d_SrcKey[0];
    s_val[threadIdx.x + 0] = d_SrcVal[0];
    s_key[threadIdx.x + (MERGE_SHARED_SIZE / 2)] = d_SrcKey[(MERGE_SHARED_SIZE / 2)];
    s_val[threadIdx.x + (MERGE_SHARED_SIZE / 2)] = d_SrcVal[(MERGE_SHARED_SIZE / 2)];

    for (uint stride = 1; stride < arrayLength; stride <<= 1) {
        uint lPos = threadIdx.x & (stride - 1);
        uint *baseKey = s_key + 2 * (threadIdx.x - lPos);
        uint *baseVal = s_val + 2 * (threadIdx.x - lPos);

        cg::sync(cta);
        uint keyA = baseKey[lPos + 0];
        uint valA = baseVal[lPos + 0];
        uint keyB = baseKey[lPos + stride];
        uint valB = baseVal[lPos + stride];
        uint posA = binarySearchExclusive<sortDir>(keyA, baseKey + stride, stride, stride) + lPos;
        uint posB = binarySearchInclusive<sortDir>(keyB, baseKey + 0, stride, stride) + lPos;

        cg::sync(cta);
        baseKey[posA] = keyA;
        baseVal[posA] = valA;
        baseKey[posB] = keyB;
        baseVal[posB] = valB;
    }
    cg::sync(cta);
    d_DstKey[0] = s_key[threadIdx.x + 0];
    d_DstVal[0] = s_val[threadIdx.x + 0];
    d_DstKey[(MERGE_SHARED_SIZE / 2)] = s_key[threadIdx.x + (MERGE_SHARED_SIZE / 2)];
    d_DstVal[(MERGE_SHARED_SIZE / 2)] = s_val[threadIdx.x + (MERGE_SHARED_SIZE / 2)];
}

template __global__ void mergeSortSharedKernel<1U>(uint *, uint *, uint *, uint *, uint);

// ------------------------------------------------------------------------------------------
// fastWalshTransform: one block per 2^log2N segment in shared memory (radix-4 stages, then one
// radix-2 stage for odd log2N), and one strided radix-4 stage in global memory
__global__ void fwtBatch1Kernel(float *d_Output, float *d_Input, int log2N) {
    const int N = 1 << log2N;
    const int base = blockIdx.x << log2N;

    extern __shared__ float s_data[];
    float *d_Src = d_Input + base;
    float *d_Dst = d_Output + base;

    for (int pos = threadIdx.x; pos < N; pos += blockDim.x) {
        s_data[pos] = d_Src[pos];
    }

    // Main radix-4 stages
    const int pos = threadIdx.x;
    for (int stride = N >> 2; stride > 0; stride >>= 2) {
        int lo = pos & (stride - 1);
        int i0 = ((pos - lo) << 2) + lo;
        int i1 = i0 + stride;
        int i2 = i1 + stride;
        int i3 = i2 + stride;

        __syncthreads();
        float D0 = s_data[i0];
        float D1 = s_data[i1];
        float D2 = s_data[i2];
        float D3 = s_data[i3];

        float T;
        T = D0;
        D0 = D0 + D2;
        D2 = T - D2;
        T = D1;
        D1 = D1 + D3;
        D3 = T - D3;
        T = D0;
        s_data[i0] = D0 + D1;
        s_data[i1] = T - D1;
        T = D2;
        s_data[i2] = D2 + D3;
        s_data[i3] = T - D3;
    }

    // Do single radix-2 stage for odd power of two
    if (log2N & 1) {
        __syncthreads();
        for (int pos = threadIdx.x; pos < N / 2; pos += blockDim.x) {
            int i0 = pos << 1;
            int i1 = i0 + 1;
            float D0 = s_data[i0];
            float D1 = s_data[i1];
            s_data[i0] = D0 + D1;
            s_data[i1] = D0 - D1;
        }
    }

    __syncthreads();
    for (int pos = threadIdx.x; pos < N; pos += blockDim.x) {
        d_Dst[pos] = s_data[pos];
    }
}

__global__ void fwtBatch2Kernel(float *d_Output, float *d_Input, int stride) {
    const int pos = blockIdx.x * blockDim.x + threadIdx.x;
    const int N = blockDim.x * gridDim.x * 4;

    float *d_Src = d_Input + blockIdx.y * N;
    float *d_Dst = d_Output + blockIdx.y * N;

    int lo = pos & (stride - 1);
    int i0 = ((pos - lo) << 2) + lo;
    int i1 = i0 + stride;
    int i2 = i1 + stride;
    int i3 = i2 + stride;

    float D0 = d_Src[i0];
    float D1 = d_Src[i1];
    float D2 = d_Src[i2];
    float D3 = d_Src[i3];

    float T;
    T = D0;
    D0 = D0 + D2;
    D2 = T - D2;
    T = D1;
    D1 = D1 + D3;
    D3 = T - D3;
    T = D0;
    d_Dst[i0] = D0 + D1;
    d_Dst[i1] = T - D1;
    T = D2;
    d_Dst[i2] = D2 + D3;
    d_Dst[i3] = T - D3;
}

// ------------------------------------------------------------------------------------------
// shfl_scan: inclusive scan of each block with __shfl_up_sync, warp sums scanned by warp 0
__global__ void shfl_scan_test(int *data, int width, int *partial_sums = NULL) {
    extern __shared__ int sums[];
    int id = ((blockIdx.x * blockDim.x) + threadIdx.x);
    int lane_id = id % warpSize;
    // determine a warp_id within a block
    int warp_id = threadIdx.x / warpSize;

    // Below is the basic structure of using a shfl instruction for a scan.
    int value = data[id];

#pragma unroll
    for (int i = 1; i <= width; i *= 2) {
        unsigned int mask = 0xffffffff;
        int n = __shfl_up_sync(mask, value, i, width);
        if (lane_id >= i) value += n;
    }

    // value now holds the scan value for the individual thread; next sum the largest values
    // for each warp
    if (threadIdx.x % warpSize == warpSize - 1) {
        sums[warp_id] = value;
    }
    __syncthreads();

    // scan the warp sums in the first warp
    if (warp_id == 0 && lane_id < (blockDim.x / warpSize)) {
        int warp_sum = sums[lane_id];
        int mask = (1 << (blockDim.x / warpSize)) - 1;
        for (int i = 1; i <= (blockDim.x / warpSize); i *= 2) {
            int n = __shfl_up_sync(mask, warp_sum, i, (blockDim.x / warpSize));
            if (lane_id >= i) warp_sum += n;
        }
        sums[lane_id] = warp_sum;
    }
    __syncthreads();

    int blockSum = 0;
    if (warp_id > 0) {
        blockSum = sums[warp_id - 1];
    }
    value += blockSum;
    data[id] = value;

    if (partial_sums != NULL && threadIdx.x == blockDim.x - 1) {
        partial_sums[blockIdx.x] = value;
    }
}
