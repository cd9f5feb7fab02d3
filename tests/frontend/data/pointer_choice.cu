// Pointers chosen at run time between buffers, as inference engines write them.

// A fused QKV projection [T, 3, HD] split into q, k and v [T, HD]: a grid-stride loop, the
// destination picked among three buffers by a nested ?:.
__global__ void split_qkv(const float* __restrict__ qkv, float* q, float* k, float* v, int T,
                          int HD) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < T * 3 * HD;
         idx += gridDim.x * blockDim.x) {
        const int t = idx / (3 * HD), which = (idx / HD) % 3, e = idx % HD;
        float* dst = which == 0 ? q : (which == 1 ? k : v);
        dst[t * HD + e] = qkv[idx];
    }
}

#define HEAD 64

// RMS norm of each q head and each k head in place, a warp a head: the head's row and its
// weights both chosen by whether the warp's head is a q head.
__global__ void qk_rms_norm(float* q, float* k, const float* q_gain, const float* k_gain,
                            int tokens, int q_heads, int k_heads, float eps) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int per_token = q_heads + k_heads;
    if (warp >= tokens * per_token) return;
    const int token = warp / per_token, head = warp % per_token;
    const bool is_q = head < q_heads;
    float* row = is_q ? q + (token * q_heads + head) * HEAD
                      : k + (token * k_heads + head - q_heads) * HEAD;
    const float* gain = is_q ? q_gain : k_gain;
    float a = row[lane], b = row[lane + 32];
    float ss = a * a + b * b;
    for (int m = 16; m > 0; m >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, m);
    const float r = rsqrtf(ss / HEAD + eps);
    row[lane] = a * r * gain[lane];
    row[lane + 32] = b * r * gain[lane + 32];
}
