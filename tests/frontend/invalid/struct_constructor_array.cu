// expect: 4:27: initializer of member 'sum' (an array, a pointer or several values) not supported
struct Acc {
    float sum[2];
    __device__ Acc() : sum{0.0f, 0.0f} {}
};
__global__ void k(float* x) {
    Acc a;
    x[0] = a.sum[0];
}
