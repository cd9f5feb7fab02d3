// Kernels whose results depend on exact device semantics: a softmax with 16-lane
// cooperative-groups tiles (two rows per warp), a layernorm over short rows with raw 16-wide
// shuffles and a 16-wide broadcast, a double-precision dot product (double shuffles,
// atomicAdd on double), a column max combined across blocks with the sign-split
// atomicMax(int*) / atomicMin(unsigned*) trick on float bits, and a half2 dot product that
// accumulates in half with __hfma2 (as llama.cpp / FasterTransformer GEMV inner loops do).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <math.h>
namespace cg = cooperative_groups;

// ------------------------------------------------------------------------------------------
template <int TILE>
__global__ void softmax_tile(const float *__restrict__ x, float *__restrict__ y, int rows,
                             int cols) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<TILE> tile = cg::tiled_partition<TILE>(block);
    const int row = blockIdx.x * (blockDim.x / TILE) + tile.meta_group_rank();
    if (row >= rows) return;  // the whole tile leaves together
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;

    float m = -INFINITY;
    for (int c = tile.thread_rank(); c < cols; c += TILE) m = fmaxf(m, xr[c]);
#pragma unroll
    for (int o = TILE / 2; o > 0; o >>= 1) m = fmaxf(m, tile.shfl_xor(m, o));

    float s = 0.0f;
    for (int c = tile.thread_rank(); c < cols; c += TILE) s += __expf(xr[c] - m);
#pragma unroll
    for (int o = TILE / 2; o > 0; o >>= 1) s += tile.shfl_xor(s, o);

    const float inv = 1.0f / s;
    for (int c = tile.thread_rank(); c < cols; c += TILE) yr[c] = __expf(xr[c] - m) * inv;
}

template __global__ void softmax_tile<16>(const float *, float *, int, int);

// ------------------------------------------------------------------------------------------
// 16 lanes per row, two rows per warp; every lane of the warp runs every shuffle
#define LANES_PER_ROW 16
__global__ void layernorm_rows16(const float *__restrict__ x, const float *__restrict__ gamma,
                                 const float *__restrict__ beta, float *__restrict__ y,
                                 float *__restrict__ mean_out, int rows, int cols, float eps) {
    const int lane16 = threadIdx.x % LANES_PER_ROW;
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / LANES_PER_ROW;
    const bool valid = row < rows;
    const float *xr = x + (size_t)row * cols;

    float sum = 0.0f, sq = 0.0f;
    if (valid) {
        for (int c = lane16; c < cols; c += LANES_PER_ROW) {
            float v = xr[c];
            sum += v;
            sq += v * v;
        }
    }
#pragma unroll
    for (int o = LANES_PER_ROW / 2; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(0xffffffff, sum, o, LANES_PER_ROW);
        sq += __shfl_xor_sync(0xffffffff, sq, o, LANES_PER_ROW);
    }
    // lane 0 of each 16-lane group finishes the statistics and broadcasts them
    float mu = 0.0f, rstd = 0.0f;
    if (lane16 == 0) {
        mu = sum / cols;
        float var = fmaxf(sq / cols - mu * mu, 0.0f);
        rstd = rsqrtf(var + eps);
    }
    mu = __shfl_sync(0xffffffff, mu, 0, LANES_PER_ROW);
    rstd = __shfl_sync(0xffffffff, rstd, 0, LANES_PER_ROW);
    if (!valid) return;
    for (int c = lane16; c < cols; c += LANES_PER_ROW)
        y[(size_t)row * cols + c] = (xr[c] - mu) * rstd * gamma[c] + beta[c];
    if (lane16 == 0) mean_out[row] = mu;
}

// ------------------------------------------------------------------------------------------
__inline__ __device__ double warpReduceSumD(double v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    return v;
}

__global__ void ddot_atomic(const double *__restrict__ x, const double *__restrict__ y,
                            double *__restrict__ result, int n) {
    __shared__ double warpSums[32];
    double sum = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        sum += x[i] * y[i];
    sum = warpReduceSumD(sum);
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    if (lane == 0) warpSums[wid] = sum;
    __syncthreads();
    if (wid == 0) {
        sum = (lane < blockDim.x / 32) ? warpSums[lane] : 0.0;
        sum = warpReduceSumD(sum);
        if (lane == 0) atomicAdd(result, sum);
    }
}

// ------------------------------------------------------------------------------------------
// float max through integer atomics: non-negative floats order like ints, negative floats
// order reversed like unsigned ints
__device__ __forceinline__ float atomicMaxFloat(float *addr, float value) {
    float old;
    old = (value >= 0) ? __int_as_float(atomicMax((int *)addr, __float_as_int(value)))
                       : __uint_as_float(atomicMin((unsigned int *)addr, __float_as_uint(value)));
    return old;
}

// column maxima of a rows x cols matrix; blockIdx.y takes a slab of rows
__global__ void colmax_atomic(const float *__restrict__ a, float *__restrict__ colmax, int rows,
                              int cols, int rows_per_block) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const int r0 = blockIdx.y * rows_per_block;
    const int r1 = min(rows, r0 + rows_per_block);
    float m = -INFINITY;
    for (int r = r0; r < r1; ++r) m = fmaxf(m, a[(size_t)r * cols + c]);
    atomicMaxFloat(&colmax[c], m);
}

// ------------------------------------------------------------------------------------------
// one row per block: dot(a[row], b) with half2 accumulation per thread, float across threads
__global__ void hdot_half2(const half2 *__restrict__ a, const half2 *__restrict__ b,
                           float *__restrict__ out, int n2) {
    const half2 *ar = a + (size_t)blockIdx.x * n2;
    half2 acc = __float2half2_rn(0.0f);
    for (int i = threadIdx.x; i < n2; i += blockDim.x) acc = __hfma2(ar[i], b[i], acc);
    float v = __low2float(acc) + __high2float(acc);
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    __shared__ float partial[32];
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int w = 0; w < (blockDim.x >> 5); ++w) s += partial[w];
        out[blockIdx.x] = s;
    }
}

// ------------------------------------------------------------------------------------------
// MurmurHash3_x86_32 of one variable-length key per thread (the hashing step of GPU hash-table
// builds); keys are stored in fixed 16-byte slots with their lengths beside them
__device__ __forceinline__ unsigned int rotl32(unsigned int x, int r) { return (x << r) | (x >> (32 - r)); }

__device__ __forceinline__ unsigned int fmix32(unsigned int h) {
    h ^= h >> 16;
    h *= 0x85ebca6b;
    h ^= h >> 13;
    h *= 0xc2b2ae35;
    h ^= h >> 16;
    return h;
}

#define KEY_SLOT 16
__global__ void murmur3_hash_keys(const unsigned char *__restrict__ keys,
                                  const int *__restrict__ lens, unsigned int *__restrict__ hashes,
                                  int n, unsigned int seed) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned char *data = keys + (size_t)i * KEY_SLOT;
    const int len = lens[i];
    const int nblocks = len / 4;
    const unsigned int c1 = 0xcc9e2d51;
    const unsigned int c2 = 0x1b873593;
    unsigned int h1 = seed;

    for (int b = 0; b < nblocks; b++) {
        const unsigned char *p = data + b * 4;
        unsigned int k1 = (unsigned int)p[0] | ((unsigned int)p[1] << 8) |
                          ((unsigned int)p[2] << 16) | ((unsigned int)p[3] << 24);
        k1 *= c1;
        k1 = rotl32(k1, 15);
        k1 *= c2;
        h1 ^= k1;
        h1 = rotl32(h1, 13);
        h1 = h1 * 5 + 0xe6546b64;
    }

    const unsigned char *tail = data + nblocks * 4;
    unsigned int k1 = 0;
    switch (len & 3) {
        case 3:
            k1 ^= tail[2] << 16;
        case 2:
            k1 ^= tail[1] << 8;
        case 1:
            k1 ^= tail[0];
            k1 *= c1;
            k1 = rotl32(k1, 15);
            k1 *= c2;
            h1 ^= k1;
    }

    h1 ^= (unsigned int)len;
    hashes[i] = fmix32(h1);
}
