// expect: 4:20: end of input
__global__ void k(float* x) {
    if (x[0] > 0.0f) {
        x[0] = 1.0f;
