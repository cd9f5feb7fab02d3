// expect: 3:5: atomicCAS not supported
__global__ void k(int* x) {
    atomicCAS(&x[0], 0, 1);
}
