// expect: 3:12: texture fetches
__global__ void k(float* x, int t) {
    x[0] = tex1Dfetch(t, 0);
}
