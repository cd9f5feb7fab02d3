// Per-channel statistics for quantization calibration: every element folds into its
// channel's running max |x|, min and sum. CUDA has no float atomicMax / atomicMin, so the
// helpers build them (and a sum) from atomicCAS retry loops, each in a style found in
// real code: int bits and fmaxf, unsigned bits and a ternary, reinterpret_cast and a sum.
__device__ __forceinline__ float atomicMaxFloat(float* addr, float value) {
    int* addr_as_int = (int*)addr;
    int old = *addr_as_int, assumed;
    do {
        assumed = old;
        old = atomicCAS(addr_as_int, assumed,
                        __float_as_int(fmaxf(value, __int_as_float(assumed))));
    } while (assumed != old);
    return __int_as_float(old);
}

static __device__ __forceinline__ void atomic_min_f(float *addr, float value) {
  unsigned int* p = reinterpret_cast<unsigned int*>(addr);
  unsigned int old = *p;
  unsigned int assumed;
  do { assumed = old;
       old = ::atomicCAS(p, assumed, __float_as_uint(value < __uint_as_float(assumed)
                                                     ? value : __uint_as_float(assumed)));
  } while (old != assumed);
}

__device__ float atomic_add_cas(float* address, float val) {
    auto* bits = reinterpret_cast<unsigned int*>(address);
    unsigned int old = *bits, assumed;
    do {
        assumed = old;
        old = atomicCAS(bits, assumed, __float_as_uint(__uint_as_float(assumed) + val));
    } while (assumed != old);  // integer comparison: no hang on NaN
    return __uint_as_float(old);
}

__global__ void channel_stats(const float* __restrict__ x, float* amax, float* vmin,
                              float* total, int rows, int channels) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * channels;
         i += gridDim.x * blockDim.x) {
        int c = i % channels;
        float v = x[i];
        atomicMaxFloat(&amax[c], fabsf(v));
        atomic_min_f(vmin + c, v);
        atomic_add_cas(&total[c], v);
    }
}
