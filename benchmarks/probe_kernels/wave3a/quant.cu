// Activation quantization kernels in the style of vLLM / SGLang / TensorRT-LLM (written for
// this probe): dynamic per-token int8 with an asymmetric zero point (min and max through one
// cub::BlockReduce's storage), a per-tensor absmax through shared memory and a float atomic
// max built from integer atomics, static fp8 (e4m3) quantization with <cuda_fp8.h>, per-token
// group quantization with 16-lane shuffles, and the dequantization after an int8 GEMM.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
// built as vLLM builds it: nvcc -std=c++17 --expt-relaxed-constexpr
#include <cub/cub.cuh>
#include <cstdint>
#include <cmath>
#include <algorithm>
#include <limits>

namespace quant {

static inline __device__ int32_t float_to_int32_rn(float x) {
  // clamp to the int32 range first: a float above it is UB for the conversion
  static constexpr auto i32_min = static_cast<float>(std::numeric_limits<int32_t>::min());
  static constexpr auto i32_max = static_cast<float>(std::numeric_limits<int32_t>::max());
  float dst = std::nearbyint(x);
  dst = std::clamp(dst, i32_min, i32_max);
  return static_cast<int32_t>(dst);
}

static inline __device__ int8_t int32_to_int8(int32_t x) {
  static constexpr auto i8_min = static_cast<int32_t>(std::numeric_limits<int8_t>::min());
  static constexpr auto i8_max = static_cast<int32_t>(std::numeric_limits<int8_t>::max());
  int32_t dst = std::clamp(x, i8_min, i8_max);
  return static_cast<int8_t>(dst);
}

static inline __device__ int8_t float_to_int8_rn(float x) {
  uint32_t dst;
  asm volatile("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(dst) : "f"(x));
  return reinterpret_cast<const int8_t&>(dst);
}

// Per token: scale = (max - min) / 255, azp = round(-128 - min / scale), q = round(x / scale) + azp
template <typename scalar_t, typename scale_type, typename azp_type>
__global__ void dynamic_scaled_int8_azp_quant_kernel(const scalar_t* __restrict__ input,
                                                     int8_t* __restrict__ out,
                                                     scale_type* __restrict__ scale,
                                                     azp_type* __restrict__ azp,
                                                     const int hidden_size) {
  const int64_t token_idx = blockIdx.x;
  const scalar_t* row_in = input + token_idx * hidden_size;
  int8_t* row_out = out + token_idx * hidden_size;

  float min_val = std::numeric_limits<float>::max();
  float max_val = std::numeric_limits<float>::lowest();
  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    const float v = static_cast<float>(row_in[i]);
    max_val = std::max(max_val, v);
    min_val = std::min(min_val, v);
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  max_val = BlockReduce(reduce_storage).Reduce(max_val, cuda::maximum<>{}, blockDim.x);
  __syncthreads();  // the storage is reused
  min_val = BlockReduce(reduce_storage).Reduce(min_val, cuda::minimum<>{}, blockDim.x);

  __shared__ scale_type scale_sh;
  __shared__ azp_type azp_sh;
  if (threadIdx.x == 0) {
    const float s = (max_val - min_val) / 255.0f;
    const azp_type z = static_cast<azp_type>(std::nearbyint(-128.0f - min_val / s));
    scale[token_idx] = scale_sh = s;
    azp[token_idx] = azp_sh = z;
  }
  __syncthreads();

  const float inv_s = 1.0f / scale_sh;
  const azp_type z = azp_sh;
  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    const auto v = static_cast<float>(row_in[i]) * inv_s;
    const auto q = int32_to_int8(float_to_int32_rn(v) + z);
    row_out[i] = q;
  }
}

// float atomic max on the bit patterns: non-negative floats order as ints, negative as
// unsigned ints reversed
__device__ __forceinline__ float atomicMaxFloat(float* addr, float value) {
  float old;
  old = (value >= 0) ? __int_as_float(atomicMax((int*)addr, __float_as_int(value)))
                     : __uint_as_float(atomicMin((unsigned int*)addr, __float_as_uint(value)));
  return old;
}

#define FP8_E4M3_MAX 448.0f

// scale = max |x| / 448 over the whole tensor: a block's absmax by a shared-memory tree, one
// atomic per block. *scale must start at 0.
template <typename scalar_t>
__global__ void segmented_max_reduction(float* __restrict__ scale,
                                        const scalar_t* __restrict__ input,
                                        int64_t num_elems) {
  __shared__ float cache[1024];
  int64_t i = blockDim.x * blockIdx.x + threadIdx.x;

  scalar_t tmp = 0.0;
  while (i < num_elems) {
    float x = static_cast<float>(input[i]);
    tmp = max(tmp, fabs(x));
    i += blockDim.x * gridDim.x;
  }
  cache[threadIdx.x] = tmp;
  __syncthreads();

  int ib = blockDim.x / 2;
  while (ib != 0) {
    if (threadIdx.x < ib && cache[threadIdx.x + ib] > cache[threadIdx.x]) {
      cache[threadIdx.x] = cache[threadIdx.x + ib];
    }
    __syncthreads();
    ib /= 2;
  }
  if (threadIdx.x == 0) {
    atomicMaxFloat(scale, cache[0] / FP8_E4M3_MAX);
  }
}

template <bool is_scale_inverted>
__device__ __forceinline__ __nv_fp8_e4m3 scaled_fp8_conversion(float const val, float const scale) {
  float x = 0.0f;
  if constexpr (is_scale_inverted) {
    x = val * scale;
  } else {
    x = val / scale;
  }
  float r = fmaxf(-FP8_E4M3_MAX, fminf(x, FP8_E4M3_MAX));
  return static_cast<__nv_fp8_e4m3>(r);
}

// out = fp8(x / scale), grid-stride
template <typename scalar_t>
__global__ void scaled_fp8_quant_kernel(__nv_fp8_e4m3* __restrict__ out,
                                        const scalar_t* __restrict__ input,
                                        const float* __restrict__ scale, int64_t num_elems) {
  const int tid = blockDim.x * blockIdx.x + threadIdx.x;
  const float inverted_scale = 1.0f / (*scale);
  for (int64_t i = tid; i < num_elems; i += blockDim.x * gridDim.x) {
    out[i] = scaled_fp8_conversion<true>(static_cast<float>(input[i]), inverted_scale);
  }
}

// Per-token group quantization (one group of group_size values per 16 lanes): the group's
// absmax through xor shuffles over its half-warp, int8 values, the scales row- or column-major.
__device__ __forceinline__ float GroupReduceMax(float val, const int tid) {
  unsigned mask = 0xffff;
  if ((threadIdx.x % 32) >= 16) mask = 0xffff0000;
  val = fmaxf(val, __shfl_xor_sync(mask, val, 8));
  val = fmaxf(val, __shfl_xor_sync(mask, val, 4));
  val = fmaxf(val, __shfl_xor_sync(mask, val, 2));
  val = fmaxf(val, __shfl_xor_sync(mask, val, 1));
  return val;
}

template <typename T, typename DST_DTYPE, bool IS_COLUMN_MAJOR = false>
__global__ void per_token_group_quant_8bit_kernel(const T* __restrict__ input,
                                                  void* __restrict__ output_q,
                                                  float* __restrict__ output_s,
                                                  const int group_size, const int num_groups,
                                                  const int groups_per_block, const float eps,
                                                  const float min_8bit, const float max_8bit,
                                                  const int scale_num_rows = 0,
                                                  const int scale_stride = 0) {
  const int threads_per_group = 16;
  const int local_group_id = threadIdx.x / threads_per_group;
  const int lane_id = threadIdx.x % threads_per_group;
  const int block_group_id = blockIdx.x * groups_per_block;
  const int global_group_id = block_group_id + local_group_id;
  const int block_group_offset = global_group_id * group_size;

  float local_absmax = eps;
  const T* group_input = input + block_group_offset;
  DST_DTYPE* group_output = static_cast<DST_DTYPE*>(output_q) + block_group_offset;
  float* scale_output;
  if constexpr (IS_COLUMN_MAJOR) {
    const int row_idx = global_group_id / scale_num_rows;
    const int col_idx = global_group_id % scale_num_rows;
    scale_output = output_s + (col_idx * scale_stride + row_idx);
  } else {
    scale_output = output_s + global_group_id;
  }

  for (int i = lane_id; i < group_size; i += 16) {
    float val = static_cast<float>(group_input[i]);
    local_absmax = fmaxf(local_absmax, fabsf(val));
  }
  local_absmax = GroupReduceMax(local_absmax, lane_id);
  const float y_s = local_absmax / max_8bit;
  if (lane_id == 0) *scale_output = y_s;

  for (int i = lane_id; i < group_size; i += 16) {
    float val = static_cast<float>(group_input[i]);
    float q_val = fminf(fmaxf(val / y_s, min_8bit), max_8bit);
    group_output[i] = DST_DTYPE(rintf(q_val));
  }
}

// out[m, n] = half(acc[m, n] * a_scale[m] * w_scale[n] + bias[n]), two columns per thread
__global__ void dequant_int8_gemm_out_kernel(const int32_t* __restrict__ acc,
                                             const float* __restrict__ a_scale,
                                             const float* __restrict__ w_scale,
                                             const __half* __restrict__ bias,
                                             __half* __restrict__ out, int m, int n) {
  const int row = blockIdx.y;
  const int col2 = blockIdx.x * blockDim.x + threadIdx.x;
  if (col2 * 2 >= n) return;
  const int2 a = reinterpret_cast<const int2*>(acc + (size_t)row * n)[col2];
  const float2 ws = reinterpret_cast<const float2*>(w_scale)[col2];
  const float as = a_scale[row];
  float2 r;
  r.x = static_cast<float>(a.x) * as * ws.x;
  r.y = static_cast<float>(a.y) * as * ws.y;
  __half2 o = __float22half2_rn(r);
  if (bias != nullptr) o = __hadd2(o, reinterpret_cast<const __half2*>(bias)[col2]);
  reinterpret_cast<__half2*>(out + (size_t)row * n)[col2] = o;
}

// int8 with the PTX saturating conversion (TensorRT-LLM's int8 smooth-quant style)
template <typename T>
__global__ void static_scaled_int8_quant_ptx(const T* __restrict__ input, int8_t* __restrict__ out,
                                             const float* __restrict__ scale_ptr,
                                             const int hidden_size) {
  const int64_t token = blockIdx.x;
  const float inv = 1.0f / *scale_ptr;
  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    out[token * hidden_size + i] = float_to_int8_rn(static_cast<float>(input[token * hidden_size + i]) * inv);
  }
}

template __global__ void dynamic_scaled_int8_azp_quant_kernel<float, float, int32_t>(const float*, int8_t*, float*, int32_t*, const int);
template __global__ void segmented_max_reduction<float>(float*, const float*, int64_t);
template __global__ void scaled_fp8_quant_kernel<__half>(__nv_fp8_e4m3*, const __half*, const float*, int64_t);
template __global__ void per_token_group_quant_8bit_kernel<__nv_bfloat16, int8_t, false>(const __nv_bfloat16*, void*, float*, const int, const int, const int, const float, const float, const float, const int, const int);
template __global__ void static_scaled_int8_quant_ptx<float>(const float*, int8_t*, const float*, const int);

}  // namespace quant
