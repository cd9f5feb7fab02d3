// llm.c-style kernels from its later (bf16) versions: x128 packs of __nv_bfloat16, encoder
// forward / backward, residual forward, GELU backward in place, the fused residual + layernorm
// forward with weights cached in shared memory (extern __shared__ char* params[]), the
// global-norm-squared grid-stride reduction through blockReduce<warpReduceSum> (a function
// pointer as a template argument), AdamW with stochastic rounding to bf16 from a
// SquirrelNoise5 hash, the attention softmax forward (online softmax, float4, cg::reduce),
// permute backward, and llama3's GQA repkv.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <float.h>
#include <assert.h>

typedef __nv_bfloat16 floatX;
#define WARP_SIZE 32U

template <class ElementType>
struct alignas(16) Packed128 {
    Packed128() = default;
    __device__ explicit Packed128(int4 bits) {
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&payload, &bits, sizeof(bits));
    }
    __device__ ElementType &operator[](int index) { return payload[index]; }
    __device__ const ElementType &operator[](int index) const { return payload[index]; }
    __device__ int4 get_bits() const {
        int4 bits;
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
    static constexpr const size_t size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];
};

template <class ElementType>
__device__ Packed128<ElementType> load128(const ElementType *address) {
    return Packed128<ElementType>{*reinterpret_cast<const int4 *>(address)};
}
template <class ElementType>
__device__ Packed128<ElementType> load128cs(const ElementType *address) {
    return Packed128<ElementType>{__ldcs(reinterpret_cast<const int4 *>(address))};
}
template <class ElementType>
__device__ void store128(ElementType *target, Packed128<ElementType> value) {
    *reinterpret_cast<int4 *>(target) = value.get_bits();
}
template <class ElementType>
__device__ void store128cs(ElementType *target, Packed128<ElementType> value) {
    __stcs(reinterpret_cast<int4 *>(target), value.get_bits());
}
typedef Packed128<floatX> x128;

__device__ inline float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    return val;
}

using reduction_func_t = float (*)(float);
template <reduction_func_t warp_reduction>
__device__ inline float blockReduce(float val, bool final_sync = false, float out_of_bounds = 0.0f) {
    // two reductions of up to 1024 threads: 1) inside warp (shuffle), 2) cross-warp (shared)
    __shared__ float shared_val[WARP_SIZE];
    const int lane_id = threadIdx.x % WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;

    float warp_val = warp_reduction(val);
    if (lane_id == 0) {
        shared_val[warp_id] = warp_val;
    }
    __syncthreads();
    warp_val = (lane_id < num_warps) ? shared_val[lane_id] : out_of_bounds;
    float block_val = warp_reduction(warp_val);

    if (final_sync) {
        __syncthreads();  // only needed in loops when effectively reusing shared memory etc.
    }
    return block_val;
}

// ------------------------------------------------------------------------------------------
// encoder: out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
__global__ void encoder_forward_kernel3(floatX *out, const int *inp, const floatX *wte,
                                        const floatX *wpe, int B, int T, int C) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    int N = B * T * C;
    if (idx >= N) {
        return;
    }

    int bt = idx / C;
    int b = bt / T;
    int t = bt % T;
    int c = idx % C;

    int ix = inp[b * T + t];

    floatX *out_btc = out + b * T * C + t * C + c;
    const floatX *wte_ix = wte + ix * C + c;
    const floatX *wpe_tc = wpe + t * C + c;

    x128 packed_out;
    x128 wte128 = load128cs(wte_ix);
    x128 wpe128 = load128cs(wpe_tc);
    for (int k = 0; k < x128::size; k++) {
        packed_out[k] = (floatX)((float)wte128[k] + (float)wpe128[k]);
    }
    store128(out_btc, packed_out);
}

__global__ void encoder_backward_kernel(float *dwte, float *dwpe, const float *dout,
                                        const int *inp, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;

    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;

        int ix = inp[b * T + t];

        const float *dout_btc = dout + b * T * C + t * C + c;
        float *dwte_ix = dwte + ix * C + c;
        float *dwpe_tc = dwpe + t * C + c;

        atomicAdd(dwte_ix, *dout_btc);
        atomicAdd(dwpe_tc, *dout_btc);
    }
}

// ------------------------------------------------------------------------------------------
__global__ void residual_forward_kernel(floatX *out, const floatX *inp1, const floatX *inp2) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;

    x128 packed_out;
    x128 packed_inp1 = load128cs(inp1 + idx);
    x128 packed_inp2 = load128cs(inp2 + idx);
    for (int k = 0; k < packed_inp1.size; k++) {
        packed_out[k] = (floatX)((float)packed_inp1[k] + (float)packed_inp2[k]);
    }
    store128(out + idx, packed_out);
}

#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
__global__ void gelu_backward_inplace_kernel(floatX *d_in_out, const floatX *inp) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;

    x128 packed_dinp;
    x128 packed_inp = load128cs(inp + idx);
    x128 packed_dout = load128(d_in_out + idx);
    for (int k = 0; k < packed_inp.size; ++k) {
        float x = (float)packed_inp[k];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float coshf_out = coshf(tanh_arg);
        float sech_out = 1.0f / (coshf_out * coshf_out);
        float local_grad = 0.5f * (1.0f + tanh_out) +
                           x * 0.5f * sech_out * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        packed_dinp[k] = (floatX)(local_grad * (float)packed_dout[k]);
    }
    store128(d_in_out + idx, packed_dinp);
}

// ------------------------------------------------------------------------------------------
// fused residual + layernorm: one warp per row, blockDim = (32, rows per block)
__global__ void fused_residual_forward_kernel5(floatX *residual, floatX *normed, float *mean,
                                               float *rstd, const floatX *inp1, const floatX *inp2,
                                               const floatX *weight, const floatX *bias, int N,
                                               int C) {
    constexpr const int WarpSize = 32;
    assert(blockDim.x == WarpSize);

    // load weights and biases into shared memory; do this before we allow any threads to exit!
    extern __shared__ char *params[];
    // load128/store128 sometimes generated multiple instructions when the types here were
    // floatX*, so let's use int4*
    x128 *s_weight = reinterpret_cast<x128 *>(params);
    x128 *s_bias = reinterpret_cast<x128 *>(params) + (C / x128::size);
    x128 *s_res = reinterpret_cast<x128 *>(params) + ((2 + threadIdx.y) * C / x128::size);

    int sidx = (threadIdx.x + WarpSize * threadIdx.y) * x128::size;
    for (int i = sidx; i < C; i += blockDim.y * WarpSize * x128::size) {
        s_weight[i / x128::size] = load128(weight + i);
        s_bias[i / x128::size] = load128(bias + i);
    }
    __syncthreads();

    int idx = blockIdx.x * blockDim.y + threadIdx.y;
    if (idx >= N) return;

    // adjust pointers to current token
    residual += C * idx;
    normed += C * idx;
    inp1 += C * idx;
    inp2 += C * idx;

    const float eps = 1e-5f;
    float sum = 0.0f;
    for (int c = threadIdx.x * x128::size; c < C; c += WarpSize * x128::size) {
        const x128 in1 = load128cs(inp1 + c);
        const x128 in2 = load128cs(inp2 + c);
        x128 out;
        for (int k = 0; k < x128::size; ++k) {
            out[k] = (float)in1[k] + (float)in2[k];
            sum += (float)out[k];
        }
        store128cs(residual + c, out);
        s_res[c / x128::size] = out;
    }

    sum = warpReduceSum(sum);
    float m = sum / C;
    float v = 0.f;

    for (int c = threadIdx.x * x128::size; c < C; c += WarpSize * x128::size) {
        const x128 res = s_res[c / x128::size];
        for (int k = 0; k < x128::size; ++k) {
            v += ((float)res[k] - m) * ((float)res[k] - m);
        }
    }

    v = warpReduceSum(v) / C;
    float s = rsqrtf(v + eps);

    for (int c = threadIdx.x * x128::size; c < C; c += WarpSize * x128::size) {
        const x128 res = s_res[c / x128::size];
        const x128 w = s_weight[c / x128::size];
        const x128 b = s_bias[c / x128::size];
        x128 out;
        for (int k = 0; k < x128::size; ++k) {
            float n = s * ((float)res[k] - m);      // normalized output
            float o = n * (float)w[k] + (float)b[k];  // scale and shift it
            out[k] = o;
        }
        store128cs(normed + c, out);
    }
    // cache the mean and rstd for the backward pass later
    if (threadIdx.x == 0) {
        mean[idx] = m;
        rstd[idx] = s;
    }
}

// ------------------------------------------------------------------------------------------
// squared global norm of several equally sized tensors (blockIdx.y), grid-stride
template <class T>
__device__ float global_norm_squared_for_range(const T *data, size_t count) {
    size_t index = blockIdx.x * blockDim.x + threadIdx.x;
    size_t grid_width = blockDim.x * gridDim.x;
    float accumulator = 0.f;
    for (size_t i = index; i < count; i += grid_width) {
        accumulator += (float)data[i] * (float)data[i];
    }
    // block-level reduce
    return blockReduce<warpReduceSum>(accumulator);
}

template <class T>
__global__ void global_norm_squared_kernel(float *out, const T *data, size_t count,
                                           ptrdiff_t stride) {
    float block_sum = global_norm_squared_for_range(data + blockIdx.y * stride, count);
    if (threadIdx.x == 0) {
        atomicAdd(out, block_sum);
    }
}

template __global__ void global_norm_squared_kernel<floatX>(float *, const floatX *, size_t,
                                                            ptrdiff_t);

// ------------------------------------------------------------------------------------------
// AdamW with stochastic rounding of the bf16 parameters
__device__ __host__ constexpr unsigned int SquirrelNoise5(unsigned int positionX, unsigned int seed) {
    constexpr unsigned int SQ5_BIT_NOISE1 = 0xd2a80a3f;  // 11010010101010000000101000111111
    constexpr unsigned int SQ5_BIT_NOISE2 = 0xa884f197;  // 10101000100001001111000110010111
    constexpr unsigned int SQ5_BIT_NOISE3 = 0x6C736F4B;  // 01101100011100110110111101001011
    constexpr unsigned int SQ5_BIT_NOISE4 = 0xB79F3ABB;  // 10110111100111110011101010111011
    constexpr unsigned int SQ5_BIT_NOISE5 = 0x1b56c4f5;  // 00011011010101101100010011110101
    unsigned int mangledBits = positionX;
    mangledBits *= SQ5_BIT_NOISE1;
    mangledBits += seed;
    mangledBits ^= (mangledBits >> 9);
    mangledBits += SQ5_BIT_NOISE2;
    mangledBits ^= (mangledBits >> 11);
    mangledBits *= SQ5_BIT_NOISE3;
    mangledBits ^= (mangledBits >> 13);
    mangledBits += SQ5_BIT_NOISE4;
    mangledBits ^= (mangledBits >> 15);
    mangledBits *= SQ5_BIT_NOISE5;
    mangledBits ^= (mangledBits >> 17);
    return mangledBits;
}
__device__ __host__ constexpr unsigned int Get2dNoiseUint(int indexX, int indexY, unsigned int seed) {
    constexpr unsigned int PRIME_NUMBER = 198491317u;  // Large prime number with non-boring bits
    return SquirrelNoise5(indexX + (PRIME_NUMBER * indexY), seed);
}

// stochastic rounding built on top of SquirrelNoise above (deterministic per seed and thread)
__device__ __forceinline__ void stochastic_rounding(float in, __nv_bfloat16 *out, unsigned int seed) {
    // todo - is this stochastic rounding *too good*? can we cut any corners?
    unsigned int random = Get2dNoiseUint(threadIdx.x, blockIdx.x * blockDim.x + blockIdx.y, seed);
    unsigned int threshold = random & 0xFFFF;
    unsigned int float_bits = __float_as_uint(in);
    unsigned int rounded_bits = float_bits & 0x0000FFFF;
    float_bits = (rounded_bits > threshold) ? (float_bits | 0xFFFF) : (float_bits & ~0xFFFF);
    *out = __float2bfloat16_rn(__uint_as_float(float_bits));
}

__device__ float lerp(float start, float end, float weight) {
    return fma(weight, end, fma(-weight, start, start));
}

template <typename Tp, typename Tg>
__global__ void adamw_kernel3(Tp *params_memory, float *master_params_memory, Tg *grads_memory,
                              float *m_memory, float *v_memory, size_t num_parameters,
                              float learning_rate, float beta1, float beta2, float beta1_correction,
                              float beta2_correction, float eps, float weight_decay,
                              float grad_scale, unsigned int seed) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= num_parameters) {
        return;
    }  // guard

    // get the gradient, m, and v for this parameter
    float grad = grad_scale * (float)grads_memory[idx];
    float m = m_memory[idx];
    float v = v_memory[idx];
    // update the first moment (momentum)
    m = lerp(grad, m, beta1);
    m_memory[idx] = m;
    // update the second moment (RMSprop)
    v = lerp(grad * grad, v, beta2);
    v_memory[idx] = v;
    m /= beta1_correction;  // m_hat
    v /= beta2_correction;  // v_hat
    // fetch the old value of this parameter as a float, from either source
    float old_param = (master_params_memory != NULL) ? master_params_memory[idx] : (float)params_memory[idx];
    // update this parameter
    float param = old_param - (learning_rate * (m / (sqrtf(v) + eps) + weight_decay * old_param));
    // update our low precision version of the parameters using stochastic rounding
    stochastic_rounding(param, &params_memory[idx], seed);
    // write the full, float version of the param into our master copy, if we maintain one
    if (master_params_memory != NULL) {
        master_params_memory[idx] = param;
    }
}

template __global__ void adamw_kernel3<floatX, floatX>(floatX *, float *, floatX *, float *, float *,
                                                        size_t, float, float, float, float, float,
                                                        float, float, float, unsigned int);

// ------------------------------------------------------------------------------------------
// attention softmax forward, autoregressive, scale fused; one warp per row of (N, T, T)
__device__ float &vec_at(float4 &vec, int index) { return reinterpret_cast<float *>(&vec)[index]; }

__device__ float vec_at(const float4 &vec, int index) {
    return reinterpret_cast<const float *>(&vec)[index];
}

__global__ void softmax_forward_kernel5(float *out, float inv_temperature, const float *inp, int N,
                                        int T) {
    // inp, out shape: (N, T, T), where N = B * NH; only the lower triangle is computed
    assert(T % 4 == 0);
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N * T) {
        return;
    }
    int own_pos = idx % T;
    int pos_by_4 = own_pos / 4;

    // one row of inp, i.e. inp[idx, :] of shape (T,)
    const float *x = inp + idx * T;

    // not INF, so we don't get NaNs accidentally when subtracting two values.
    float maxval = -FLT_MAX;
    float sumval = 0.0f;

    const float4 *x_vec = reinterpret_cast<const float4 *>(x);
    for (int i = warp.thread_rank(); i < pos_by_4; i += warp.size()) {
        float4 v = x_vec[i];
        float old_maxval = maxval;
        for (int k = 0; k < 4; ++k) {
            maxval = fmaxf(maxval, vec_at(v, k));
        }
        sumval *= expf(inv_temperature * (old_maxval - maxval));
        for (int k = 0; k < 4; ++k) {
            sumval += expf(inv_temperature * (vec_at(v, k) - maxval));
        }
    }

    if (4 * pos_by_4 + warp.thread_rank() <= own_pos) {
        float old_maxval = maxval;
        maxval = fmaxf(maxval, x[4 * pos_by_4 + warp.thread_rank()]);
        sumval *= expf(inv_temperature * (old_maxval - maxval));
        sumval += expf(inv_temperature * (x[4 * pos_by_4 + warp.thread_rank()] - maxval));
    }

    float global_maxval = cg::reduce(warp, maxval, cg::greater<float>{});
    sumval *= expf(inv_temperature * (maxval - global_maxval));

    float sum = cg::reduce(warp, sumval, cg::plus<float>{});
    float norm = 1.f / sum;

    // divide the whole row by the sum
    for (int i = warp.thread_rank(); i <= own_pos; i += warp.size()) {
        // recalculation is faster than doing the round-trip through memory.
        float ev = expf(inv_temperature * (__ldcs(x + i) - global_maxval));
        __stcs(out + idx * T + i, ev * norm);
    }
}

// ------------------------------------------------------------------------------------------
// dq, dk, dv (B, NH, N, d) back into dinp (B, N, 3, NH, d)
__global__ void permute_kernel_backward(float *dinp, const float *dq, const float *dk,
                                        const float *dv, int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * NH * N * d) {
        int b = idx / (NH * N * d);
        int rest = idx % (NH * N * d);
        int nh_ = rest / (N * d);
        rest = rest % (N * d);
        int n = rest / d;
        int d_ = rest % d;

        int inp_idx = (b * N * 3 * NH * d) + (n * 3 * NH * d) + (0 * NH * d) + (nh_ * d) + d_;
        dinp[inp_idx] = dq[idx];
        dinp[inp_idx + NH * d] = dk[idx];
        dinp[inp_idx + 2 * (NH * d)] = dv[idx];
    }
}

// llama3 grouped-query attention: (B, N, (NH + 2*(NH/rf)) * HD) -> (B, N, 3 * NH * HD)
__global__ void repkv_forward_kernel1(floatX *replicated_qkv, const floatX *gqa_qkv, int B, int N,
                                      int NH, int replicate_factor, int HD) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * N * 3 * NH * HD) {
        return;
    }
    int idx_flat = idx;  // keep backup

    // decode the output index
    int d = idx % HD;
    idx /= HD;
    int nh = idx % NH;
    idx /= NH;
    int c = idx % 3;
    idx /= 3;
    int n = idx % N;
    int b = idx / N;

    int inp_idx;
    int nh_total = NH + 2 * (NH / replicate_factor);
    if (c == 0) {
        inp_idx = b * N * nh_total * HD + n * nh_total * HD + 0 * NH * HD + nh * HD + d;
    } else if (c == 1) {
        inp_idx = b * N * nh_total * HD + n * nh_total * HD + 1 * NH * HD +
                  (nh / replicate_factor) * HD + d;
    } else {
        inp_idx = b * N * nh_total * HD + n * nh_total * HD + (NH * HD + (NH / replicate_factor) * HD) +
                  (nh / replicate_factor) * HD + d;
    }

    replicated_qkv[idx_flat] = __ldcs(&gqa_qkv[inp_idx]);
}
