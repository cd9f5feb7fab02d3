// expect: 2:1: must return void
__global__ int k(float* x) {
    return 1;
}
