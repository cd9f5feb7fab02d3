// expect: 3:5: long double
__global__ void k(float* x) {
    long double c = 3;
}
