// C math and CUDA's integer bit intrinsics as numerics and warp-vote code use them: angle
// and remainder functions, NaN/Inf tests, popcount of a ballot, leading zeros, first set bit.
#include <cuda_runtime.h>
#include <math.h>

__global__ void math_bits(const float* __restrict__ x, const unsigned* __restrict__ u,
                          float* __restrict__ f, int* __restrict__ bits, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    const float w = 0.5f * tanhf(v);  // in (-0.5, 0.5): asin and acos are defined
    f[6 * i + 0] = tanf(w) + atanf(v);
    f[6 * i + 1] = asinf(w) + acosf(w);
    f[6 * i + 2] = atan2f(v, 1.5f) + log10f(fabsf(v) + 1.0f);
    f[6 * i + 3] = fmodf(v * 7.0f, 2.5f) + copysignf(1.0f, v);
    const float q = v > 1.0f ? INFINITY : (v < -1.0f ? NAN : v);
    f[6 * i + 4] = isnan(q) ? 1.0f : (isinf(q) ? 2.0f : 0.0f);
    const unsigned ballot = __ballot_sync(0xffffffffu, v > 0.0f);
    f[6 * i + 5] = (float)__popc(ballot);
    const unsigned b = u[i];
    bits[3 * i + 0] = __popc(b);
    bits[3 * i + 1] = __clz((int)b);
    bits[3 * i + 2] = __ffs((int)b);
}
