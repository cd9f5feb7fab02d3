// Warp helpers reading the lane's special registers in PTX, as PyTorch's and inference
// engines' reductions do (written for kir's tests): a histogram whose lanes holding the
// same key elect one adder by their rank among those lanes (__match_any_sync, the mask of
// the lanes below), and each lane's index and masks written out.
__device__ __forceinline__ int getLaneId() {
    int laneId;
    asm("mov.s32 %0, %%laneid;" : "=r"(laneId));
    return laneId;
}

__device__ __forceinline__ unsigned getLaneMaskLt() {
    unsigned mask;
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
    return mask;
}

__global__ void binned(const int* __restrict__ keys, int* __restrict__ bins,
                       unsigned* __restrict__ lanes, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int key = i < n ? keys[i] : -1;
    unsigned peers = __match_any_sync(0xffffffff, key);
    unsigned rank = __popc(peers & getLaneMaskLt());
    if (key >= 0 && rank == 0) atomicAdd(&bins[key], __popc(peers));
    unsigned ge, gt, le, eq;
    asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    asm("mov.u32 %0, %%lanemask_gt;" : "=r"(gt));
    asm("mov.u32 %0, %%lanemask_le;" : "=r"(le));
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
    if (i < n) {
        lanes[5 * i] = getLaneId();
        lanes[5 * i + 1] = ge;
        lanes[5 * i + 2] = gt;
        lanes[5 * i + 3] = le;
        lanes[5 * i + 4] = eq;
    }
}
