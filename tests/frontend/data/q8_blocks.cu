// A GEMV over int8-quantized weights stored as blocks of 32 quants with a half scale, as
// quantized inference engines keep them: the kernel takes the weights as `const void*`, walks
// rows in bytes through `(const char*)`, views them as an array of block structs and hands
// `&w[ib]` to a helper that casts it back from `const void*`.
#include <cuda_fp16.h>
#include <cstdint>

#define QK 32

struct block_q8 {
    half scale;
    int8_t q[QK];
};  // 34 bytes: no padding, a half's alignment

static __device__ __forceinline__ float block_dot(const void* vb, const float* x) {
    const block_q8* b = static_cast<const block_q8*>(vb);
    float s = 0.0f;
#pragma unroll 8
    for (int j = 0; j < QK; ++j) {
        s += b->q[j] * x[j];
    }
    return s * __half2float(b->scale);
}

__global__ void q8_gemv(const void* __restrict__ weights, const float* __restrict__ x,
                        float* __restrict__ y, const int rows, const int cols) {
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) {
        return;
    }
    const int nblocks = cols / QK;
    const block_q8* w = (const block_q8*)((const char*)weights +
                                          (size_t)row * nblocks * sizeof(block_q8));
    float acc = 0.0f;
    for (int ib = threadIdx.x; ib < nblocks; ib += 32) {
        acc += block_dot(&w[ib], x + ib * QK);
    }
    for (int o = 16; o > 0; o >>= 1) {
        acc += __shfl_xor_sync(0xffffffff, acc, o);
    }
    if (threadIdx.x == 0) {
        y[row] = acc;
    }
}

void launch(const void* weights, const float* x, float* y, int rows, int cols) {
    q8_gemv<<<(rows + 3) / 4, dim3(32, 4)>>>(weights, x, y, rows, cols);
}
