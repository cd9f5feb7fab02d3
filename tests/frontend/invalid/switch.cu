// expect: 3:5: switch statements
__global__ void k(float* x, int n) {
    switch (n) {
    case 0: x[0] = 1.0f;
    }
}
