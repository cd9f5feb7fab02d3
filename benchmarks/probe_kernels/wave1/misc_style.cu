// Assorted styles real kernels come in: per-dtype macro instantiation with explicit
// template instantiation lines, inline PTX for lane masks, __syncwarp'd shared-memory warp
// exchange, a functor-templated grid-stride map, __fdividef/__saturatef, a bitonic sort
// in shared memory, a 2-pass variance with Welford merging via a struct, and a kernel using
// half arithmetic through __hmul/__hadd directly.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>

#define DEVICE_INLINE __device__ __forceinline__

DEVICE_INLINE unsigned lanemask_lt() {
    unsigned mask;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
    return mask;
}

// warp-aggregated increment of a histogram bin, ranks via inline PTX lanemask
__global__ void bin_count_aggregated(const int* __restrict__ keys, int* __restrict__ bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int key = keys[i];
    unsigned peers = __match_any_sync(__activemask(), key);
    int leader = __ffs(peers) - 1;
    unsigned rank = __popc(peers & lanemask_lt());
    if (rank == 0) atomicAdd(&bins[key], __popc(peers));
    (void)leader;
}

// transpose within a warp through shared memory, with __syncwarp between write and read
__global__ void warp_transpose_8x4(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[4][32];
    const int w = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    float* t = tile[w];
    const int base = (blockIdx.x * (blockDim.x / 32) + w) * 32;
    t[lane] = in[base + lane];
    __syncwarp();
    // lane reads element (lane % 8) * 4 + lane / 8 : transpose an 8x4 block
    out[base + lane] = t[(lane % 8) * 4 + lane / 8];
}

// functor-templated grid-stride map, instantiated per op
struct Sigmoid {
    DEVICE_INLINE float operator()(float x) const { return __fdividef(1.0f, 1.0f + __expf(-x)); }
};
struct HardSwish {
    DEVICE_INLINE float operator()(float x) const { return x * __saturatef((x + 3.0f) / 6.0f); }
};
template <typename Op>
__global__ void map_kernel(const float* __restrict__ in, float* __restrict__ out, size_t n, Op op) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        out[i] = op(in[i]);
}
template __global__ void map_kernel<Sigmoid>(const float*, float*, size_t, Sigmoid);

// bitonic sort of one block of 2*blockDim.x floats in shared memory, ascending
__global__ void bitonic_sort_block(float* data) {
    extern __shared__ float s[];
    const unsigned tid = threadIdx.x;
    const unsigned n = blockDim.x * 2;
    float* d = data + blockIdx.x * n;
    s[tid] = d[tid];
    s[tid + blockDim.x] = d[tid + blockDim.x];
    __syncthreads();
    for (unsigned size = 2; size <= n; size <<= 1) {
        for (unsigned stride = size >> 1; stride > 0; stride >>= 1) {
            const unsigned pos = 2 * tid - (tid & (stride - 1));
            const bool dir = ((pos & size) == 0);
            float a = s[pos], b = s[pos + stride];
            if ((a > b) == dir) {
                s[pos] = b;
                s[pos + stride] = a;
            }
            __syncthreads();
        }
    }
    d[tid] = s[tid];
    d[tid + blockDim.x] = s[tid + blockDim.x];
}

// Welford per row with a merge struct, one warp per row
struct Welford {
    float mean, m2, count;
    DEVICE_INLINE void push(float x) {
        count += 1.f;
        float delta = x - mean;
        mean += delta / count;
        m2 += delta * (x - mean);
    }
    DEVICE_INLINE Welford merge(const Welford& o) const {
        Welford r;
        r.count = count + o.count;
        if (r.count == 0.f) { r.mean = 0.f; r.m2 = 0.f; return r; }
        float delta = o.mean - mean;
        float nb = o.count / r.count;
        r.mean = mean + delta * nb;
        r.m2 = m2 + o.m2 + delta * delta * count * nb;
        return r;
    }
};

__global__ void row_var_welford(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ var,
                                int rows, int cols) {
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    Welford w{0.f, 0.f, 0.f};
    for (int c = lane; c < cols; c += 32) w.push(x[(size_t)row * cols + c]);
    for (int o = 16; o > 0; o >>= 1) {
        Welford other;
        other.mean = __shfl_xor_sync(0xffffffff, w.mean, o);
        other.m2 = __shfl_xor_sync(0xffffffff, w.m2, o);
        other.count = __shfl_xor_sync(0xffffffff, w.count, o);
        w = w.merge(other);
    }
    if (lane == 0) {
        mean[row] = w.mean;
        var[row] = w.m2 / w.count;
    }
}

// per-dtype macro instantiation: scaled add in native half arithmetic
#define DEFINE_AXPY(NAME, T, MUL, ADD, CVT)                                                     \
    extern "C" __global__ void NAME(T* __restrict__ y, const T* __restrict__ x, float a, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                           \
        if (i < n) y[i] = ADD(MUL(CVT(a), x[i]), y[i]);                                          \
    }
#define FMUL(a, b) ((a) * (b))
#define FADD(a, b) ((a) + (b))
#define FID(a) (a)
DEFINE_AXPY(axpy_f32, float, FMUL, FADD, FID)
DEFINE_AXPY(axpy_f16, __half, __hmul, __hadd, __float2half)
