// expect: 4:14: pointer difference
__global__ void k(float* x, int* out) {
    float* p = x + 4;
    out[0] = p - x;
}
