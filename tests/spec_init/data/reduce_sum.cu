// Sum reduction: each block reduces its part in dynamic shared memory, thread 0 adds the
// block's sum to the total with atomicAdd. The total starts at zero.
#include <cuda_runtime.h>
#include <vector>
#include <random>

__global__ void block_sum(const float* in, float* total, int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(total, sdata[0]);
}

int main() {
    const int n = 10000;
    const int threads = 128;
    const int blocks = (n + threads * 2 - 1) / (threads * 2);
    std::vector<float> h_in(n);
    for (int i = 0; i < n; ++i) h_in[i] = rand() / (float)RAND_MAX;
    float *d_in, *d_total;
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_total, sizeof(float));
    cudaMemcpy(d_in, h_in.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(d_total, 0, sizeof(float));
    block_sum<<<blocks, threads, threads * sizeof(float)>>>(d_in, d_total, n);
    return 0;
}
