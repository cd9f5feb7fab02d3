// examples/flash_attn.cu with the two tile loops interchanged (query tiles outside, K/V tiles
// inside, the FlashAttention-2 order), so each thread's l/m/O row is invariant in the inner
// loop: the input for promote-to-registers tests.
__global__ void flash_attn_fwd(const float* __restrict__ Q, const float* __restrict__ K,
                               const float* __restrict__ V, const int N, const int d,
                               const int Tc, const int Tr, const int Bc, const int Br,
                               const float softmax_scale, float* l, float* m, float* O) {
    int tx = threadIdx.x;
    int bx = blockIdx.x;
    int by = blockIdx.y;
    int qkv_offset = (bx * gridDim.y + by) * N * d;
    int lm_offset = (bx * gridDim.y + by) * N;
    extern __shared__ float sram[];
    int tile_size = Bc * d;
    float* Qi = sram;
    float* Kj = &sram[tile_size];
    float* Vj = &sram[tile_size * 2];
    float* S = &sram[tile_size * 3];
    for (int i = 0; i < Tr; i++) {
        int q_row = i * Br + tx;
        for (int j = 0; j < Tc; j++) {
            int kv_row = j * Bc + tx;
            for (int x = 0; x < d; x++) {
                if (kv_row < N) {
                    Kj[tx * d + x] = K[qkv_offset + kv_row * d + x];
                    Vj[tx * d + x] = V[qkv_offset + kv_row * d + x];
                } else {
                    Kj[tx * d + x] = 0.0f;
                    Vj[tx * d + x] = 0.0f;
                }
            }
            __syncthreads();
            if (q_row < N) {
                for (int x = 0; x < d; x++) {
                    Qi[tx * d + x] = Q[qkv_offset + q_row * d + x];
                }
                float row_m_prev = m[lm_offset + q_row];
                float row_l_prev = l[lm_offset + q_row];
                float row_m = -INFINITY;
                for (int y = 0; y < Bc; y++) {
                    float sum = 0.0f;
                    for (int x = 0; x < d; x++) {
                        sum += Qi[tx * d + x] * Kj[y * d + x];
                    }
                    sum *= softmax_scale;
                    if (j * Bc + y >= N) {
                        sum = -INFINITY;
                    }
                    S[Bc * tx + y] = sum;
                    if (sum > row_m) {
                        row_m = sum;
                    }
                }
                float row_l = 0.0f;
                for (int y = 0; y < Bc; y++) {
                    S[Bc * tx + y] = __expf(S[Bc * tx + y] - row_m);
                    row_l += S[Bc * tx + y];
                }
                float row_m_new = fmaxf(row_m_prev, row_m);
                float alpha = __expf(row_m_prev - row_m_new);
                float beta = __expf(row_m - row_m_new);
                float row_l_new = alpha * row_l_prev + beta * row_l;
                for (int x = 0; x < d; x++) {
                    float pv = 0.0f;
                    for (int y = 0; y < Bc; y++) {
                        pv += S[Bc * tx + y] * Vj[y * d + x];
                    }
                    int o_idx = qkv_offset + q_row * d + x;
                    O[o_idx] = (1.0f / row_l_new) *
                               (row_l_prev * alpha * O[o_idx] + beta * pv);
                }
                m[lm_offset + q_row] = row_m_new;
                l[lm_offset + q_row] = row_l_new;
            }
            __syncthreads();
        }
    }
}
