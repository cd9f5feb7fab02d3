// expect: 3:12: unknown function 'blend'
__global__ void k(float* x) {
    x[0] = blend(x[1], x[2]);
}
