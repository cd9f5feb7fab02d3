// Row-wise softmax written with small C++ types that carry behaviour, as LLM training and
// inference code does: an online max/sum accumulator with member functions, a packed
// 4-wide value type (llm.c's Packed128 shape: static constexpr size, operator[], static
// factory functions) read and written over the float buffers with reinterpret_cast.
#include <cuda_runtime.h>

struct OnlineMax {
    float m;
    float s;
    __device__ void push(float x) {
        float nm = fmaxf(m, x);
        s = s * expf(m - nm) + expf(x - nm);
        m = nm;
    }
    __device__ void merge(const OnlineMax& other) {
        float nm = fmaxf(m, other.m);
        this->s = s * expf(m - nm) + other.s * expf(other.m - nm);
        this->m = nm;
    }
    __device__ float weight(float x) const { return expf(x - m) / s; }
};

template <class T>
struct alignas(16) Pack {
    static constexpr int size = 16 / sizeof(T);
    T payload[size];
    __device__ T& operator[](int i) { return payload[i]; }
    __device__ const T& operator[](int i) const { return payload[i]; }
    __device__ static Pack filled(T value) {
        Pack out;
        for (int k = 0; k < size; ++k) out.payload[k] = value;
        return out;
    }
    __device__ static Pack zeros() { return filled(T(0)); }
    __device__ Pack& scale(T k) {
        for (int j = 0; j < size; ++j) (*this)[j] *= k;
        return *this;
    }
};
using f4 = Pack<float>;

template <class T>
__device__ Pack<T> load_pack(const T* p) { return *reinterpret_cast<const Pack<T>*>(p); }
template <class T>
__device__ void store_pack(T* p, const Pack<T>& v) { *reinterpret_cast<Pack<T>*>(p) = v; }

// One warp per row; each lane walks the row four floats at a time.
__global__ void softmax_packed(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    OnlineMax acc{-INFINITY, 0.0f};
    for (int c = threadIdx.x * f4::size; c < cols; c += 32 * f4::size) {
        f4 v = load_pack(row + c);
        for (int k = 0; k < v.size; ++k) acc.push(v[k]);
    }
    for (int off = 16; off > 0; off /= 2) {
        OnlineMax other{__shfl_xor_sync(0xffffffff, acc.m, off),
                        __shfl_xor_sync(0xffffffff, acc.s, off)};
        acc.merge(other);
    }
    for (int c = threadIdx.x * f4::size; c < cols; c += 32 * f4::size) {
        f4 v = load_pack(row + c);
        f4 w = f4::zeros();
        for (int k = 0; k < f4::size; ++k) w[k] = acc.weight(v[k]);
        store_pack(out + c, w.scale(1.0f));
    }
}
