// expect: 3:5: const buffer 'x'
__global__ void k(const float* x) {
    x[0] = 1.0f;
}
