// Layer norm forward as LLM training code writes it: bf16 activations and parameters, one
// warp a row through cooperative groups, 128-bit packs read with streaming loads (a pack
// type built from an int4's bits with memcpy), f32 statistics saved for the backward pass.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <string.h>

namespace cg = cooperative_groups;

#if defined(LN_FP32)
typedef float act_t;
#else
typedef __nv_bfloat16 act_t;
#endif

template <class E>
struct alignas(16) Packed16B {
    static constexpr int n = sizeof(int4) / sizeof(E);
    E v[n];
    Packed16B() = default;
    __device__ explicit Packed16B(int4 bits) { memcpy(&v, &bits, sizeof(bits)); }
    __device__ E& operator[](int i) { return v[i]; }
    __device__ const E& operator[](int i) const { return v[i]; }
    __device__ int4 bits() const {
        int4 out;
        memcpy(&out, &v, sizeof(out));
        return out;
    }
};
typedef Packed16B<act_t> pack_t;

template <class E>
__device__ Packed16B<E> load_cs(const E* p) {
    return Packed16B<E>(__ldcs(reinterpret_cast<const int4*>(p)));
}
template <class E>
__device__ Packed16B<E> load(const E* p) {
    return Packed16B<E>(*reinterpret_cast<const int4*>(p));
}
template <class E>
__device__ void store_cs(E* p, Packed16B<E> x) {
    __stcs(reinterpret_cast<int4*>(p), x.bits());
}

__global__ void layernorm_forward_packed(act_t* __restrict__ out, float* __restrict__ mean,
                                         float* __restrict__ rstd,
                                         const act_t* __restrict__ inp,
                                         const act_t* __restrict__ weight,
                                         const act_t* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= N) return;
    const act_t* x = inp + row * C;

    float sum = 0.0f;
    for (int c = warp.thread_rank() * pack_t::n; c < C; c += warp.size() * pack_t::n) {
        const pack_t in = load_cs(x + c);
        for (int k = 0; k < pack_t::n; ++k) sum += (float)in[k];
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float m = sum / C;

    float var = 0.0f;
    for (int c = warp.thread_rank() * pack_t::n; c < C; c += warp.size() * pack_t::n) {
        const pack_t in = load_cs(x + c);
        for (int k = 0; k < pack_t::n; ++k) {
            float d = (float)in[k] - m;
            var += d * d;
        }
    }
    var = cg::reduce(warp, var, cg::plus<float>{});
    float s = rsqrtf(var / C + 1e-5f);

    act_t* o = out + row * C;
    for (int c = warp.thread_rank() * pack_t::n; c < C; c += warp.size() * pack_t::n) {
        const pack_t in = load_cs(x + c);
        const pack_t w = load(weight + c);
        const pack_t b = load(bias + c);
        pack_t y;
        for (int k = 0; k < pack_t::n; ++k) {
            y[k] = (act_t)(s * ((float)in[k] - m) * (float)w[k] + (float)b[k]);
        }
        store_cs(o + c, y);
    }
    if (warp.thread_rank() == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}
