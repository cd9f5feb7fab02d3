// Ampere warp intrinsics as aggregation kernels use them: warp-aggregated counting by key
// (__match_any_sync: one atomic per distinct key a warp, by its lowest lane), warp-wide
// reductions of integers and bits, and a uniformity test (__match_all_sync). n is a whole
// number of warps: every lane is live, as the full masks say.
__global__ void warp_sync_ops(const int* __restrict__ keys, const unsigned* __restrict__ bits,
                              int* counts, unsigned* peers_out, int* sums, int* mins,
                              unsigned* umax, unsigned* ors, unsigned* ands, unsigned* xors,
                              unsigned* all_mask, int* all_same, unsigned* group_sums) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x & 31;
    const int key = keys[i];
    const unsigned peers = __match_any_sync(0xffffffff, key);
    if (lane == __ffs(peers) - 1) {
        atomicAdd(&counts[key], __popc(peers));
    }
    peers_out[i] = peers;
    group_sums[i] = __reduce_add_sync(peers, bits[i]);  // over the lanes sharing the key
    sums[i] = __reduce_add_sync(0xffffffff, key);
    mins[i] = __reduce_min_sync(0xffffffff, key - 5);
    umax[i] = __reduce_max_sync(0xffffffffu, bits[i]);
    ors[i] = __reduce_or_sync(0xffffffff, bits[i] >> 7);
    ands[i] = __reduce_and_sync(0xffffffff, bits[i] | 0x0f0f0f0fu);
    xors[i] = __reduce_xor_sync(0xffffffff, bits[i]);
    int same = 0;
    all_mask[i] = __match_all_sync(0xffffffff, (i >> 5) % 3 == 0 ? 7 : key, &same);
    all_same[i] = same;
}
