// Accumulate per-row gradient contributions into an existing gradient buffer.
__global__ void grad_acc(const float* dy, const int* idx, float* dW, int n, int d) {
    int i = blockIdx.x;
    int j = threadIdx.x;
    if (i < n && j < d) {
        atomicAdd(&dW[idx[i] * d + j], dy[i * d + j]);
    }
}
