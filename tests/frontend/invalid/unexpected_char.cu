// expect: 3:17: unexpected character '@'
__global__ void k(float* x) {
    x[0] = 1.0f @ 2.0f;
}
