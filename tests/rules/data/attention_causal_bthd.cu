// Causal self-attention as LLM training code often writes its first version: activations
// laid out [B, T, NH, HS] (the heads inside each token, as a QKV projection leaves them), a
// grid-stride loop over every (batch, token, head), one thread a query row with the online
// softmax (running maximum and sum, one pass over the keys it may see), the scale computed
// in the kernel.
constexpr int HS = 64;

__device__ __forceinline__ const float* row_at(const float* base, int b, int t, int h, int T,
                                                int NH) {
    return base + (((size_t)b * T + t) * NH + h) * HS;
}

__global__ void causal_attention(const float* __restrict__ q, const float* __restrict__ k,
                                 const float* __restrict__ v, float* __restrict__ out,
                                 int B, int T, int NH) {
    const float scale = rsqrtf((float)HS);
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < B * T * NH;
         idx += gridDim.x * blockDim.x) {
        const int h = idx % NH;
        const int t = (idx / NH) % T;
        const int b = idx / (NH * T);
        const float* qt = row_at(q, b, t, h, T, NH);
        float m = -INFINITY, l = 0.0f;
        float acc[HS];
#pragma unroll
        for (int i = 0; i < HS; i++) acc[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float* kt = row_at(k, b, t2, h, T, NH);
            float s = 0.0f;
            for (int i = 0; i < HS; i++) s += qt[i] * kt[i];
            s *= scale;
            const float m_new = fmaxf(m, s);
            const float correction = expf(m - m_new);
            const float p = expf(s - m_new);
            l = l * correction + p;
            const float* vt = row_at(v, b, t2, h, T, NH);
            for (int i = 0; i < HS; i++) acc[i] = acc[i] * correction + p * vt[i];
            m = m_new;
        }
        float* ot = out + (((size_t)b * T + t) * NH + h) * HS;
        for (int i = 0; i < HS; i++) ot[i] = acc[i] / l;
    }
}
