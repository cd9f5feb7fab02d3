// expect: 4:5: expected ';'
__global__ void k(float* x) {
    float a = x[0]
    x[1] = a;
}
