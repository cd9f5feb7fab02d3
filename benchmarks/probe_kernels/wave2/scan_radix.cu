// Prefix sums and radix-sort building blocks (written for this probe; GPU Gems 3 ch. 39 style)
#include <cuda_runtime.h>
#include <stdint.h>

#define NUM_BANKS 32
#define LOG_NUM_BANKS 5
#define CONFLICT_FREE_OFFSET(n) ((n) >> LOG_NUM_BANKS)

// work-efficient exclusive scan of 2*blockDim.x elements per block, padded shared array,
// block totals written to sums[] for a second pass
__global__ void prescan_padded(float *g_odata, const float *g_idata, float *sums, int n) {
    extern __shared__ float temp[];  // allocated on invocation
    int thid = threadIdx.x;
    int offset = 1;
    const int base = blockIdx.x * n;

    int ai = thid;
    int bi = thid + (n / 2);
    int bankOffsetA = CONFLICT_FREE_OFFSET(ai);
    int bankOffsetB = CONFLICT_FREE_OFFSET(bi);
    temp[ai + bankOffsetA] = g_idata[base + ai];
    temp[bi + bankOffsetB] = g_idata[base + bi];

    for (int d = n >> 1; d > 0; d >>= 1) {  // build sum in place up the tree
        __syncthreads();
        if (thid < d) {
            int ai = offset * (2 * thid + 1) - 1;
            int bi = offset * (2 * thid + 2) - 1;
            ai += CONFLICT_FREE_OFFSET(ai);
            bi += CONFLICT_FREE_OFFSET(bi);
            temp[bi] += temp[ai];
        }
        offset *= 2;
    }

    if (thid == 0) {
        sums[blockIdx.x] = temp[n - 1 + CONFLICT_FREE_OFFSET(n - 1)];
        temp[n - 1 + CONFLICT_FREE_OFFSET(n - 1)] = 0;  // clear the last element
    }

    for (int d = 1; d < n; d *= 2) {  // traverse down tree & build scan
        offset >>= 1;
        __syncthreads();
        if (thid < d) {
            int ai = offset * (2 * thid + 1) - 1;
            int bi = offset * (2 * thid + 2) - 1;
            ai += CONFLICT_FREE_OFFSET(ai);
            bi += CONFLICT_FREE_OFFSET(bi);
            float t = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += t;
        }
    }
    __syncthreads();

    g_odata[base + ai] = temp[ai + bankOffsetA];
    g_odata[base + bi] = temp[bi + bankOffsetB];
}

// second pass: add the scanned block totals
__global__ void uniform_add(float *g_data, const float *__restrict__ incr, int n) {
    __shared__ float uni;
    if (threadIdx.x == 0) uni = incr[blockIdx.x];
    __syncthreads();
    unsigned int address = blockIdx.x * n + threadIdx.x;
    g_data[address] += uni;
    g_data[address + blockDim.x] += uni;
}

// radix sort pass 1: per-block digit histogram of (key >> shift) & (RADIX-1), written
// digit-major so that a scan over it gives global offsets
#define RADIX_BITS 4
#define RADIX (1 << RADIX_BITS)

__global__ void radix_histogram(const unsigned int *__restrict__ keys, unsigned int *__restrict__ hist,
                                unsigned int n, unsigned int shift) {
    __shared__ unsigned int s_hist[RADIX];
    for (unsigned int d = threadIdx.x; d < RADIX; d += blockDim.x) s_hist[d] = 0;
    __syncthreads();

    const unsigned int items_per_block = (n + gridDim.x - 1) / gridDim.x;
    const unsigned int begin = blockIdx.x * items_per_block;
    const unsigned int end = min(begin + items_per_block, n);
    for (unsigned int i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const unsigned int digit = (keys[i] >> shift) & (RADIX - 1);
        atomicAdd(&s_hist[digit], 1u);
    }
    __syncthreads();

    for (unsigned int d = threadIdx.x; d < RADIX; d += blockDim.x)
        hist[d * gridDim.x + blockIdx.x] = s_hist[d];
}

// one-bit split of a warp's keys with ballot / popc (radix-sort local step), stable
__global__ void warp_split_bit(const unsigned int *__restrict__ keys, unsigned int *__restrict__ out,
                               unsigned int bit) {
    const unsigned lane = threadIdx.x & 31u;
    const unsigned base = blockIdx.x * blockDim.x + (threadIdx.x & ~31u);
    const unsigned int k = keys[base + lane];
    const bool one = (k >> bit) & 1u;
    const unsigned ones = __ballot_sync(0xffffffffu, one);
    const unsigned lanemask_lt = (1u << lane) - 1u;
    const int zeros_total = 32 - __popc(ones);
    int dst;
    if (one)
        dst = zeros_total + __popc(ones & lanemask_lt);
    else
        dst = lane - __popc(ones & lanemask_lt);
    out[base + dst] = k;
}

// stream compaction of positive values: warp ballot + block offsets in shared memory,
// one atomicAdd per block on a global counter (order within a block preserved)
__global__ void compact_positive(const float *__restrict__ in, float *__restrict__ out,
                                 int *__restrict__ count, int n) {
    __shared__ int warp_counts[32];
    __shared__ int block_base;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float v = i < n ? in[i] : 0.0f;
    const bool keep = i < n && v > 0.0f;
    const unsigned mask = __ballot_sync(0xffffffff, keep);
    if (lane == 0) warp_counts[warp] = __popc(mask);
    __syncthreads();
    if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < blockDim.x / 32; ++w) {
            int c = warp_counts[w];
            warp_counts[w] = total;
            total += c;
        }
        block_base = atomicAdd(count, total);
    }
    __syncthreads();
    if (keep) out[block_base + warp_counts[warp] + __popc(mask & ((1u << lane) - 1))] = v;
}
