// C++ the kernels are written in: namespaces and qualified names, constexpr functions,
// scoped enums, using aliases, references, structs with array members, static_cast,
// std::numeric_limits, a pointer-alignment test through uintptr_t, atomicSub, assert.
#include <cstdint>
#include <limits>
#include <cassert>
#include <cuda/std/cmath>

namespace kernels {
namespace detail {

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
constexpr int kVec = 4;

enum class Reduce : int { Sum, Max };

using index_t = int64_t;

struct ArgMax {
    float value;
    int index;
};

__device__ __forceinline__ ArgMax better(const ArgMax& a, const ArgMax& b) {
    return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

template <typename T>
__device__ __forceinline__ void swap_if_greater(T& a, T& b) {
    if (a > b) {
        T t = a;
        a = b;
        b = t;
    }
}

}  // namespace detail

// one block per row: the index of the largest value (ties to the smallest index)
__global__ void argmax_rows(const float* __restrict__ x, int* __restrict__ out, int cols) {
    detail::ArgMax best{-std::numeric_limits<float>::infinity(), 0};
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        detail::ArgMax here = {x[blockIdx.x * cols + c], c};
        best = detail::better(best, here);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        detail::ArgMax other;
        other.value = __shfl_down_sync(0xffffffff, best.value, offset);
        other.index = __shfl_down_sync(0xffffffff, best.index, offset);
        best = detail::better(best, other);
    }
    if (threadIdx.x == 0) out[blockIdx.x] = best.index;
}

// vectorized copy-scale when the pointers are 16-byte aligned, scalar otherwise
__global__ void scale_aligned(const float* __restrict__ in, float* __restrict__ out, float s,
                              int n) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * detail::kVec;
    const bool aligned = reinterpret_cast<uintptr_t>(in) % 16 == 0 &&
                         (reinterpret_cast<uintptr_t>(out) & 15) == 0;
    if (aligned && i + detail::kVec <= n) {
        float4 v = reinterpret_cast<const float4*>(in)[i / detail::kVec];
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        reinterpret_cast<float4*>(out)[i / detail::kVec] = v;
    } else {
        for (int k = i; k < min(i + detail::kVec, n); ++k) out[k] = in[k] * s;
    }
}

// sort each pair in place through a reference helper, and count the swaps down from a budget
__global__ void sort_pairs(float* pairs, int* budget, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = pairs[2 * i], b = pairs[2 * i + 1];
    if (a > b) atomicSub(budget, 1);
    detail::swap_if_greater(a, b);
    pairs[2 * i] = a;
    pairs[2 * i + 1] = b;
}

// rows reduced by sum or by max, chosen by a scoped enum; sizes from constexpr helpers
template <detail::Reduce kOp>
__global__ void reduce_rows(const float* x, float* out, int cols) {
    constexpr int kThreads = 32;
    static_assert(kThreads == 32, "one warp per row");
    const detail::index_t row = blockIdx.x;
    float acc = kOp == detail::Reduce::Sum ? 0.0f : -INFINITY;
    const int steps = detail::ceil_div(cols, kThreads);
    for (int s = 0; s < steps; ++s) {
        const int c = s * kThreads + static_cast<int>(threadIdx.x);
        if (c < cols) {
            const float v = x[row * cols + c];
            acc = kOp == detail::Reduce::Sum ? acc + v : cuda::std::fmax(acc, v);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float o = __shfl_xor_sync(0xffffffff, acc, offset);
        acc = kOp == detail::Reduce::Sum ? acc + o : std::max(acc, o);
    }
    if (threadIdx.x == 0) out[row] = acc;
}

// a struct with an array member, filled and folded per thread
struct Window {
    float taps[3];
    float gain;
};

__device__ float apply(const Window& w, const float* x, int i, int n) {
    float acc = 0.f;
    for (int k = 0; k < 3; ++k) {
        const int j = i + k - 1;
        if (j >= 0 && j < n) acc += w.taps[k] * x[j];
    }
    return acc * w.gain;
}

__global__ void fir3(const float* x, float* y, int n, float gain = 2.0f) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(gain > 0.0f);
    if (i >= n) return;
    Window w;
    w.taps[0] = 0.25f;
    w.taps[1] = 0.5f;
    w.taps[2] = 0.25f;
    w.gain = gain;
    y[i] = apply(w, x, i, n);
}

}  // namespace kernels
