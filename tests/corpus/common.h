// Helpers shared by several corpus files, included as "common.h" (read by kir's frontend
// from beside the source, and put in place by emulate-original).
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include "helper_cuda.h"  // not in the corpus: skipped like a missing project header

typedef float floatX;
#define WARP_SIZE 32
#define CEIL_DIV(M, N) (((M) + (N) - 1) / (N))

// A running maximum and the sum of exp(x - maximum) over the values seen (online softmax).
struct __align__(8) SoftmaxState {
    float maxval;
    float sum;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffff, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
    return v;
}

__device__ __forceinline__ SoftmaxState softmax_merge(SoftmaxState a, SoftmaxState b) {
    float m = fmaxf(a.maxval, b.maxval);
    SoftmaxState r;
    r.maxval = m;
    r.sum = a.sum * expf(a.maxval - m) + b.sum * expf(b.maxval - m);
    return r;
}

// Host-side helper, as real headers have them: skipped by kir and blanked for the emulator.
inline void check_launch(const char* what) {
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) printf("%s: %s\n", what, cudaGetErrorString(err));
}
