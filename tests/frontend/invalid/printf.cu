// expect: 4:5: printf not supported
#include <cstdio>
__global__ void k(float* x) {
    printf("%f\n", x[0]);
}
