// expect: 4:16: address of a local variable
__global__ void k(float* x) {
    float v = 1.0f;
    float* p = &v;
}
