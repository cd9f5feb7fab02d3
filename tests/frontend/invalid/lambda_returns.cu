// expect: 3:18: a lambda returning from several places needs its result type written
__global__ void k(float* x) {
    float y = [](float v) { if (v > 0.0f) return v; return -v; }(x[0]);
    x[0] = y;
}
