// LLM-training-style 128-bit packs: a pack type built from the bits of an int4 with memcpy
// (and giving them back the same way), read and written through reinterpret_cast<int4*>
// with streaming-cache loads and stores, over bf16 or float buffers; a float4 moved with
// memcpy; a float's sign bit read through memcpy into an unsigned int; a float4 read over
// half data, its halves seen through a pointer to it.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>

template <typename E>
struct alignas(16) Pack128 {
    static constexpr int count = sizeof(int4) / sizeof(E);
    E lane[count];

    Pack128() = default;
    __device__ explicit Pack128(int4 raw) {
        static_assert(sizeof(raw) == sizeof(lane), "a pack is 16 bytes");
        memcpy(&lane, &raw, sizeof(raw));
    }
    __device__ E& operator[](int i) { return lane[i]; }
    __device__ const E& operator[](int i) const { return lane[i]; }
    __device__ int4 raw() const {
        int4 bits;
        memcpy(&bits, &lane, sizeof(bits));
        return bits;
    }
};

template <typename E>
__device__ Pack128<E> load_pack(const E* p) {
    return Pack128<E>{*reinterpret_cast<const int4*>(p)};
}
template <typename E>
__device__ Pack128<E> load_pack_streaming(const E* p) {
    return Pack128<E>(__ldcs(reinterpret_cast<const int4*>(p)));
}
template <typename E>
__device__ void store_pack_streaming(E* p, Pack128<E> v) {
    __stcs(reinterpret_cast<int4*>(p), v.raw());
}
template <typename E>
__device__ void store_pack(E* p, const Pack128<E>& v) {
    *reinterpret_cast<int4*>(p) = v.raw();
}

// out = gelu(a + bias[column]), a grid-stride loop over packs of a row-major (R, C) array.
template <typename E>
__global__ void bias_gelu_packed(E* __restrict__ out, const E* __restrict__ a,
                                 const E* __restrict__ bias, int n, int cols) {
    using pack_t = Pack128<E>;
    int stride = gridDim.x * blockDim.x * pack_t::count;
    for (int i = (blockIdx.x * blockDim.x + threadIdx.x) * pack_t::count; i < n; i += stride) {
        pack_t x = load_pack_streaming(a + i);
        pack_t b = load_pack(bias + i % cols);
        pack_t y;
        for (int k = 0; k < pack_t::count; ++k) {
            float v = (float)x[k] + (float)b[k];
            y[k] = (E)(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
        }
        if (i % 2 == 0) store_pack_streaming(out + i, y);
        else store_pack(out + i, y);
    }
}

// y = |x| * s, four floats at a time moved with memcpy; the sign taken from the bits.
__global__ void abs_scale_memcpy(float* y, const float* x, int n4, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v;
    memcpy(&v, x + 4 * i, sizeof(v));
    float w[4] = {v.x, v.y, v.z, v.w};
    for (int k = 0; k < 4; ++k) {
        unsigned int bits;
        memcpy(&bits, &w[k], sizeof(bits));
        bits &= 0x7fffffffu;
        memcpy(&w[k], &bits, sizeof(float));
        w[k] *= s;
    }
    memcpy(y + 4 * i, w, sizeof(w));
}

// Inference-engine style: a float4 read over half data, its eight halves seen through a
// pointer to it, scaled in place and written back as one float4.
__global__ void half_scale_float4(__half* y, const __half* x, int n8, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    float4 v = reinterpret_cast<const float4*>(x)[i];
    __half* h = reinterpret_cast<__half*>(&v);
#pragma unroll
    for (int k = 0; k < 8; ++k) h[k] = __float2half(__half2float(h[k]) * s);
    reinterpret_cast<float4*>(y)[i] = v;
}
