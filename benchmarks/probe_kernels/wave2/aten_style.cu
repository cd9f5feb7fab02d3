// PyTorch ATen-style kernels (written for this probe; modelled on aten/src/ATen/native/cuda).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/AccumulateType.h>
#include <c10/macros/Macros.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define CUDA_MAX_THREADS_PER_BLOCK 1024
#define CUDA_THREADS_PER_BLOCK_FALLBACK 256
#define C10_MAX_THREADS_PER_BLOCK(val) \
  (((val) <= CUDA_MAX_THREADS_PER_BLOCK) ? (val) : CUDA_THREADS_PER_BLOCK_FALLBACK)
#define C10_LAUNCH_BOUNDS_1(max_threads_per_block) \
  __launch_bounds__((C10_MAX_THREADS_PER_BLOCK((max_threads_per_block))))
#define C10_WARP_SIZE 32

#define CUDA_KERNEL_LOOP_TYPE(i, n, index_type)                         \
  int64_t _i_n_d_e_x = blockIdx.x * blockDim.x + threadIdx.x;           \
  for (index_type i = _i_n_d_e_x; _i_n_d_e_x < (n);                     \
       _i_n_d_e_x += blockDim.x * gridDim.x, i = _i_n_d_e_x)

#define CUDA_KERNEL_LOOP(i, n) CUDA_KERNEL_LOOP_TYPE(i, n, int)

namespace at {
using Half = __half;

template <typename T, bool is_cuda>
struct AccumulateType {};
template <> struct AccumulateType<float, true> { using type = float; };
template <> struct AccumulateType<double, true> { using type = double; };
template <> struct AccumulateType<Half, true> { using type = float; };

template <typename T, bool is_cuda>
using acc_type = typename AccumulateType<T, is_cuda>::type;
}  // namespace at

namespace at {
namespace native {
namespace {

constexpr int NLL_LOSS_THREADS = 32;

template <typename accscalar_t>
__device__ __forceinline__ accscalar_t area_pixel_compute_source_index(
    accscalar_t scale, int64_t dst_index, bool align_corners, bool cubic) {
  if (align_corners) {
    return scale * dst_index;
  } else {
    accscalar_t src_idx = scale * (dst_index + static_cast<accscalar_t>(0.5)) -
        static_cast<accscalar_t>(0.5);
    return (!cubic && src_idx < static_cast<accscalar_t>(0))
        ? static_cast<accscalar_t>(0)
        : src_idx;
  }
}

__device__ __forceinline__ int64_t nearest_neighbor_compute_source_index(
    const float scale, int64_t dst_index, int64_t input_size) {
  const int64_t src_index =
      min(static_cast<int64_t>(floorf(dst_index * scale)), input_size - 1);
  return src_index;
}

template <typename T>
__device__ __forceinline__ void gpuAtomicAdd(T* address, T val) {
  atomicAdd(address, val);
}

}  // namespace

// nearest upsampling, NCHW, one thread per output element
template <typename scalar_t>
C10_LAUNCH_BOUNDS_1(1024)
__global__ void upsample_nearest2d_out_frame(
    const scalar_t* idata, scalar_t* odata, const size_t nc, const size_t height1,
    const size_t width1, const size_t height2, const size_t width2, float height_scale,
    float width_scale) {
  size_t nc_iter = threadIdx.z + blockIdx.z * blockDim.z;
  int64_t w2 = ((int64_t) threadIdx.x) + blockIdx.x * blockDim.x;
  int64_t h2 = threadIdx.y + blockIdx.y * blockDim.y;

  if (w2 >= width2 || h2 >= height2) {
    return;
  }

  int64_t nc_stride = static_cast<int64_t>(blockDim.z) * gridDim.z;

  const size_t h1 = height1 == height2
      ? h2
      : nearest_neighbor_compute_source_index(height_scale, h2, height1);
  const size_t w1 = width1 == width2
      ? w2
      : nearest_neighbor_compute_source_index(width_scale, w2, width1);

  size_t src_index = (nc_iter * height1 + h1) * width1 + w1;
  size_t src_index_stride = nc_stride * width1 * height1;
  size_t dst_index = (nc_iter * height2 + h2) * width2 + w2;
  size_t dst_index_stride = nc_stride * width2 * height2;

  while (nc_iter < nc) {
    odata[dst_index] = idata[src_index];
    dst_index += dst_index_stride;
    src_index += src_index_stride;
    nc_iter += nc_stride;
  }
}

// bilinear upsampling, one thread per output pixel, loops over N*C
template <typename scalar_t, typename accscalar_t>
C10_LAUNCH_BOUNDS_1(1024)
__global__ void upsample_bilinear2d_out_frame(
    const int n, const accscalar_t rheight, const accscalar_t rwidth,
    const bool align_corners, const scalar_t* __restrict__ idata,
    scalar_t* __restrict__ odata, const int batchsize, const int channels,
    const int height1, const int width1, const int height2, const int width2) {
  int index = threadIdx.x + blockIdx.x * blockDim.x;

  if (index < n) {
    const int w2 = index % width2;
    const int h2 = index / width2;

    const accscalar_t h1r = area_pixel_compute_source_index<accscalar_t>(
        rheight, h2, align_corners, /*cubic=*/false);
    const int h1 = h1r;
    const int h1p = (h1 < height1 - 1) ? 1 : 0;
    const accscalar_t h1lambda = h1r - h1;
    const accscalar_t h0lambda = static_cast<accscalar_t>(1) - h1lambda;

    const accscalar_t w1r = area_pixel_compute_source_index<accscalar_t>(
        rwidth, w2, align_corners, /*cubic=*/false);
    const int w1 = w1r;
    const int w1p = (w1 < width1 - 1) ? 1 : 0;
    const accscalar_t w1lambda = w1r - w1;
    const accscalar_t w0lambda = static_cast<accscalar_t>(1) - w1lambda;

    for (int nc = 0; nc < batchsize * channels; nc++) {
      const scalar_t* in = idata + (int64_t)nc * height1 * width1;
      const accscalar_t val = h0lambda *
              (w0lambda * in[h1 * width1 + w1] + w1lambda * in[h1 * width1 + w1 + w1p]) +
          h1lambda *
              (w0lambda * in[(h1 + h1p) * width1 + w1] +
               w1lambda * in[(h1 + h1p) * width1 + w1 + w1p]);
      odata[(int64_t)nc * height2 * width2 + h2 * width2 + w2] = static_cast<scalar_t>(val);
    }
  }
}

// embedding backward: grad_weight[indices[i]] += grad[i], grid-stride with the ATen macro
template <typename scalar_t, typename index_t>
__global__ void embedding_backward_atomic_kernel(
    const index_t* indices, const scalar_t* __restrict__ grad,
    scalar_t* __restrict__ grad_weight, int64_t numel, int64_t stride, int64_t padding_idx) {
  CUDA_KERNEL_LOOP(i, numel * stride) {
    const int64_t row = i / stride;
    const int64_t col = i % stride;
    const index_t idx = indices[row];
    if (idx != padding_idx) {
      gpuAtomicAdd(&grad_weight[static_cast<int64_t>(idx) * stride + col], grad[i]);
    }
  }
}

// sum over the middle dimension of a [outer, reduce, inner] tensor; one thread per output
template <typename scalar_t>
C10_LAUNCH_BOUNDS_1(512)
__global__ void sum_dim_kernel(const scalar_t* __restrict__ self, scalar_t* __restrict__ result,
                               int64_t outer, int64_t reduce, int64_t inner) {
  using accscalar_t = at::acc_type<scalar_t, true>;
  CUDA_KERNEL_LOOP_TYPE(linear, outer * inner, int64_t) {
    const int64_t o = linear / inner;
    const int64_t in = linear % inner;
    accscalar_t acc = accscalar_t(0);
    const scalar_t* p = self + o * reduce * inner + in;
    for (int64_t r = 0; r < reduce; ++r) {
      acc += static_cast<accscalar_t>(p[r * inner]);
    }
    result[linear] = static_cast<scalar_t>(acc);
  }
}

// nll_loss forward, reduction over a 2D input by one block
template <typename scalar_t, typename index_t>
__global__ void nll_loss_forward_reduce_cuda_kernel_2d(
    scalar_t* output, scalar_t* total_weight, const scalar_t* input,
    const index_t* target, const scalar_t* weights, bool size_average,
    int64_t nframe, int64_t ndim, int64_t n_classes, int64_t ignore_index) {
  using accscalar_t = at::acc_type<scalar_t, /*is_cuda*/ true>;
  __shared__ accscalar_t sh_inputs[NLL_LOSS_THREADS], acc_weight[NLL_LOSS_THREADS];

  sh_inputs[threadIdx.x] = static_cast<accscalar_t>(0);
  acc_weight[threadIdx.x] = static_cast<accscalar_t>(0);
  for (int i = threadIdx.x; i < nframe; i += NLL_LOSS_THREADS) {
    index_t t = target[i];
    if (t != ignore_index) {
      scalar_t cur_weight =
          weights != nullptr ? weights[t] : static_cast<scalar_t>(1);
      sh_inputs[threadIdx.x] -= input[i * ndim + t] * cur_weight;
      acc_weight[threadIdx.x] += cur_weight;
    }
  }

  __syncthreads();

  if (threadIdx.x == 0) {
    accscalar_t output_acc = 0;
    accscalar_t total_weight_acc = 0;
    for (int i = 0; i < NLL_LOSS_THREADS; ++i) {
      output_acc += sh_inputs[i];
      total_weight_acc += acc_weight[i];
    }
    *total_weight = static_cast<scalar_t>(total_weight_acc);
    if (size_average) {
      *output = static_cast<scalar_t>(output_acc / total_weight_acc);
    } else {
      *output = static_cast<scalar_t>(output_acc);
    }
  }
}

}  // namespace native
}  // namespace at
