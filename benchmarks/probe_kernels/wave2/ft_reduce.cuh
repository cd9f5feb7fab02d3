// FasterTransformer-style reduction and conversion helpers (written for this probe)
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <float.h>

#define FINAL_MASK 0xffffffff

namespace fastertransformer {

template<typename T>
inline __device__ T ldg(const T* val) { return __ldg(val); }

template<typename T>
inline __device__ T add(T a, T b) { return a + b; }

template<>
inline __device__ half2 add(half2 a, half2 b) { return __hadd2(a, b); }

template<typename T_OUT, typename T_IN>
__device__ inline T_OUT cuda_cast(T_IN val) { return val; }

template<>
__device__ inline float2 cuda_cast<float2, half2>(half2 val) { return __half22float2(val); }

template<>
__device__ inline half2 cuda_cast<half2, float2>(float2 val) { return __float22half2_rn(val); }

template<>
__device__ inline float cuda_cast<float, half>(half val) { return __half2float(val); }

template<>
__device__ inline half cuda_cast<half, float>(float val) { return __float2half(val); }

template<>
__device__ inline half2 cuda_cast<half2, float>(float val) { return __float2half2_rn(val); }

template<typename T>
struct num_elems;
template<> struct num_elems<float>  { static constexpr int value = 1; };
template<> struct num_elems<float2> { static constexpr int value = 2; };
template<> struct num_elems<half2>  { static constexpr int value = 2; };

template<typename T>
__inline__ __device__ T warpReduceSum(T val)
{
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1)
        val = add(val, __shfl_xor_sync(FINAL_MASK, val, mask, 32));
    return val;
}

/* Calculate the sum of all elements in a block */
template<typename T>
__inline__ __device__ T blockReduceSum(T val)
{
    static __shared__ T shared[32];
    int lane = threadIdx.x & 0x1f;
    int wid  = threadIdx.x >> 5;

    val = warpReduceSum<T>(val);

    if (lane == 0)
        shared[wid] = val;

    __syncthreads();

    // Modify from blockDim.x << 5 to blockDim.x / 32. to prevent
    // blockDim.x is not divided by 32
    val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : (T)(0.0f);
    val = warpReduceSum<T>(val);

    return val;
}

template<typename T>
__inline__ __device__ T warpReduceMax(T val)
{
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1)
        val = max(val, __shfl_xor_sync(FINAL_MASK, val, mask, 32));
    return val;
}

/* Calculate the maximum of all elements in a block */
template<typename T>
__inline__ __device__ T blockReduceMax(T val)
{
    static __shared__ T shared[32];
    int lane = threadIdx.x & 0x1f;  // in-warp idx
    int wid  = threadIdx.x >> 5;    // warp idx

    val = warpReduceMax(val);  // get maxx in each warp

    if (lane == 0)  // record in-warp maxx by warp Idx
        shared[wid] = val;

    __syncthreads();

    // Modify from blockDim.x << 5 to blockDim.x / 32. to prevent
    // blockDim.x is not divided by 32
    val = (threadIdx.x < (blockDim.x / 32.f)) ? shared[lane] : -1e20f;
    val = warpReduceMax(val);

    return val;
}

}  // namespace fastertransformer
