// In-place scaling with the block size as a template parameter; the data starts as a
// constant from a host vector.
#include <cuda_runtime.h>
#include <vector>
#include <algorithm>

template <int BLOCK>
__global__ void scale_inplace(float* x, float s, int n) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) x[i] *= s;
}

int main() {
    constexpr int kBlock = 128;
    int n = 1000;
    std::vector<float> h(n);
    std::fill(h.begin(), h.end(), 1.5f);
    float* d_x;
    cudaMalloc(&d_x, n * sizeof(float));
    cudaMemcpy(d_x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    scale_inplace<kBlock><<<(n + kBlock - 1) / kBlock, kBlock>>>(d_x, 2.5f, n);
    return 0;
}
