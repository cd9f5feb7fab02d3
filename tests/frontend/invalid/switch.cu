// expect: 4:27: break inside a case of a switch is supported only as the case's last
__global__ void k(float* x, int n) {
    switch (n) {
    case 0: if (x[0] > 0) break; x[0] = 1.0f;
    case 1: x[1] = 2.0f; break;
    }
}
