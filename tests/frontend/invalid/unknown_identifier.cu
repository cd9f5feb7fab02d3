// expect: 3:19: unknown identifier 'scale'
__global__ void k(float* x) {
    x[0] = x[1] * scale;
}
