// FlashAttention-style forward kernels: FA1 with causal masking and a per-tile softmax
// helper, FA2-style (each thread owns a query row, running max/sum in registers, one write at
// the end, logsumexp out), and a decode split-K attention with a combine kernel.
#include <cuda_runtime.h>
#include <math_constants.h>

__device__ __forceinline__ float dot_row(const float* __restrict__ a, const float* __restrict__ b, int d) {
    float s = 0.f;
    for (int x = 0; x < d; x++) s += a[x] * b[x];
    return s;
}

// FA1 with causal mask: grid (B, nh), block Bc threads; Br == Bc
__global__ void flash_fwd_causal(const float* Q, const float* K, const float* V, const int N, const int d,
                                 const int Tc, const int Tr, const int Bc, const int Br,
                                 const float softmax_scale, float* l, float* m, float* O) {
    int tx = threadIdx.x;
    int bx = blockIdx.x;
    int by = blockIdx.y;
    int qkv_offset = (bx * gridDim.y * N * d) + (by * N * d);
    int lm_offset = (bx * gridDim.y * N) + (by * N);
    extern __shared__ float sram[];
    int tile_size = Bc * d;
    float* Qi = sram;
    float* Kj = &sram[tile_size];
    float* Vj = &sram[tile_size * 2];
    float* S = &sram[tile_size * 3];
    for (int j = 0; j < Tc; j++) {
        for (int x = 0; x < d; x++) {
            Kj[(tx * d) + x] = K[qkv_offset + (tile_size * j) + (tx * d) + x];
            Vj[(tx * d) + x] = V[qkv_offset + (tile_size * j) + (tx * d) + x];
        }
        __syncthreads();
        for (int i = j; i < Tr; i++) {  // causal: query tiles at or after this key tile
            for (int x = 0; x < d; x++) Qi[(tx * d) + x] = Q[qkv_offset + (tile_size * i) + (tx * d) + x];
            float row_m_prev = m[lm_offset + (Br * i) + tx];
            float row_l_prev = l[lm_offset + (Br * i) + tx];
            const int qpos = i * Br + tx;
            float row_m = -INFINITY;
            for (int y = 0; y < Bc; y++) {
                const int kpos = j * Bc + y;
                float sum = dot_row(&Qi[tx * d], &Kj[y * d], d) * softmax_scale;
                if (kpos > qpos) sum = -INFINITY;
                S[(Bc * tx) + y] = sum;
                row_m = fmaxf(row_m, sum);
            }
            float row_l = 0;
            for (int y = 0; y < Bc; y++) {
                float p = (row_m == -INFINITY) ? 0.f : __expf(S[(Bc * tx) + y] - row_m);
                S[(Bc * tx) + y] = p;
                row_l += p;
            }
            float row_m_new = max(row_m_prev, row_m);
            float alpha = __expf(row_m_prev - row_m_new);
            float beta = (row_m == -INFINITY) ? 0.f : __expf(row_m - row_m_new);
            float row_l_new = alpha * row_l_prev + beta * row_l;
            for (int x = 0; x < d; x++) {
                float pv = 0;
                for (int y = 0; y < Bc; y++) pv += S[(Bc * tx) + y] * Vj[(y * d) + x];
                O[qkv_offset + (tile_size * i) + (tx * d) + x] =
                    (1 / row_l_new) * ((row_l_prev * alpha * O[qkv_offset + (tile_size * i) + (tx * d) + x]) + (beta * pv));
            }
            m[lm_offset + (Br * i) + tx] = row_m_new;
            l[lm_offset + (Br * i) + tx] = row_l_new;
        }
        __syncthreads();
    }
}

// FA2-style: grid (N / Br, B * nh), Br threads; each thread keeps its query row and output
// accumulator in registers (D fixed at compile time), K/V tiles staged in shared memory
template <int Br, int Bc, int D>
__global__ void flash2_fwd(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                           float* __restrict__ O, float* __restrict__ L, int N, float scale) {
    __shared__ float Ks[Bc][D];
    __shared__ float Vs[Bc][D];
    const int bh = blockIdx.y;
    const int row = blockIdx.x * Br + threadIdx.x;
    const size_t base = (size_t)bh * N * D;
    float q[D];
    float acc[D];
#pragma unroll
    for (int x = 0; x < D; ++x) {
        q[x] = Q[base + (size_t)row * D + x] * scale;
        acc[x] = 0.f;
    }
    float m_i = -CUDART_INF_F;
    float l_i = 0.f;
    for (int kb = 0; kb < N; kb += Bc) {
        for (int e = threadIdx.x; e < Bc * D; e += Br) {
            Ks[e / D][e % D] = K[base + (size_t)kb * D + e];
            Vs[e / D][e % D] = V[base + (size_t)kb * D + e];
        }
        __syncthreads();
        float s[Bc];
        float m_new = m_i;
#pragma unroll
        for (int c = 0; c < Bc; ++c) {
            float dot = 0.f;
#pragma unroll
            for (int x = 0; x < D; ++x) dot += q[x] * Ks[c][x];
            s[c] = dot;
            m_new = fmaxf(m_new, dot);
        }
        const float corr = __expf(m_i - m_new);
        l_i *= corr;
#pragma unroll
        for (int x = 0; x < D; ++x) acc[x] *= corr;
#pragma unroll
        for (int c = 0; c < Bc; ++c) {
            const float p = __expf(s[c] - m_new);
            l_i += p;
#pragma unroll
            for (int x = 0; x < D; ++x) acc[x] += p * Vs[c][x];
        }
        m_i = m_new;
        __syncthreads();
    }
    const float inv_l = __fdividef(1.0f, l_i);
#pragma unroll
    for (int x = 0; x < D; ++x) O[base + (size_t)row * D + x] = acc[x] * inv_l;
    L[(size_t)bh * N + row] = m_i + __logf(l_i);
}

// split-K decode: one warp per (head, split); partial out + max + sum per split
template <int HEAD_DIM>
__global__ void decode_split_kernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                                    const float* __restrict__ v_cache, float* __restrict__ part_out,
                                    float* __restrict__ part_m, float* __restrict__ part_l,
                                    int seq_len, int num_splits, float scale) {
    constexpr int VPT = HEAD_DIM / 32;  // values per lane
    const int head = blockIdx.x;
    const int split = blockIdx.y;
    const int lane = threadIdx.x;
    const int chunk = (seq_len + num_splits - 1) / num_splits;
    const int start = split * chunk;
    const int end = min(start + chunk, seq_len);
    float qv[VPT], acc[VPT];
    for (int i = 0; i < VPT; i++) {
        qv[i] = q[head * HEAD_DIM + lane + 32 * i];
        acc[i] = 0.f;
    }
    float mx = -INFINITY, sum = 0.f;
    for (int t = start; t < end; ++t) {
        const float* kr = k_cache + ((size_t)head * seq_len + t) * HEAD_DIM;
        float s = 0.f;
        for (int i = 0; i < VPT; i++) s += qv[i] * kr[lane + 32 * i];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        s *= scale;
        const float nm = fmaxf(mx, s);
        const float c = expf(mx - nm);
        const float p = expf(s - nm);
        sum = sum * c + p;
        const float* vr = v_cache + ((size_t)head * seq_len + t) * HEAD_DIM;
        for (int i = 0; i < VPT; i++) acc[i] = acc[i] * c + p * vr[lane + 32 * i];
        mx = nm;
    }
    const int ps = head * num_splits + split;
    for (int i = 0; i < VPT; i++) part_out[(size_t)ps * HEAD_DIM + lane + 32 * i] = acc[i];
    if (lane == 0) {
        part_m[ps] = mx;
        part_l[ps] = sum;
    }
}

template <int HEAD_DIM>
__global__ void decode_combine_kernel(const float* __restrict__ part_out, const float* __restrict__ part_m,
                                      const float* __restrict__ part_l, float* __restrict__ out, int num_splits) {
    const int head = blockIdx.x;
    const int x = threadIdx.x;  // HEAD_DIM threads
    float gm = -INFINITY;
    for (int s = 0; s < num_splits; ++s) gm = fmaxf(gm, part_m[head * num_splits + s]);
    float num = 0.f, den = 0.f;
    for (int s = 0; s < num_splits; ++s) {
        const float w = part_l[head * num_splits + s] == 0.f ? 0.f : expf(part_m[head * num_splits + s] - gm);
        num += w * part_out[(size_t)(head * num_splits + s) * HEAD_DIM + x];
        den += w * part_l[head * num_splits + s];
    }
    out[head * HEAD_DIM + x] = num / den;
}
