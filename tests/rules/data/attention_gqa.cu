// Grouped-query attention as decoder inference engines run prefill: K and V carry fewer
// heads than Q (each K/V head serves H / H_KV consecutive query heads), [B, heads, N, 64]
// buffers, one thread a query row with the online softmax over every key, the batch and
// query head from blockIdx.y.
#define HEAD_DIM 64

__global__ void gqa_prefill(const float* q, const float* k, const float* v, float* o, int n,
                            int n_heads, int n_kv_heads, float scale) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int b = blockIdx.y / n_heads, h = blockIdx.y % n_heads;
    const int kv_h = h / (n_heads / n_kv_heads);
    if (row >= n) return;
    const float* qr = q + ((b * n_heads + h) * n + row) * HEAD_DIM;
    const float* kh = k + (b * n_kv_heads + kv_h) * n * HEAD_DIM;
    const float* vh = v + (b * n_kv_heads + kv_h) * n * HEAD_DIM;
    float m = -INFINITY, l = 0.0f, acc[HEAD_DIM];
    for (int c = 0; c < HEAD_DIM; ++c) acc[c] = 0.0f;
    for (int j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int c = 0; c < HEAD_DIM; ++c) s += qr[c] * kh[j * HEAD_DIM + c];
        s *= scale;
        const float m_new = fmaxf(m, s), corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
        for (int c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * corr + p * vh[j * HEAD_DIM + c];
        m = m_new;
    }
    float* orow = o + ((b * n_heads + h) * n + row) * HEAD_DIM;
    for (int c = 0; c < HEAD_DIM; ++c) orow[c] = acc[c] / l;
}
