// expect: 3:20: unexpected '}'
__global__ void k(float* x) {
    x[0] = (1.0f + }
