// expect: 3:15: variable-length arrays
__global__ void k(float* x, int n) {
    float buf[n];
    buf[0] = x[0];
}
