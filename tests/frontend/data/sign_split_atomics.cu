// Column ranges through float atomics built from integer ones on the value's bits (written
// for kir's tests): max in the ternary style of inference engines' quantizers, min as an
// if/else over reinterpret_cast, both over a block-stride loop after the block set every
// column's start (below every value for the max, above for the min, so both the signed and
// the unsigned branch decide).
#include <cuda_runtime.h>

__device__ __forceinline__ float atomicMaxFloat(float* addr, float value) {
  float old;
  old = (value >= 0) ? __int_as_float(atomicMax((int*)addr, __float_as_int(value)))
                     : __uint_as_float(atomicMin((unsigned int*)addr, __float_as_uint(value)));
  return old;
}

__device__ void atomic_min_float(float* target, float v) {
  if (!signbit(v)) {
    atomicMin(reinterpret_cast<int*>(target), __float_as_int(v));
  } else {
    atomicMax(reinterpret_cast<unsigned int*>(target), __float_as_uint(v));
  }
}

__global__ void column_range(const float* __restrict__ x, float* colmax, float* colmin,
                             int rows, int cols) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    colmax[c] = -3.0f;
    colmin[c] = 3.0f;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int c = i % cols;
    atomicMaxFloat(colmax + c, x[i]);
    atomic_min_float(&colmin[c], x[i]);
  }
}
