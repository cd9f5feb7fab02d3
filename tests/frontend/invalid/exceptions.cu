// expect: 3:22: exceptions
__global__ void k(float* x) {
    if (x[0] < 0.0f) throw 1;
}
