// RMSNorm over the last axis, generic in the element type (float, half), accumulating in
// float: y = x / sqrt(mean(x^2) + eps) * w. One block of 128 threads per row.
#define THREADS 128

template <typename T>
__global__ void rmsnorm(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                        int cols, float eps) {
    __shared__ float partial[THREADS];
    int row = blockIdx.x;
    const T* in = x + row * cols;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        float v = (float)in[c];
        sum += v * v;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            partial[threadIdx.x] += partial[threadIdx.x + stride];
        }
        __syncthreads();
    }
    float scale = rsqrtf(partial[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        y[row * cols + c] = (T)((float)in[c] * scale * (float)w[c]);
    }
}
