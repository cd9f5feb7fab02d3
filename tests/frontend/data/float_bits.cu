// Float bits as integers, as radix sorts and fast-math helpers use them: an order-preserving
// unsigned key per float and back, and an absolute value by clearing the sign bit.
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned order_key(float f) {
    const unsigned bits = __float_as_uint(f);
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float from_key(unsigned key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__global__ void float_keys(const float* __restrict__ x, unsigned* __restrict__ keys,
                           float* __restrict__ back, float* __restrict__ mag, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const unsigned k = order_key(x[i]);
        keys[i] = k;
        back[i] = from_key(k);
        mag[i] = __int_as_float(__float_as_int(x[i]) & 0x7fffffff);
    }
}
