// expect: 4:24: without side effects
__global__ void k(float* x) {
    unsigned m = 0xffffffffu;
    x[0] = __shfl_sync(m++, x[0], 0);
}
