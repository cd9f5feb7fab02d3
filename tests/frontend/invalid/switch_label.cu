// expect: 5:10: case 1 appears twice
__global__ void k(float* x, int n) {
    switch (n) {
    case 1: x[0] = 1.0f; break;
    case 1: x[1] = 2.0f; break;
    }
}
