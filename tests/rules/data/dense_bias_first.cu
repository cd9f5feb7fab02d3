// A dense layer whose sum starts from the bias, its operands walked through row pointers:
// y = x @ w^T + b, w stored [out_dim][in_dim], one output element per thread.
//
// Launch: grid (ceil(rows / 8), ceil(out_dim / 8)), block (8, 8).
#include <cuda_runtime.h>

__global__ void dense_bias_first(float* y, const float* x, const float* w, const float* b,
                                 int rows, int in_dim, int out_dim) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    int o = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && o < out_dim) {
        const float* xr = x + r * in_dim;
        const float* wo = w + o * in_dim;
        float s = b ? b[o] : 0.0f;
        for (int j = 0; j < in_dim; ++j) s += xr[j] * wo[j];
        y[r * out_dim + o] = s;
    }
}
