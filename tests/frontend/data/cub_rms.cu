// RMS norm in an inference engine's style (written for kir's tests): one block per token,
// up to 1024 threads striding over the hidden size, the sum of squares reduced by CUB over
// the threads the launch has (blockDim.x, which may be fewer than the 1024 it is sized for),
// with libcu++'s plus (CUDA 13's CUB has no cub::Sum).
#include <cub/cub.cuh>
#include <cuda_fp16.h>

template <typename scalar_t>
__global__ void rms_norm_cub(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                             const scalar_t* __restrict__ weight, const float epsilon,
                             const int hidden_size) {
  __shared__ float s_inv_rms;
  const scalar_t* row = input + (size_t)blockIdx.x * hidden_size;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    const float x = static_cast<float>(row[i]);
    sum_sq += x * x;
  }
  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduce_store;
  sum_sq = BlockReduce(reduce_store).Reduce(sum_sq, cuda::std::plus<float>{}, blockDim.x);
  if (threadIdx.x == 0) {
    s_inv_rms = rsqrtf(sum_sq / hidden_size + epsilon);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    const float x = static_cast<float>(row[i]);
    out[(size_t)blockIdx.x * hidden_size + i] =
        static_cast<scalar_t>(x * s_inv_rms) * weight[i];
  }
}
