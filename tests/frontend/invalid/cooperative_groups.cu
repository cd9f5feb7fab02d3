// expect: 4:5: cooperative groups
#include <cooperative_groups.h>
__global__ void k(float* x) {
    cooperative_groups::thread_block g = cooperative_groups::this_thread_block();
}
