// llama.cpp / ggml-cuda style kernels (written for this probe): q8_0 and q4_K dequantization
// from byte buffers of packed block structs, q8_1 quantization of activations with warp
// reductions writing a half2 member, a q8_0 x q8_1 mat-vec with __dp4a on ints assembled from
// 16-bit halves, a soft_max with an f16 mask, ALiBi slopes and a templated column count, and
// NeoX rope with YaRN through a struct of correction dims passed by value.
#include <cuda_fp16.h>
#include <stdint.h>

#define WARP_SIZE 32
#define QK8_0 32
#define QI8_0 (QK8_0 / (4 * 1))
#define QK8_1 32
#define QI8_1 (QK8_1 / (4 * 1))
#define QK_K 256
#define K_SCALE_SIZE 12
#define VDR_Q8_0_Q8_1_MMVQ 2
#define CUDA_QUANTIZE_BLOCK_SIZE 256
#define CUDA_SOFT_MAX_BLOCK_SIZE 1024

typedef struct {
  half d;             // delta
  int8_t qs[QK8_0];   // quants
} block_q8_0;
static_assert(sizeof(block_q8_0) == sizeof(half) + QK8_0, "wrong q8_0 block size/padding");

typedef struct {
  half2 ds;           // delta, sum of the block's values times delta
  int8_t qs[QK8_1];
} block_q8_1;
static_assert(sizeof(block_q8_1) == 2 * sizeof(half) + QK8_1, "wrong q8_1 block size/padding");

typedef struct {
  half2 dm;                       // super-block scale for quantized scales, and for mins
  uint8_t scales[K_SCALE_SIZE];   // scales and mins, quantized with 6 bits
  uint8_t qs[QK_K / 2];           // 4-bit quants
} block_q4_K;
static_assert(sizeof(block_q4_K) == 2 * sizeof(half) + K_SCALE_SIZE + QK_K / 2, "wrong q4_K block size/padding");

static __device__ __forceinline__ float warp_reduce_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffff, x, offset, 32);
  return x;
}

static __device__ __forceinline__ float warp_reduce_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, offset, 32));
  return x;
}

// ---- dequantization ----
template <typename dst_t>
static __global__ void dequantize_block_q8_0(const void* __restrict__ vx, dst_t* __restrict__ yy,
                                             const int64_t k) {
  const int64_t i = (int64_t)blockDim.x * blockIdx.x + threadIdx.x;  // one value per thread
  if (i >= k) return;
  const block_q8_0* x = (const block_q8_0*)vx;
  const int64_t ib = i / QK8_0;
  const int iqs = i % QK8_0;
  const float d = x[ib].d;
  yy[i] = (dst_t)(d * x[ib].qs[iqs]);
}

static inline __device__ void get_scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// one block of 32 threads per super-block of 256 values
template <typename dst_t>
static __global__ void dequantize_block_q4_K(const void* __restrict__ vx, dst_t* __restrict__ yy) {
  const block_q4_K* x = (const block_q4_K*)vx;
  const int64_t i = blockIdx.x;
  const int64_t tid = threadIdx.x;
  const int64_t il = tid / 8;
  const int64_t ir = tid % 8;
  const int is = 2 * il;
  const int n = 4;
  dst_t* y = yy + i * QK_K + 64 * il + n * ir;
  const float dall = __low2half(x[i].dm);
  const float dmin = __high2half(x[i].dm);
  const uint8_t* q = x[i].qs + 32 * il + n * ir;
  uint8_t sc, m;
  get_scale_min_k4(is + 0, x[i].scales, sc, m);
  const float d1 = dall * sc;
  const float m1 = dmin * m;
  get_scale_min_k4(is + 1, x[i].scales, sc, m);
  const float d2 = dall * sc;
  const float m2 = dmin * m;
  for (int l = 0; l < n; ++l) {
    y[l + 0] = d1 * (q[l] & 0xF) - m1;
    y[l + 32] = d2 * (q[l] >> 4) - m2;
  }
}

// ---- activation quantization ----
static __global__ void quantize_q8_1(const float* __restrict__ x, void* __restrict__ vy,
                                     const int64_t kx, const int64_t kx0_padded) {
  const int64_t ix0 = (int64_t)blockDim.x * blockIdx.x + threadIdx.x;
  if (ix0 >= kx0_padded) return;
  const int64_t ix1 = blockIdx.y;
  const int64_t i_padded = ix1 * kx0_padded + ix0;
  block_q8_1* y = (block_q8_1*)vy;
  const int64_t ib = i_padded / QK8_1;
  const int64_t iqs = i_padded % QK8_1;

  const float xi = ix0 < kx ? x[ix1 * kx + ix0] : 0.0f;
  float amax = fabsf(xi);
  float sum = xi;
  amax = warp_reduce_max(amax);
  sum = warp_reduce_sum(sum);

  const float d = amax / 127;
  const int8_t q = amax == 0.0f ? 0 : roundf(xi / d);
  y[ib].qs[iqs] = q;
  if (iqs > 0) return;
  y[ib].ds = make_half2(d, sum);
}

// ---- q8_0 x q8_1 mat-vec ----
static __device__ __forceinline__ int get_int_from_int8(const int8_t* x8, const int& i32) {
  const uint16_t* x16 = (const uint16_t*)(x8 + sizeof(int) * i32);  // only 16-bit aligned
  int x32 = 0;
  x32 |= x16[0] << 0;
  x32 |= x16[1] << 16;
  return x32;
}

static __device__ __forceinline__ int get_int_from_int8_aligned(const int8_t* x8, const int& i32) {
  return *((const int*)(x8 + sizeof(int) * i32));
}

template <int vdr>
static __device__ __forceinline__ float vec_dot_q8_0_q8_1_impl(const int* v, const int* u,
                                                               const float& d8_0, const float& d8_1) {
  int sumi = 0;
#pragma unroll
  for (int i = 0; i < vdr; ++i) sumi = __dp4a(v[i], u[i], sumi);
  return d8_0 * d8_1 * ((float)sumi);
}

static __device__ __forceinline__ float vec_dot_q8_0_q8_1(const void* __restrict__ vbq,
                                                          const block_q8_1* __restrict__ bq8_1,
                                                          const int& iqs) {
  const block_q8_0* bq8_0 = (const block_q8_0*)vbq;
  int v[VDR_Q8_0_Q8_1_MMVQ];
  int u[VDR_Q8_0_Q8_1_MMVQ];
#pragma unroll
  for (int i = 0; i < VDR_Q8_0_Q8_1_MMVQ; ++i) {
    v[i] = get_int_from_int8(bq8_0->qs, iqs + i);
    u[i] = get_int_from_int8_aligned(bq8_1->qs, iqs + i);
  }
  return vec_dot_q8_0_q8_1_impl<VDR_Q8_0_Q8_1_MMVQ>(v, u, bq8_0->d, __low2half(bq8_1->ds));
}

// one warp per row (blockDim = (32, rows per block)); each lane one slice of a block
template <int qk, int qi, typename block_q_t, int vdr>
static __global__ void mul_mat_vec_q(const void* __restrict__ vx, const void* __restrict__ vy,
                                     float* __restrict__ dst, const int ncols, const int nrows) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= nrows) return;
  const int blocks_per_row = ncols / qk;
  const int blocks_per_warp = vdr * WARP_SIZE / qi;
  float tmp = 0.0f;
  const block_q_t* x = (const block_q_t*)vx;
  const block_q8_1* y = (const block_q8_1*)vy;
  for (int i = threadIdx.x / (qi / vdr); i < blocks_per_row; i += blocks_per_warp) {
    const int ibx = row * blocks_per_row + i;
    const int iby = i * (qk / QK8_1);
    const int iqs = vdr * (threadIdx.x % (qi / vdr));
    tmp += vec_dot_q8_0_q8_1(&x[ibx], &y[iby], iqs);
  }
  tmp = warp_reduce_sum(tmp);
  if (threadIdx.x == 0) dst[row] = tmp;
}

// ---- soft_max with mask and ALiBi ----
static __device__ __forceinline__ float get_alibi_slope(const float max_bias, const uint32_t h,
                                                        const uint32_t n_head_log2, const float m0,
                                                        const float m1) {
  if (max_bias <= 0.0f) return 1.0f;
  const float base = h < n_head_log2 ? m0 : m1;
  const int exph = h < n_head_log2 ? h + 1 : 2 * (h - n_head_log2) + 1;
  return powf(base, exph);
}

template <bool use_shared, int ncols_template, int block_size_template>
static __global__ void soft_max_f32(const float* x, const half* mask, float* dst, const int ncols_par,
                                    const int nrows_y, const float scale, const float max_bias,
                                    const float m0, const float m1, uint32_t n_head_log2) {
  const int ncols = ncols_template == 0 ? ncols_par : ncols_template;
  const int tid = threadIdx.x;
  const int rowx = blockIdx.x;
  const int rowy = rowx % nrows_y;  // the mask broadcasts over heads
  const int block_size = block_size_template == 0 ? blockDim.x : block_size_template;
  const int warp_id = threadIdx.x / WARP_SIZE;
  const int lane_id = threadIdx.x % WARP_SIZE;
  const uint32_t h = rowx / nrows_y;
  const float slope = get_alibi_slope(max_bias, h, n_head_log2, m0, m1);

  extern __shared__ float data_soft_max_f32[];
  float* buf_iw = data_soft_max_f32;  // the warps' partials
  float* vals = use_shared ? buf_iw + WARP_SIZE : dst + (int64_t)rowx * ncols;

  float max_val = -INFINITY;
#pragma unroll
  for (int col0 = 0; col0 < ncols; col0 += block_size) {
    const int col = col0 + tid;
    if (ncols_template == 0 && col >= ncols) break;
    const int64_t ix = (int64_t)rowx * ncols + col;
    const int64_t iy = (int64_t)rowy * ncols + col;
    const float val = x[ix] * scale + (mask ? slope * __half2float(mask[iy]) : 0.0f);
    vals[col] = val;
    max_val = max(max_val, val);
  }

  max_val = warp_reduce_max(max_val);
  if (block_size > WARP_SIZE) {
    if (warp_id == 0) buf_iw[lane_id] = -INFINITY;
    __syncthreads();
    if (lane_id == 0) buf_iw[warp_id] = max_val;
    __syncthreads();
    max_val = buf_iw[lane_id];
    max_val = warp_reduce_max(max_val);
  }

  float tmp = 0.0f;
#pragma unroll
  for (int col0 = 0; col0 < ncols; col0 += block_size) {
    const int col = col0 + tid;
    if (ncols_template == 0 && col >= ncols) break;
    const float val = expf(vals[col] - max_val);
    tmp += val;
    vals[col] = val;
  }

  tmp = warp_reduce_sum(tmp);
  if (block_size > WARP_SIZE) {
    __syncthreads();
    if (warp_id == 0) buf_iw[lane_id] = 0.0f;
    __syncthreads();
    if (lane_id == 0) buf_iw[warp_id] = tmp;
    __syncthreads();
    tmp = buf_iw[lane_id];
    tmp = warp_reduce_sum(tmp);
  }

  const float inv_sum = 1.0f / tmp;
#pragma unroll
  for (int col0 = 0; col0 < ncols; col0 += block_size) {
    const int col = col0 + tid;
    if (ncols_template == 0 && col >= ncols) return;
    const int64_t idst = (int64_t)rowx * ncols + col;
    dst[idst] = vals[col] * inv_sum;
  }
}

// ---- rope (NeoX) with YaRN ----
struct rope_corr_dims {
  float v[2];
};

static __device__ float rope_yarn_ramp(const float low, const float high, const int i0) {
  const float y = (i0 / 2 - low) / max(0.001f, high - low);
  return 1.0f - min(1.0f, max(0.0f, y));
}

static __device__ void rope_yarn(float theta_extrap, float freq_scale, rope_corr_dims corr_dims,
                                 int64_t i0, float ext_factor, float mscale, float* cos_theta,
                                 float* sin_theta) {
  float theta_interp = freq_scale * theta_extrap;
  float theta = theta_interp;
  if (ext_factor != 0.0f) {
    float ramp_mix = rope_yarn_ramp(corr_dims.v[0], corr_dims.v[1], i0) * ext_factor;
    theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
    mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
  }
  *cos_theta = cosf(theta) * mscale;
  *sin_theta = sinf(theta) * mscale;
}

// x: [nrows = tokens * heads, ne0]; grid (rows, ceil(ne0 / 2 / block)); positions per token
template <bool has_ff, typename T>
static __global__ void rope_neox(const T* x, T* dst, const int ne0, const int ne1, const int s1,
                                 const int s2, const int n_dims, const int32_t* pos,
                                 const float freq_scale, const float ext_factor,
                                 const float attn_factor, const rope_corr_dims corr_dims,
                                 const float theta_scale, const float* freq_factors) {
  const int i0 = 2 * (blockDim.y * blockIdx.y + threadIdx.y);
  if (i0 >= ne0) return;
  const int row_dst = blockDim.x * blockIdx.x + threadIdx.x;
  const int row_x = row_dst % ne1;
  const int channel_x = row_dst / ne1;
  const int idst = row_dst * ne0 + i0 / 2;
  const int ix = channel_x * s2 + row_x * s1 + i0 / 2;
  if (i0 >= n_dims) {
    dst[idst + i0 / 2 + 0] = x[ix + i0 / 2 + 0];
    dst[idst + i0 / 2 + 1] = x[ix + i0 / 2 + 1];
    return;
  }
  const float theta_base = pos[channel_x] * powf(theta_scale, i0 / 2.0f);
  const float freq_factor = has_ff ? freq_factors[i0 / 2] : 1.0f;
  float cos_theta, sin_theta;
  rope_yarn(theta_base / freq_factor, freq_scale, corr_dims, i0, ext_factor, attn_factor, &cos_theta, &sin_theta);
  const float x0 = x[ix + 0];
  const float x1 = x[ix + n_dims / 2];
  dst[idst + 0] = x0 * cos_theta - x1 * sin_theta;
  dst[idst + n_dims / 2] = x0 * sin_theta + x1 * cos_theta;
}

template __global__ void dequantize_block_q8_0<half>(const void*, half*, const int64_t);
template __global__ void dequantize_block_q4_K<float>(const void*, float*);
template __global__ void mul_mat_vec_q<QK8_0, QI8_0, block_q8_0, VDR_Q8_0_Q8_1_MMVQ>(const void*, const void*, float*, const int, const int);
template __global__ void soft_max_f32<true, 0, 0>(const float*, const half*, float*, const int, const int, const float, const float, const float, const float, uint32_t);
template __global__ void rope_neox<false, float>(const float*, float*, const int, const int, const int, const int, const int, const int32_t*, const float, const float, const float, const rope_corr_dims, const float, const float*);
