// expect: 4:20: a pointer's address used beyond an alignment test
#include <cstdint>
__global__ void k(const float* x, float* y) {
    y[0] = (float)(reinterpret_cast<uintptr_t>(x) % 64);
}
