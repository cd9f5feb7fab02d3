// expect: 5:17: tiles of 64 threads not supported
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(float* x) {
    auto tile = cg::tiled_partition<64>(cg::this_thread_block());
    x[0] = tile.thread_rank();
}
