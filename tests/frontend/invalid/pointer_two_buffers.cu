// expect: 4:5: two buffers
__global__ void k(float* x, float* y) {
    float* p = x;
    p = y;
}
