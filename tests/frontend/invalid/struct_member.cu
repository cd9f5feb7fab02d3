// expect: 3:12: struct member access '.value'
__global__ void k(float* x, int n) {
    x[0] = n.value;
}
