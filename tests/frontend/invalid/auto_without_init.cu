// expect: 3:10: 'auto v' needs an initializer expression
__global__ void k(float* x) {
    auto v;
    x[0] = 1.0f;
}
