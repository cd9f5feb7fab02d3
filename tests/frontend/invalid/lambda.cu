// expect: 3:15: lambda expressions
__global__ void k(float* x) {
    float y = [](float v) { return v; }(x[0]);
}
