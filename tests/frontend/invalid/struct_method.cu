// expect: 4:24: member functions of struct 'Acc' not supported
struct Acc {
    float sum;
    __device__ void add(float v) { sum += v; }
};
__global__ void k(float* x) {
    Acc a;
    a.sum = 0.0f;
    x[0] = a.sum;
}
