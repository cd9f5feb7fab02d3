// expect: 3:12: struct member access '->next'
__global__ void k(float* x) {
    x[0] = x->next;
}
