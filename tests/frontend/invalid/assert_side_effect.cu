// expect: 4:12: assert whose condition has side effects not supported
__global__ void k(float* x, int n) {
    int i = 0;
    assert(i++ < n);
    x[0] = i;
}
