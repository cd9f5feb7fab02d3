// llm.c-style training kernels (second batch): Packed128 / x128 loads, fused classifier,
// matmul backward bias with cg::reduce, layernorm backward with shared scratch, attention
// softmax backward, permute/unpermute for the attention qkv layout.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <float.h>
namespace cg = cooperative_groups;

typedef float floatX;
#define WARP_SIZE 32U
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

template <class ElementType>
struct alignas(16) Packed128 {
    Packed128() = default;
    __device__ explicit Packed128(int4 bits) {
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&payload, &bits, sizeof(bits));
    }
    __device__ static Packed128 constant(ElementType value) {
        Packed128 result;
        for (int k = 0; k < size; ++k) result.payload[k] = value;
        return result;
    }
    __device__ static Packed128 zeros() { return constant(0.f); }
    __device__ ElementType& operator[](int index) { return payload[index]; }
    __device__ const ElementType& operator[](int index) const { return payload[index]; }
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
__device__ Packed128<ElementType> load128(const ElementType* address) {
    return Packed128<ElementType>{*reinterpret_cast<const int4*>(address)};
}
template <class ElementType>
__device__ Packed128<ElementType> load128cs(const ElementType* address) {
    return Packed128<ElementType>{__ldcs(reinterpret_cast<const int4*>(address))};
}
template <class ElementType>
__device__ void store128(ElementType* target, Packed128<ElementType> value) {
    *reinterpret_cast<int4*>(target) = value.get_bits();
}
template <class ElementType>
__device__ void store128cs(ElementType* target, Packed128<ElementType> value) {
    __stcs(reinterpret_cast<int4*>(target), value.get_bits());
}
typedef Packed128<float> f128;
typedef Packed128<floatX> x128;

// ---------------------------------------------------------------------------------------------
// fused classifier: softmax over V, loss, and dlogits written in place of the logits

struct SoftmaxParams {
    float Scale;
    float Offset;
};

__device__ SoftmaxParams prepare_softmax_blockwide3(int64_t idx, const floatX* inp, int V, int P) {
    const floatX* x = inp + idx * P;
    float thread_maxval = -INFINITY;
    float thread_sumval = 0.0f;
    int i = (V + x128::size - 1) / x128::size + threadIdx.x - blockDim.x;
    while ((i + 1) * x128::size > V) {
        for (int k = 0; k < x128::size; ++k) {
            if (i * x128::size + k >= V) break;
            float v = (float)x[i * x128::size + k];
            float old_maxval = thread_maxval;
            thread_maxval = fmaxf(thread_maxval, v);
            thread_sumval *= expf((old_maxval - thread_maxval));
            thread_sumval += expf(v - thread_maxval);
        }
        i -= blockDim.x;
    }
    for (; i >= 0; i -= blockDim.x) {
        x128 packed_x = load128(x + i * x128::size);
        for (int k = 0; k < x128::size; ++k) {
            float v = (float)packed_x[k];
            float old_maxval = thread_maxval;
            thread_maxval = fmaxf(thread_maxval, v);
            thread_sumval *= expf((old_maxval - thread_maxval));
            thread_sumval += expf(v - thread_maxval);
        }
    }
    __shared__ float shared_maxval[WARP_SIZE];
    __shared__ float shared_sumval[WARP_SIZE];
    int num_warps = blockDim.x / 32;
    int warp_id = threadIdx.x / 32;
    int lane_id = threadIdx.x % 32;
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    float warp_maxval = cg::reduce(warp, thread_maxval, cg::greater<float>{});
    if (lane_id == 0) shared_maxval[warp_id] = warp_maxval;
    __syncthreads();
    warp_maxval = (lane_id < num_warps) ? shared_maxval[lane_id] : -FLT_MAX;
    float block_maxval = cg::reduce(warp, warp_maxval, cg::greater<float>{});
    thread_sumval *= expf(thread_maxval - block_maxval);
    float warp_sumval = cg::reduce(warp, thread_sumval, cg::plus<float>{});
    if (lane_id == 0) shared_sumval[warp_id] = warp_sumval;
    __syncthreads();
    warp_sumval = (lane_id < num_warps) ? shared_sumval[lane_id] : 0.0f;
    float block_sumval = cg::reduce(warp, warp_sumval, cg::plus<float>{});
    return SoftmaxParams{1.f / block_sumval, block_maxval};
}

__global__ void __launch_bounds__(1024, 1)
fused_classifier_kernel3(floatX* logits, floatX* losses, floatX* probs, const float dloss,
                         const int* targets, int B, int T, int V, int P) {
    int64_t idx = blockIdx.x;
    int ix = targets[idx];
    SoftmaxParams sp = prepare_softmax_blockwide3(idx, logits, V, P);
    if (threadIdx.x == 0) {
        float prob = expf((float)logits[idx * P + ix] - sp.Offset) * sp.Scale;
        losses[idx] = (floatX)(-logf(prob));
    }
    __syncthreads();  // added: thread 0 reads logits[ix] before the others overwrite it
    const floatX* logits_vec = logits + idx * P;
    for (int i = threadIdx.x; i < V / x128::size; i += blockDim.x) {
        x128 packed_logits_vec = load128(logits_vec + i * x128::size);
        x128 packed_probs;
        x128 packed_logits;
        for (int k = 0; k < x128::size; ++k) {
            int element = i * x128::size + k;
            float prob = expf((float)packed_logits_vec[k] - sp.Offset) * sp.Scale;
            packed_probs[k] = (floatX)prob;
            float indicator = (element == ix) ? 1.0f : 0.0f;
            packed_logits[k] = (floatX)((prob - indicator) * dloss);
        }
        store128(logits + idx * P + i * x128::size, packed_logits);
        if (probs != NULL) store128(probs + idx * P + i * x128::size, packed_probs);
    }
    int unaligned_start = V & ~(x128::size - 1);
    for (int i = threadIdx.x + unaligned_start; i < V; i += blockDim.x) {
        float prob = expf((float)logits_vec[i] - sp.Offset) * sp.Scale;
        float indicator = (i == ix) ? 1.0f : 0.0f;
        logits[idx * P + i] = (floatX)((prob - indicator) * dloss);
        if (probs != NULL) probs[idx * P + i] = (floatX)prob;
    }
}

// ---------------------------------------------------------------------------------------------
// dbias[c] = sum over B*T of dout[bt, c]; one block per 32 columns, warps stride over rows

__global__ void matmul_backward_bias_kernel4(float* dbias, const floatX* dout, int B, int T, int OC) {
    extern __shared__ float smem[];  // size: 32 * blockDim.x / 32 floats
    const int warp_id = threadIdx.x / warpSize;
    const int lane_id = threadIdx.x % warpSize;
    const int tl = blockIdx.x * warpSize;
    const int vstep = blockDim.x / warpSize;
    const floatX* dout_col = dout + tl + lane_id;
    float dout_sum = 0.0f;
    for (int row = warp_id; row < B * T; row += vstep) {
        dout_sum += (float)dout_col[row * OC];
    }
    smem[lane_id + warp_id * warpSize] = dout_sum;
    __syncthreads();
    dout_sum = 0.0f;
    if (warp_id == 0) {
        for (int j = 0; j < vstep; j++) dout_sum += smem[lane_id + j * warpSize];
        dbias[tl + lane_id] += dout_sum;
    }
}

// cg::reduce per output channel: one warp per channel
__global__ void matmul_backward_bias_kernel2(float* dbias, const float* dout, int B, int T, int OC) {
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= OC) return;
    int BT = B * T;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < BT; i += warp.size()) sum += dout[i * OC + idx];
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    if (warp.thread_rank() == 0) dbias[idx] += sum;
}

// ---------------------------------------------------------------------------------------------
// layernorm backward: one warp per row, dweight/dbias accumulated in shared memory then
// atomically into global

__global__ void layernorm_backward_kernel2(float* dinp, float* dweight, float* dbias,
                                           const float* dout, const float* inp, const float* weight,
                                           const float* mean, const float* rstd, int B, int T, int C) {
    extern __shared__ float shared[];
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    int N = B * T;
    float* dbias_shared = shared;
    float* dweight_shared = shared + C;
    #pragma unroll
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        dbias_shared[i] = 0.0f;
        dweight_shared[i] = 0.0f;
    }
    __syncthreads();
    if (idx < N) {
        int b = idx / T;
        int t = idx % T;
        const float* dout_bt = dout + b * T * C + t * C;
        const float* inp_bt = inp + b * T * C + t * C;
        float* dinp_bt = dinp + b * T * C + t * C;
        const float mean_bt = mean[b * T + t];
        const float rstd_bt = rstd[b * T + t];
        float dnorm_mean = 0.0f;
        float dnorm_norm_mean = 0.0f;
        for (int i = warp.thread_rank(); i < C; i += warp.size()) {
            float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
            float dnorm_i = weight[i] * dout_bt[i];
            dnorm_mean += dnorm_i;
            dnorm_norm_mean += dnorm_i * norm_bti;
        }
        dnorm_mean = cg::reduce(warp, dnorm_mean, cg::plus<float>{});
        dnorm_norm_mean = cg::reduce(warp, dnorm_norm_mean, cg::plus<float>{});
        dnorm_mean = dnorm_mean / C;
        dnorm_norm_mean = dnorm_norm_mean / C;
        for (int i = warp.thread_rank(); i < C; i += warp.size()) {
            float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
            float dnorm_i = weight[i] * dout_bt[i];
            atomicAdd(&dbias_shared[i], dout_bt[i]);
            atomicAdd(&dweight_shared[i], norm_bti * dout_bt[i]);
            float dval = 0.0f;
            dval += dnorm_i;
            dval -= dnorm_mean;
            dval -= norm_bti * dnorm_norm_mean;
            dval *= rstd_bt;
            dinp_bt[i] += dval;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        atomicAdd(&dbias[i], dbias_shared[i]);
        atomicAdd(&dweight[i], dweight_shared[i]);
    }
}

// ---------------------------------------------------------------------------------------------
// attention: causal softmax backward, one block per (b, h, t) row

__global__ void softmax_autoregressive_backward_kernel(float* dpreatt, const float* datt,
                                                       const float* att, int B, int T, int C,
                                                       float scale) {
    constexpr const int BlockSize = 256;
    constexpr int T_per_block = 4;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float block_acc[32];
    int idx = blockIdx.y;
    int t0 = T - 1 - T_per_block * blockIdx.x;
    att += idx * T * T;
    datt += idx * T * T;
    dpreatt += idx * T * T;
    if (warp.meta_group_rank() == 0) block_acc[warp.thread_rank()] = 0;
    block.sync();
    for (int to = 0; to < T_per_block; ++to) {
        int t = t0 - to;
        if (t < 0) return;
        const float* att_bth = att + t * T;
        const float* datt_bth = datt + t * T;
        float* dpreatt_bth = dpreatt + t * T;
        float local_sum = 0;
        for (int t2 = block.thread_rank(); t2 <= t; t2 += BlockSize) {
            local_sum += att_bth[t2] * datt_bth[t2];
        }
        block_acc[warp.meta_group_rank()] = cg::reduce(warp, local_sum, cg::plus<float>{});
        block.sync();
        local_sum = cg::reduce(warp, block_acc[warp.thread_rank()], cg::plus<float>{});
        for (int t3 = block.thread_rank(); t3 <= t; t3 += BlockSize) {
            float acc = __ldcs(att_bth + t3) * (__ldcs(datt_bth + t3) - local_sum);
            __stcs(dpreatt_bth + t3, scale * acc);
        }
        block.sync();
    }
}

// ---------------------------------------------------------------------------------------------
// qkv (B, T, 3, NH, d) -> q, k, v (B, NH, T, d)

__global__ void permute_kernel(float* q, float* k, float* v, const float* inp, int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * NH * N * d) {
        int b = idx / (NH * N * d);
        int rest = idx % (NH * N * d);
        int nh_ = rest / (N * d);
        rest = rest % (N * d);
        int n = rest / d;
        int d_ = rest % d;
        int inp_idx = (b * N * 3 * NH * d) + (n * 3 * NH * d) + (0 * NH * d) + (nh_ * d) + d_;
        q[idx] = __ldcs(&inp[inp_idx]);
        k[idx] = __ldcs(&inp[inp_idx + NH * d]);
        v[idx] = __ldcs(&inp[inp_idx + 2 * (NH * d)]);
    }
}

__global__ void unpermute_kernel(float* inp, float* out, int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * NH * N * d) {
        int b = idx / (NH * N * d);
        int rest = idx % (NH * N * d);
        int nh_ = rest / (N * d);
        rest = rest % (N * d);
        int n = rest / d;
        int d_ = rest % d;
        int other_idx = (b * NH * N * d) + (n * NH * d) + (nh_ * d) + d_;
        out[other_idx] = __ldcs(&inp[idx]);
    }
}
