// The quantizer that writes q8_blocks.cu's weights: per block of 32 floats, the largest
// magnitude sets a half scale, and each value is stored as an int8 multiple of it; the
// output is raw bytes seen as an array of block structs.
#include <cuda_fp16.h>
#include <cstdint>

#define QK 32

typedef struct {
    half scale;
    int8_t q[QK];
} block_q8;

__global__ void quantize_q8(const float* __restrict__ x, void* __restrict__ vy, const int n) {
    const int ib = blockIdx.x * blockDim.x + threadIdx.x;
    if (ib >= n / QK) return;
    block_q8* y = (block_q8*)vy;
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = fmaxf(amax, fabsf(x[ib * QK + j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[ib].scale = __float2half(d);
    for (int j = 0; j < QK; ++j) y[ib].q[j] = (int8_t)roundf(x[ib * QK + j] * id);
}
