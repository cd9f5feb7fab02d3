// expect: 3:5: short integer types
__global__ void k(float* x) {
    short c = 3;
}
