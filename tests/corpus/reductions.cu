// Classic parallel reductions (the shapes of the well-known CUDA reduction tutorial), one
// partial sum per block, then shuffle- and cooperative-group-based ones. No bounds checks
// where the launch covers the input exactly, as the tutorial writes them.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;

// interleaved addressing with a modulo
__global__ void reduce0(const float* g_idata, float* g_odata) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = g_idata[i];
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// sequential addressing
__global__ void reduce2(const float* g_idata, float* g_odata) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = g_idata[i];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// first add during the load
__global__ void reduce3(const float* g_idata, float* g_odata) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    sdata[tid] = g_idata[i] + g_idata[i + blockDim.x];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// the last warp unrolled with shuffles (volatile shared memory is not warp-synchronous on
// current GPUs; this is the safe form)
__device__ __forceinline__ float warpReduceSum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

template <unsigned int blockSize>
__global__ void reduce5(const float* g_idata, float* g_odata, unsigned int n) {
    __shared__ float sdata[blockSize];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + tid;
    unsigned int gridSize = blockSize * 2 * gridDim.x;
    float sum = 0.0f;
    while (i < n) {
        sum += g_idata[i];
        if (i + blockSize < n) sum += g_idata[i + blockSize];
        i += gridSize;
    }
    sdata[tid] = sum;
    __syncthreads();
    if (blockSize >= 512) { if (tid < 256) sdata[tid] = sum = sum + sdata[tid + 256]; __syncthreads(); }
    if (blockSize >= 256) { if (tid < 128) sdata[tid] = sum = sum + sdata[tid + 128]; __syncthreads(); }
    if (blockSize >= 128) { if (tid < 64) sdata[tid] = sum = sum + sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) {
        if (blockSize >= 64) sum += sdata[tid + 32];
        sum = warpReduceSum(sum);
    }
    if (tid == 0) g_odata[blockIdx.x] = sum;
}

// grid-stride sum with a warp-shuffle block reduction and one atomic per block
__global__ void reduce_atomic(const float* __restrict__ in, float* out, int n) {
    __shared__ float warp_sums[32];
    float sum = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        sum += in[i];
    sum = warpReduceSum(sum);
    int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < blockDim.x / warpSize ? warp_sums[lane] : 0.0f;
        sum = warpReduceSum(sum);
        if (lane == 0) atomicAdd(out, sum);
    }
}

// sum of squares per row with cooperative groups; the per-block partials are optional
__global__ void row_sumsq_cg(const float* x, float* out, int cols, float* partial = NULL) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float sums[32];
    float acc = 0.0f;
    for (int c = block.thread_rank(); c < cols; c += block.size()) {
        float v = x[blockIdx.x * cols + c];
        acc += v * v;
    }
    acc = cg::reduce(warp, acc, cg::plus<float>());
    if (warp.thread_rank() == 0) sums[warp.meta_group_rank()] = acc;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        float v = warp.thread_rank() < warp.meta_group_size() ? sums[warp.thread_rank()] : 0.0f;
        v = cg::reduce(warp, v, cg::plus<float>());
        if (warp.thread_rank() == 0) {
            out[blockIdx.x] = v;
            if (partial) partial[blockIdx.x] = v / cols;
        }
    }
}

// maximum per row over tiles of 8 threads (tiles smaller than a warp)
__global__ void row_max_tile8(const float* x, float* out, int cols) {
    auto block = cg::this_thread_block();
    auto tile = cg::tiled_partition<8>(block);
    int row = blockIdx.x * tile.meta_group_size() + tile.meta_group_rank();
    float m = -INFINITY;
    for (int c = tile.thread_rank(); c < cols; c += tile.num_threads())
        m = fmaxf(m, x[row * cols + c]);
    m = cg::reduce(tile, m, cg::greater<float>());
    if (tile.thread_rank() == 0) out[row] = m;
}

// inclusive prefix sums within each warp-sized tile
__global__ void tile_scan(const int* in, int* out) {
    auto block = cg::this_thread_block();
    auto warp = cg::tiled_partition<32>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = cg::inclusive_scan(warp, in[i], cg::plus<int>());
}
