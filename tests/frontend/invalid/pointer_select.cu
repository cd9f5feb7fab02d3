// expect: 3:16: depends on a condition
__global__ void k(float* x, float* y, int n) {
    float* p = n > 0 ? x : y;
    __syncthreads();
    p[threadIdx.x] = 0.0f;
}
