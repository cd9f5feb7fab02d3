// expect: 4:5: goto
__global__ void k(float* x) {
    x[0] = 1.0f;
    goto done;
}
