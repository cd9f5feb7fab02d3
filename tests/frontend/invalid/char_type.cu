// expect: 3:5: char types
__global__ void k(float* x) {
    char c = 3;
}
