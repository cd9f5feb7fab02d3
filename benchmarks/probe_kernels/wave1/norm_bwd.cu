// Normalization backward passes and friends: layer norm backward split into a per-row dx
// kernel and a column-partials dgamma/dbeta kernel (Apex / PyTorch manner), RMSNorm backward,
// softmax backward (one warp per row, float4), cross entropy with label smoothing, and
// group norm forward with a two-level reduction (size_t strides, unsigned math).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

template <typename T>
__device__ __forceinline__ T WarpReduceSum(T v) {
    for (int o = warpSize >> 1; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    return v;
}

// block reduce of two values at once, returned to every thread
__device__ __forceinline__ float2 BlockReduceSum2(float a, float b) {
    __shared__ float2 buf[32];
    const int lane = threadIdx.x % warpSize;
    const int wid = threadIdx.x / warpSize;
    a = WarpReduceSum(a);
    b = WarpReduceSum(b);
    if (lane == 0) buf[wid] = make_float2(a, b);
    __syncthreads();
    float2 r = make_float2(0.f, 0.f);
    if (wid == 0) {
        r = lane < (blockDim.x + warpSize - 1) / warpSize ? buf[lane] : make_float2(0.f, 0.f);
        r.x = WarpReduceSum(r.x);
        r.y = WarpReduceSum(r.y);
        if (lane == 0) buf[0] = r;
    }
    __syncthreads();
    r = buf[0];
    __syncthreads();
    return r;
}

// dx for layer norm: one block per row
template <typename T>
__global__ void layer_norm_bwd_dx(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ mean,
                                  const float* __restrict__ rstd, const T* __restrict__ gamma, T* __restrict__ dx,
                                  int N) {
    const size_t row = blockIdx.x;
    const T* dy_r = dy + row * N;
    const T* x_r = x + row * N;
    const float mu = mean[row];
    const float rs = rstd[row];
    float ds = 0.f, db = 0.f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        const float g = static_cast<float>(gamma[j]) * static_cast<float>(dy_r[j]);
        ds += g * static_cast<float>(x_r[j]);
        db += g;
    }
    const float2 sums = BlockReduceSum2(ds, db);
    const float a = (sums.y * mu - sums.x) * rs * rs * rs / N;
    const float b = -a * mu - sums.y * rs / N;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        const float v = rs * static_cast<float>(gamma[j]) * static_cast<float>(dy_r[j]) +
                        a * static_cast<float>(x_r[j]) + b;
        dx[row * N + j] = static_cast<T>(v);
    }
}

// dgamma/dbeta: block (32, 8) tiles 32 columns; rows strided by 8, then a transpose-free
// smem reduction over the 8 partials
__global__ void layer_norm_bwd_gamma_beta(const float* __restrict__ dy, const float* __restrict__ x,
                                          const float* __restrict__ mean, const float* __restrict__ rstd,
                                          float* __restrict__ dgamma, float* __restrict__ dbeta, int M, int N) {
    __shared__ float sg[8][33];
    __shared__ float sb[8][33];
    const int col = blockIdx.x * 32 + threadIdx.x;
    float g = 0.f, b = 0.f;
    if (col < N) {
        for (int r = threadIdx.y; r < M; r += blockDim.y) {
            const float d = dy[(size_t)r * N + col];
            g += d * (x[(size_t)r * N + col] - mean[r]) * rstd[r];
            b += d;
        }
    }
    sg[threadIdx.y][threadIdx.x] = g;
    sb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && col < N) {
        float tg = 0.f, tb = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            tg += sg[i][threadIdx.x];
            tb += sb[i][threadIdx.x];
        }
        dgamma[col] = tg;
        dbeta[col] = tb;
    }
}

// RMSNorm backward, one warp per row; dw accumulated with float atomics
__global__ void rms_norm_bwd(const float* __restrict__ dy, const float* __restrict__ x, const float* __restrict__ w,
                             const float* __restrict__ rstd, float* __restrict__ dx, float* __restrict__ dw,
                             unsigned rows, unsigned cols) {
    const unsigned warps_per_block = blockDim.x / 32u;
    const unsigned row = blockIdx.x * warps_per_block + threadIdx.x / 32u;
    const unsigned lane = threadIdx.x % 32u;
    if (row >= rows) return;
    const float r = rstd[row];
    const float* dyr = dy + (size_t)row * cols;
    const float* xr = x + (size_t)row * cols;
    float dot = 0.f;
    for (unsigned c = lane; c < cols; c += 32u) dot += dyr[c] * w[c] * xr[c];
    dot = WarpReduceSum(dot);
    dot = __shfl_sync(0xffffffff, dot, 0);
    const float coef = dot * r * r * r / cols;
    for (unsigned c = lane; c < cols; c += 32u) {
        dx[(size_t)row * cols + c] = dyr[c] * w[c] * r - xr[c] * coef;
        atomicAdd(dw + c, dyr[c] * xr[c] * r);
    }
}

// softmax backward: dx = y * (dy - sum(dy * y)); one warp per row, float4 over columns
__global__ void softmax_bwd_warp(const float4* __restrict__ y, const float4* __restrict__ dy,
                                 float4* __restrict__ dx, int rows, int cols4) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    float s = 0.f;
    for (int c = lane; c < cols4; c += 32) {
        const float4 a = y[row * cols4 + c];
        const float4 g = dy[row * cols4 + c];
        s += a.x * g.x + a.y * g.y + a.z * g.z + a.w * g.w;
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffff, s, o);
    for (int c = lane; c < cols4; c += 32) {
        const float4 a = y[row * cols4 + c];
        const float4 g = dy[row * cols4 + c];
        float4 r;
        r.x = a.x * (g.x - s);
        r.y = a.y * (g.y - s);
        r.z = a.z * (g.z - s);
        r.w = a.w * (g.w - s);
        dx[row * cols4 + c] = r;
    }
}

// cross entropy with label smoothing, loss per row; one block per row
__global__ void cross_entropy_label_smoothing(const float* __restrict__ logits, const long* __restrict__ target,
                                              float* __restrict__ loss, int V, float smoothing) {
    __shared__ float red[32];
    __shared__ float s_max, s_lse;
    const float* lr = logits + (size_t)blockIdx.x * V;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, lr[i]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float mm = red[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); ++w) mm = fmaxf(mm, red[w]);
        s_max = mm;
    }
    __syncthreads();
    float se = 0.f, sx = 0.f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        se += __expf(lr[i] - s_max);
        sx += lr[i];
    }
    se = WarpReduceSum(se);
    sx = WarpReduceSum(sx);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = se;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
        s_lse = s_max + logf(t);
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sx;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
        const float nll = s_lse - lr[target[blockIdx.x]];
        const float smooth = s_lse - t / V;
        loss[blockIdx.x] = (1.f - smoothing) * nll + smoothing * smooth;
    }
}

// group norm forward, NCHW, one block per (n, group); Welford-free two-pass with size_t strides
__global__ void group_norm_fwd(const float* __restrict__ x, const float* __restrict__ gamma,
                               const float* __restrict__ beta, float* __restrict__ y, int C, int HW, int G, float eps) {
    const int ng = blockIdx.x;
    const int n = ng / G;
    const int g = ng % G;
    const int cpg = C / G;
    const size_t base = ((size_t)n * C + (size_t)g * cpg) * HW;
    const size_t cnt = (size_t)cpg * HW;
    float s = 0.f, ss = 0.f;
    for (size_t i = threadIdx.x; i < cnt; i += blockDim.x) {
        const float v = x[base + i];
        s += v;
        ss += v * v;
    }
    const float2 r = BlockReduceSum2(s, ss);
    const float mean = r.x / cnt;
    const float var = fmaxf(r.y / cnt - mean * mean, 0.f);
    const float inv = rsqrtf(var + eps);
    for (size_t i = threadIdx.x; i < cnt; i += blockDim.x) {
        const int c = g * cpg + (int)(i / HW);
        y[base + i] = (x[base + i] - mean) * inv * gamma[c] + beta[c];
    }
}
