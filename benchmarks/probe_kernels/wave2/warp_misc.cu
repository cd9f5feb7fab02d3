// Warp-level and vectorized utility kernels (written for this probe)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstddef>

// shared-memory warp reduction kept in step with __syncwarp (the replacement for `volatile`)
template <unsigned int blockSize>
__device__ void warpReduceSync(float* sdata, unsigned int tid) {
    float v = sdata[tid];
    if (blockSize >= 64) { v += sdata[tid + 32]; __syncwarp(); sdata[tid] = v; __syncwarp(); }
    v += sdata[tid + 16]; __syncwarp(); sdata[tid] = v; __syncwarp();
    v += sdata[tid + 8];  __syncwarp(); sdata[tid] = v; __syncwarp();
    v += sdata[tid + 4];  __syncwarp(); sdata[tid] = v; __syncwarp();
    v += sdata[tid + 2];  __syncwarp(); sdata[tid] = v; __syncwarp();
    v += sdata[tid + 1];  __syncwarp(); sdata[tid] = v;
}

template <unsigned int blockSize>
__global__ void reduce_syncwarp(const float* __restrict__ g_idata, float* __restrict__ g_odata,
                                size_t n) {
    __shared__ float sdata[blockSize];
    unsigned int tid = threadIdx.x;
    size_t i = (size_t)blockIdx.x * (blockSize * 2) + tid;
    const size_t gridSize = (size_t)blockSize * 2 * gridDim.x;
    float sum = 0.0f;
    while (i < n) {
        sum += g_idata[i];
        if (i + blockSize < n) sum += g_idata[i + blockSize];
        i += gridSize;
    }
    sdata[tid] = sum;
    __syncthreads();
    if (blockSize >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
    if (blockSize >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
    if (blockSize >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) warpReduceSync<blockSize>(sdata, tid);
    if (tid == 0) atomicAdd(g_odata, sdata[0]);
}

// L2-normalize rows of float4s: one warp per row, __shfl_xor_sync all-reduce, rsqrtf
__global__ void l2_normalize_rows_f4(const float4* __restrict__ x, float4* __restrict__ y,
                                     int rows, int cols4, float eps) {
    const int warps_per_block = blockDim.x >> 5;
    const int row = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float4* xr = x + (size_t)row * cols4;
    float ss = 0.f;
    for (int c = lane; c < cols4; c += 32) {
        float4 v = xr[c];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(fmaxf(ss, eps));
    float4* yr = y + (size_t)row * cols4;
    for (int c = lane; c < cols4; c += 32) {
        float4 v = xr[c];
        v.x *= inv; v.y *= inv; v.z *= inv; v.w *= inv;
        yr[c] = v;
    }
}

// half2 scale-and-add with odd-length tail, grid-stride over pairs
__global__ void scale_add_half2(const __half* __restrict__ a, const __half* __restrict__ b,
                                __half* __restrict__ out, float alpha, int n) {
    const int n2 = n / 2;
    const __half2* a2 = reinterpret_cast<const __half2*>(a);
    const __half2* b2 = reinterpret_cast<const __half2*>(b);
    __half2* o2 = reinterpret_cast<__half2*>(out);
    const __half2 al = __float2half2_rn(alpha);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += blockDim.x * gridDim.x)
        o2[i] = __hfma2(al, a2[i], b2[i]);
    if (blockIdx.x == 0 && threadIdx.x == 0 && (n & 1))
        out[n - 1] = __float2half(alpha * __half2float(a[n - 1]) + __half2float(b[n - 1]));
}

// bf16 softmax over short rows, one warp per row, values kept in registers
template <int COLS_PER_LANE>
__global__ void softmax_bf16_warp(const __nv_bfloat16* __restrict__ in,
                                  __nv_bfloat16* __restrict__ out, int rows, int cols) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    float v[COLS_PER_LANE];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < COLS_PER_LANE; ++k) {
        const int c = lane + 32 * k;
        v[k] = c < cols ? __bfloat162float(in[(size_t)row * cols + c]) : -INFINITY;
        m = fmaxf(m, v[k]);
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < COLS_PER_LANE; ++k) {
        v[k] = __expf(v[k] - m);
        s += v[k];
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffff, s, o);
    const float r = __fdividef(1.0f, s);
#pragma unroll
    for (int k = 0; k < COLS_PER_LANE; ++k) {
        const int c = lane + 32 * k;
        if (c < cols) out[(size_t)row * cols + c] = __float2bfloat16(v[k] * r);
    }
}

template __global__ void reduce_syncwarp<256>(const float*, float*, size_t);
template __global__ void softmax_bf16_warp<4>(const __nv_bfloat16*, __nv_bfloat16*, int, int);
