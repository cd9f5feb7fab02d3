// Decode-time attention for one query per head (inference-engine style): float4 helpers
// taking references, a struct returned from a device function, the online softmax across
// the keys, scores in dynamic shared memory. head_dim = 4 * blockDim.x... kept at 64.
#include <cuda_runtime.h>

#define HEAD_DIM 64
#define VEC (HEAD_DIM / 4)

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

__device__ __forceinline__ void axpy4(float4& acc, float s, const float4& v) {
    acc.x += s * v.x;
    acc.y += s * v.y;
    acc.z += s * v.z;
    acc.w += s * v.w;
}

__device__ __forceinline__ void scale4(float4& v, float s) {
    v.x *= s; v.y *= s; v.z *= s; v.w *= s;
}

struct Running {
    float m;
    float l;
};

__device__ Running update(Running r, float score) {
    Running n;
    n.m = fmaxf(r.m, score);
    n.l = r.l * __expf(r.m - n.m) + __expf(score - n.m);
    return n;
}

// q: [H, D], k, v: [H, S, D], out: [H, D]; a warp of 16 threads handles one head,
// each thread 4 of the 64 dimensions.
__global__ void attention_decode_kernel(float* __restrict__ out, const float* __restrict__ q,
                                        const float* __restrict__ k, const float* __restrict__ v,
                                        int seq_len, float scale) {
    const int h = blockIdx.x;
    const int t = threadIdx.x;  // 0 .. VEC-1
    const float4 qv = reinterpret_cast<const float4*>(q + h * HEAD_DIM)[t];
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    Running r = {-INFINITY, 0.f};
    for (int s = 0; s < seq_len; ++s) {
        const float4 kv = reinterpret_cast<const float4*>(k + (h * seq_len + s) * HEAD_DIM)[t];
        float part = dot4(qv, kv);
        for (int offset = VEC / 2; offset > 0; offset >>= 1)
            part += __shfl_xor_sync(0xffffffff, part, offset, VEC);
        const float score = part * scale;
        Running next = update(r, score);
        scale4(acc, __expf(r.m - next.m));
        const float4 vv = reinterpret_cast<const float4*>(v + (h * seq_len + s) * HEAD_DIM)[t];
        axpy4(acc, __expf(score - next.m), vv);
        r = next;
    }
    scale4(acc, 1.0f / r.l);
    reinterpret_cast<float4*>(out + h * HEAD_DIM)[t] = acc;
}

// The same with explicit scores kept in shared memory (two passes over the keys).
__global__ void attention_decode_two_pass(float* out, const float* q, const float* k,
                                          const float* v, int seq_len, float scale) {
    extern __shared__ float scores[];
    const int h = blockIdx.x;
    for (int s = threadIdx.x; s < seq_len; s += blockDim.x) {
        float acc = 0.f;
        for (int d = 0; d < HEAD_DIM; ++d) acc += q[h * HEAD_DIM + d] * k[(h * seq_len + s) * HEAD_DIM + d];
        scores[s] = acc * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int s = 0; s < seq_len; ++s) m = fmaxf(m, scores[s]);
    float l = 0.f;
    for (int s = 0; s < seq_len; ++s) l += expf(scores[s] - m);
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
        float acc = 0.f;
        for (int s = 0; s < seq_len; ++s) acc += expf(scores[s] - m) * v[(h * seq_len + s) * HEAD_DIM + d];
        out[h * HEAD_DIM + d] = acc / l;
    }
}
