// expect: 5:5: grid group 'sync()' not supported
#include <cooperative_groups.h>
__global__ void k(float* x) {
    cooperative_groups::grid_group g = cooperative_groups::this_grid();
    g.sync();
}
