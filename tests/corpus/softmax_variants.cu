// Softmax written five ways, as tutorials and kernel collections do: one thread per row,
// a block per row with shared-memory reductions, a warp per row with shuffles, online
// softmax with a struct, and log-softmax with a templated block size.
#include "common.h"

__global__ void softmax_naive(const float* __restrict__ in, float* __restrict__ out,
                              int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* x = in + row * cols;
    float m = -FLT_MAX;
    for (int c = 0; c < cols; ++c) m = max(m, x[c]);
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += expf(x[c] - m);
    for (int c = 0; c < cols; ++c) out[row * cols + c] = expf(x[c] - m) / sum;
}

__global__ void softmax_block_shared(const float* in, float* out, int cols) {
    extern __shared__ float smem[];
    const int row = blockIdx.x, tid = threadIdx.x;
    const float* x = in + row * cols;
    float m = -INFINITY;
    for (int c = tid; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
    smem[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) smem[tid] = fmaxf(smem[tid], smem[tid + s]);
        __syncthreads();
    }
    m = smem[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = tid; c < cols; c += blockDim.x) sum += expf(x[c] - m);
    smem[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) smem[tid] += smem[tid + s];
        __syncthreads();
    }
    sum = smem[0];
    for (int c = tid; c < cols; c += blockDim.x) out[row * cols + c] = expf(x[c] - m) / sum;
}

__global__ void softmax_warp(const float* in, float* out, int rows, int cols) {
    const int warps_per_block = blockDim.x / WARP_SIZE;
    const int row = blockIdx.x * warps_per_block + threadIdx.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    if (row >= rows) return;
    const float* x = in + row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += WARP_SIZE) m = fmaxf(m, x[c]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int c = lane; c < cols; c += WARP_SIZE) sum += __expf(x[c] - m);
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    for (int c = lane; c < cols; c += WARP_SIZE) out[row * cols + c] = __expf(x[c] - m) * inv;
}

__global__ void softmax_online(const float* in, float* out, int rows, int cols) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    SoftmaxState st;
    st.maxval = -INFINITY;
    st.sum = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        SoftmaxState one = {in[row * cols + c], 1.0f};
        st = softmax_merge(st, one);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        SoftmaxState other;
        other.maxval = __shfl_xor_sync(0xffffffff, st.maxval, offset);
        other.sum = __shfl_xor_sync(0xffffffff, st.sum, offset);
        st = softmax_merge(st, other);
    }
    for (int c = lane; c < cols; c += 32)
        out[row * cols + c] = expf(in[row * cols + c] - st.maxval) / st.sum;
}

template <int BLOCK>
__global__ void log_softmax_kernel(const float* __restrict__ in, float* __restrict__ out,
                                   int cols) {
    __shared__ float red[BLOCK / 32];
    const float* x = in + blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, x[c]);
    m = warp_max(m);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < BLOCK / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) sum += expf(x[c] - m);
    sum = warp_sum(sum);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < BLOCK / 32; ++w) sum += red[w];
    const float lse = m + logf(sum);
    for (int c = threadIdx.x; c < cols; c += BLOCK) out[blockIdx.x * cols + c] = x[c] - lse;
}

// dynamic shared memory sized in bytes and carved by casts, as inference kernels size it
__global__ void softmax_smem_bytes(const float* __restrict__ in, float* __restrict__ out,
                                   int cols) {
    extern __shared__ char smem[];
    float* row = reinterpret_cast<float*>(smem);
    float* partial = reinterpret_cast<float*>(smem + cols * sizeof(float));
    const float* x = in + blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        row[c] = x[c];
        m = fmaxf(m, x[c]);
    }
    m = warp_max(m);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = m;
    __syncthreads();
    m = partial[0];
    for (int w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, partial[w]);
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        row[c] = __expf(row[c] - m);
        sum += row[c];
    }
    sum = warp_sum(sum);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int w = 0; w < blockDim.x / 32; ++w) sum += partial[w];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[blockIdx.x * cols + c] = row[c] / sum;
}
