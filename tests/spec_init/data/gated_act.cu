// A gated activation whose activation is a function template parameter, launched by host
// code that names it (as inference engines' launch macros do).
#include <cuda_runtime.h>

namespace ops {
template <typename T>
__device__ __forceinline__ T silu(const T& x) { return x / (1.0f + expf(-x)); }

template <typename scalar_t, scalar_t (*ACT)(const scalar_t&)>
__global__ void gated(scalar_t* out, const scalar_t* in, int d) {
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        out[blockIdx.x * d + i] = ACT(in[blockIdx.x * 2 * d + i]) * in[blockIdx.x * 2 * d + d + i];
}
}  // namespace ops

void run_gated(float* out, const float* in, int tokens, int d) {
    ops::gated<float, ops::silu<float>><<<tokens, 256>>>(out, in, d);
}

int main() {
    const int tokens = 8, d = 512;
    float *out, *in;
    cudaMalloc(&out, tokens * d * sizeof(float));
    cudaMalloc(&in, tokens * 2 * d * sizeof(float));
    run_gated(out, in, tokens, d);
    return 0;
}
