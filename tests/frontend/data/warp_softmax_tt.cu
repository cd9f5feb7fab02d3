// Warp-per-row softmax in the style of inference-engine softmax headers: reductions passed
// as template template parameters, __inline__ helpers, `if constexpr` on a template flag,
// compile-time sizes from constexpr globals.
#include <cuda_runtime.h>
#include <math_constants.h>

constexpr int kWarpSize = 32;

template <typename T>
struct SumOp {
    __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a + b; }
};
template <typename T>
struct MaxOp {
    __device__ __forceinline__ T operator()(const T& a, const T& b) const { return max(a, b); }
};

template <template <typename> class ReductionOp, typename T, int thread_group_width = kWarpSize>
__inline__ __device__ T WarpAllReduce(T val) {
#pragma unroll
    for (int mask = thread_group_width / 2; mask > 0; mask /= 2) {
        val = ReductionOp<T>()(val, __shfl_xor_sync(0xffffffff, val, mask, thread_group_width));
    }
    return val;
}

template <typename T, int pack, bool log_softmax>
__global__ void __launch_bounds__(128) softmax_warp(const T* src, T* dst, const int rows, const int cols) {
    const int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    const T* x = src + (size_t)row * cols;
    T* y = dst + (size_t)row * cols;
    T thread_max = -CUDART_INF_F;
    for (int c = threadIdx.x * pack; c < cols; c += kWarpSize * pack) {
#pragma unroll
        for (int k = 0; k < pack; ++k) thread_max = max(thread_max, x[c + k]);
    }
    const T row_max = WarpAllReduce<MaxOp, T>(thread_max);
    T thread_sum = 0;
    for (int c = threadIdx.x * pack; c < cols; c += kWarpSize * pack) {
#pragma unroll
        for (int k = 0; k < pack; ++k) thread_sum += exp(x[c + k] - row_max);
    }
    const T row_sum = WarpAllReduce<SumOp, T>(thread_sum);
    for (int c = threadIdx.x * pack; c < cols; c += kWarpSize * pack) {
#pragma unroll
        for (int k = 0; k < pack; ++k) {
            if constexpr (log_softmax) {
                y[c + k] = (x[c + k] - row_max) - log(row_sum);
            } else {
                y[c + k] = exp(x[c + k] - row_max) / row_sum;
            }
        }
    }
}
