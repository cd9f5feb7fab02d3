// expect: 4:5: 'continue' in a for loop
__global__ void k(float* x, int n) {
    int i;
    for (i = 0; i < n; i++) {
        if (x[i] > 0.0f) continue;
        x[i] = 0.0f;
    }
}
