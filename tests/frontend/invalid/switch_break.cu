// expect: 5:26: break inside a case
__global__ void k(float* x, int n) {
    switch (n) {
    case 0:
        if (x[0] > 0.0f) break;
        x[0] = 1.0f;
        break;
    }
}
