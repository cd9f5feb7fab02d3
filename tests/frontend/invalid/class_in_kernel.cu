// expect: 3:5: class definitions
__global__ void k(float* x) {
    class Acc { float v; };
}
