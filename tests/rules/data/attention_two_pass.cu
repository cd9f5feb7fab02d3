// Attention written the way small inference engines often start: one thread per query row,
// the keys walked twice straight from global memory (first the row's maximum, then the
// exponentials, their sum and the weighted values), exp2 with log2(e) folded into the
// exponent, the head size a #define, pointers offset per (batch, head), an early return.
//
//   out = softmax(q k^T * scale) v      q, k, v, out: [batch * heads, seq_len, HEAD_DIM]
#include <cfloat>

#define HEAD_DIM 64
#define LOG2E 1.4426950408889634f

__global__ void attention_two_pass(const float* q, const float* k, const float* v, float* out,
                                   int seq_len, float scale) {
    const int bh = blockIdx.y;
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= seq_len) return;
    const float* q_row = q + ((size_t)bh * seq_len + row) * HEAD_DIM;
    const float* k_head = k + (size_t)bh * seq_len * HEAD_DIM;
    const float* v_head = v + (size_t)bh * seq_len * HEAD_DIM;

    float row_max = -FLT_MAX;
    for (int j = 0; j < seq_len; ++j) {
        float dot = 0.0f;
        for (int c = 0; c < HEAD_DIM; ++c) dot += q_row[c] * k_head[j * HEAD_DIM + c];
        row_max = fmaxf(row_max, dot * scale);
    }

    float acc[HEAD_DIM];
    for (int c = 0; c < HEAD_DIM; ++c) acc[c] = 0.0f;
    float denom = 0.0f;
    for (int j = 0; j < seq_len; ++j) {
        float dot = 0.0f;
        for (int c = 0; c < HEAD_DIM; ++c) dot += q_row[c] * k_head[j * HEAD_DIM + c];
        const float p = exp2f((dot * scale - row_max) * LOG2E);
        denom += p;
        for (int c = 0; c < HEAD_DIM; ++c) acc[c] += p * v_head[j * HEAD_DIM + c];
    }
    const float inv = 1.0f / denom;
    float* out_row = out + ((size_t)bh * seq_len + row) * HEAD_DIM;
    for (int c = 0; c < HEAD_DIM; ++c) out_row[c] = acc[c] * inv;
}
