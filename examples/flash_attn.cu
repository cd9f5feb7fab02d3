// FlashAttention-1 style forward pass, one (batch, head) per block.
//
//   O = softmax(Q K^T * softmax_scale) V      Q, K, V, O: [B, H, N, d] row-major
//   l, m: [B, H, N], the running softmax sum and max per query row (start at 0 and -inf).
//
// Launch: grid (B, H), block (Bc) with Bc == Br threads: thread tx owns query row tx of every
// Q tile. Dynamic shared memory (3 * Bc * d + Bc * Br) floats: the tiles Qi, Kj, Vj and S.
// Outer loop over K/V tiles j, inner loop over Q tiles i; the running max and sum are kept in
// the global l and m arrays between outer iterations. N need not be a multiple of the tile:
// key columns >= N score -INFINITY (weight 0) and query rows >= N are skipped.
#include <cuda_runtime.h>
#include <math.h>

__global__ void flash_attn_fwd(const float* __restrict__ Q, const float* __restrict__ K,
                               const float* __restrict__ V, const int N, const int d,
                               const int Tc, const int Tr, const int Bc, const int Br,
                               const float softmax_scale, float* l, float* m, float* O) {
    int tx = threadIdx.x;
    int bx = blockIdx.x;
    int by = blockIdx.y;

    // Q/K/V/O are [B, H, N, d]; l/m are [B, H, N].
    int qkv_offset = (bx * gridDim.y + by) * N * d;
    int lm_offset = (bx * gridDim.y + by) * N;

    extern __shared__ float sram[];
    int tile_size = Bc * d;
    float* Qi = sram;
    float* Kj = &sram[tile_size];
    float* Vj = &sram[tile_size * 2];
    float* S = &sram[tile_size * 3];

    for (int j = 0; j < Tc; j++) {
        // Each thread loads one key row and one value row of tile j (zeros past the end).
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

        for (int i = 0; i < Tr; i++) {
            int q_row = i * Br + tx;
            // Rows past N have no output; no barrier below, so skipping them is safe.
            if (q_row < N) {
                for (int x = 0; x < d; x++) {
                    Qi[tx * d + x] = Q[qkv_offset + q_row * d + x];
                }
                float row_m_prev = m[lm_offset + q_row];
                float row_l_prev = l[lm_offset + q_row];

                // S = Qi Kj^T * scale, and the row max of this tile.
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

                // P = exp(S - row_m), row_l = rowsum(P).
                float row_l = 0.0f;
                for (int y = 0; y < Bc; y++) {
                    S[Bc * tx + y] = __expf(S[Bc * tx + y] - row_m);
                    row_l += S[Bc * tx + y];
                }

                // Merge this tile's (row_m, row_l) into the running statistics.
                float row_m_new = fmaxf(row_m_prev, row_m);
                float alpha = __expf(row_m_prev - row_m_new);
                float beta = __expf(row_m - row_m_new);
                float row_l_new = alpha * row_l_prev + beta * row_l;

                // O = (l_prev * alpha * O + beta * P Vj) / l_new
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
        }
        // Kj/Vj are overwritten by the next outer iteration.
        __syncthreads();
    }
}
