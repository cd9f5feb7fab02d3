// expect: 7:9: struct Acc has a constructor, which kir does not run
struct Acc {
    float sum;
    __device__ Acc() { sum = 0.0f; }
};
__global__ void k(float* x) {
    Acc a;
    x[0] = a.sum;
}
