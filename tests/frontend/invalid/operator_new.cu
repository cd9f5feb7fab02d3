// expect: 3:16: operator new
__global__ void k(float* x) {
    float* p = new float[4];
}
