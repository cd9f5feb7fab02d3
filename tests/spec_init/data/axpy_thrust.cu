// y = a * x + y for any element type, launched on thrust vectors.
#include <thrust/device_vector.h>

template <typename T>
__global__ void axpy(const T* x, T* y, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    const int n = 777;
    thrust::device_vector<float> d_x(n, 1.0f), d_y(n, 0.25f);
    int threads = 256;
    int blocks = (n + threads - 1) / threads;
    axpy<float><<<blocks, threads>>>(thrust::raw_pointer_cast(d_x.data()),
                                     thrust::raw_pointer_cast(d_y.data()), 2.0f, n);
    cudaDeviceSynchronize();
    return 0;
}
