// expect: 6:12: cg::reduce over a whole block not supported
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(float* x) {
    cg::thread_block block = cg::this_thread_block();
    x[0] = cg::reduce(block, x[threadIdx.x], cg::plus<float>());
}
