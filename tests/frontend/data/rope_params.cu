// Rotary position embedding, in place, the way inference engines pass their launch
// parameters: one struct by value. x is [tokens, heads, head_dim]; each thread rotates one
// (even, odd) pair of one head of one token. The struct nests the table of frequencies'
// settings; the kernel clamps its own copy's rotary width (a write to a by-value parameter).
#include <cuda_runtime.h>

struct RotarySettings {
    float theta;
    int rotary_dim;
};

struct RopeParams {
    int tokens;
    int heads;
    int head_dim;
    int position_offset;
    RotarySettings rotary;
};

__device__ __forceinline__ float inv_frequency(const RotarySettings& r, int pair) {
    return powf(r.theta, -2.0f * (float)pair / (float)r.rotary_dim);
}

__global__ void rope_inplace(float* __restrict__ x, RopeParams p) {
    if (p.rotary.rotary_dim > p.head_dim) p.rotary.rotary_dim = p.head_dim;
    const int pairs = p.head_dim / 2;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= p.tokens * p.heads * pairs) return;
    const int pair = idx % pairs;
    const int token = idx / (pairs * p.heads);
    if (2 * pair >= p.rotary.rotary_dim) return;  // past the rotary part: unchanged
    const float angle = (float)(token + p.position_offset) * inv_frequency(p.rotary, pair);
    float s, c;
    sincosf(angle, &s, &c);
    float* v = x + (size_t)(idx / pairs) * p.head_dim + 2 * pair;
    const float a = v[0], b = v[1];
    v[0] = a * c - b * s;
    v[1] = a * s + b * c;
}
