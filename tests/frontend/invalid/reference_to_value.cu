// expect: 3:16: reference 'r' must be bound to a variable or an element of a
__global__ void k(float* x) {
    float& r = x[0] + 1.0f;
    r = 2.0f;
}
