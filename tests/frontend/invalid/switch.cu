// expect: 4:5: falling through
__global__ void k(float* x, int n) {
    switch (n) {
    case 0: x[0] = 1.0f;
    case 1: x[1] = 2.0f; break;
    }
}
