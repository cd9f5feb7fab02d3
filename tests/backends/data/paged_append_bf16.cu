#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

// One decode step appended to a paged bf16 key/value cache: sequence s owns page s and
// writes its new row at position pos[s] of it; pos < 0 marks an idle sequence, whose page
// is left as it was. Every other row of the cache keeps the caller's data.
__global__ void append_kv(const bf16* __restrict__ k_new, const bf16* __restrict__ v_new,
                          bf16* __restrict__ k_pages, bf16* __restrict__ v_pages,
                          const int* __restrict__ pos, int page_len, int width) {
    const int s = blockIdx.x;
    const int p = pos[s];
    if (p < 0) return;
    bf16* k_dst = k_pages + ((long)s * page_len + p) * width;
    bf16* v_dst = v_pages + ((long)s * page_len + p) * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        k_dst[i] = k_new[s * width + i];
        v_dst[i] = v_new[s * width + i];
    }
}
