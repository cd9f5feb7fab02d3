// Attention over half-precision activations as inference engines store them, computed in
// float: a warp per query row, each lane holding two of the 64 head dimensions (a __half2
// read), dot products combined by shuffles, the online softmax over every key, heads
// [num_heads, seq, 64] from a batch-head index on blockIdx.y.
#include <cuda_fp16.h>

#define HEAD_DIM 64

__inline__ __device__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void attention_half_warp(const __half* __restrict__ q, const __half* __restrict__ k,
                                    const __half* __restrict__ v, __half* __restrict__ o,
                                    int seq, float scale) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= seq) return;
    const size_t head = (size_t)blockIdx.y * seq * HEAD_DIM;
    const __half2 qh = reinterpret_cast<const __half2*>(q + head + (size_t)row * HEAD_DIM)[lane];
    const float q0 = __low2float(qh), q1 = __high2float(qh);
    float m = -INFINITY, l = 0.0f, a0 = 0.0f, a1 = 0.0f;
    for (int j = 0; j < seq; ++j) {
        const __half2 kh = reinterpret_cast<const __half2*>(k + head + (size_t)j * HEAD_DIM)[lane];
        const float s = warp_sum(q0 * __low2float(kh) + q1 * __high2float(kh)) * scale;
        const float m_new = fmaxf(m, s);
        const float c = __expf(m - m_new), p = __expf(s - m_new);
        const __half2 vh = reinterpret_cast<const __half2*>(v + head + (size_t)j * HEAD_DIM)[lane];
        a0 = a0 * c + p * __low2float(vh);
        a1 = a1 * c + p * __high2float(vh);
        l = l * c + p;
        m = m_new;
    }
    reinterpret_cast<__half2*>(o + head + (size_t)row * HEAD_DIM)[lane] =
        __floats2half2_rn(a0 / l, a1 / l);
}
