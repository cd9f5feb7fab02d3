// FlashAttention-1 forward with its host program (tutorial style).
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

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

// Host side in the style of small FlashAttention tutorials: sizes as constants, tiles of
// Bc x Br, dynamic shared memory for the Q, K, V tiles and S.
int main() {
    const int B = 2;
    const int nh = 2;
    const int N = 80;
    const int d = 16;
    const int Bc = 16;
    const int Br = 16;
    const int Tc = ceil((float)N / Bc);
    const int Tr = ceil((float)N / Br);
    const float softmax_scale = 1.0 / sqrt(d);

    size_t qkv_bytes = B * nh * N * d * sizeof(float);
    float *h_Q = (float*)malloc(qkv_bytes), *h_K = (float*)malloc(qkv_bytes);
    float *h_V = (float*)malloc(qkv_bytes);
    float *h_m = (float*)malloc(B * nh * N * sizeof(float));
    for (int i = 0; i < B * nh * N * d; i++) {
        h_Q[i] = 2.0f * rand() / RAND_MAX - 1.0f;
        h_K[i] = 2.0f * rand() / RAND_MAX - 1.0f;
        h_V[i] = 2.0f * rand() / RAND_MAX - 1.0f;
    }
    for (int i = 0; i < B * nh * N; i++) h_m[i] = -INFINITY;

    float *Q, *K, *V, *O, *l, *m;
    cudaMalloc(&Q, qkv_bytes);
    cudaMalloc(&K, qkv_bytes);
    cudaMalloc(&V, qkv_bytes);
    cudaMalloc(&O, qkv_bytes);
    cudaMalloc(&l, B * nh * N * sizeof(float));
    cudaMalloc(&m, B * nh * N * sizeof(float));
    cudaMemcpy(Q, h_Q, qkv_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(K, h_K, qkv_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(V, h_V, qkv_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(m, h_m, B * nh * N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(l, 0, B * nh * N * sizeof(float));
    cudaMemset(O, 0, qkv_bytes);

    const int sram_size = (3 * Bc * d * sizeof(float)) + (Bc * Br * sizeof(float));
    dim3 grid_dim(B, nh);
    dim3 block_dim(Bc);
    flash_attn_fwd<<<grid_dim, block_dim, sram_size>>>(Q, K, V, N, d, Tc, Tr, Bc, Br,
                                                       softmax_scale, l, m, O);
    cudaDeviceSynchronize();
    cudaFree(Q); cudaFree(K); cudaFree(V); cudaFree(O); cudaFree(l); cudaFree(m);
    free(h_Q); free(h_K); free(h_V); free(h_m);
    return 0;
}
