// Scans and selections: Mamba-style chunked selective scan with a warp associative scan over
// (a, b) pairs, a Kogge-Stone block inclusive scan with a warp-sums array, per-row top-k by
// repeated warp argmax, argmax with __ballot_sync / __ffs, stream compaction with
// warp-aggregated atomics, and a segmented (per-row) cumulative sum with a lambda.
#include <cuda_runtime.h>
#include <cfloat>

#define FULL 0xffffffffu

struct ScanPair {
    float a;  // decay
    float b;  // input contribution
};

__device__ __forceinline__ ScanPair combine(const ScanPair& l, const ScanPair& r) {
    // apply l then r: h -> r.a * (l.a * h + l.b) + r.b
    return ScanPair{l.a * r.a, r.a * l.b + r.b};
}

__device__ __forceinline__ ScanPair warp_inclusive_scan(ScanPair v, int lane) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        ScanPair up;
        up.a = __shfl_up_sync(FULL, v.a, off);
        up.b = __shfl_up_sync(FULL, v.b, off);
        if (lane >= off) v = combine(up, v);
    }
    return v;
}

// h_t = exp(dt_t * A) * h_{t-1} + dt_t * B_t * x_t ; y_t = C_t * h_t
// grid: (batch * dim), block: 32 threads; L processed in chunks of 32 with a carried state
__global__ void mamba_chunk_scan(const float* __restrict__ x, const float* __restrict__ dt,
                                 const float* __restrict__ A, const float* __restrict__ Bm,
                                 const float* __restrict__ Cm, float* __restrict__ y, int dim, int L) {
    const int bd = blockIdx.x;
    const int b = bd / dim;
    const int d = bd % dim;
    const int lane = threadIdx.x;
    const float a_d = A[d];
    float carry = 0.f;
    for (int t0 = 0; t0 < L; t0 += 32) {
        const int t = t0 + lane;
        ScanPair p{1.f, 0.f};
        if (t < L) {
            const size_t off = ((size_t)b * dim + d) * L + t;
            const float delta = dt[off];
            p.a = __expf(delta * a_d);
            p.b = delta * Bm[(size_t)b * L + t] * x[off];
        }
        ScanPair s = warp_inclusive_scan(p, lane);
        const float h = s.a * carry + s.b;
        if (t < L) y[((size_t)b * dim + d) * L + t] = h * Cm[(size_t)b * L + t];
        carry = __shfl_sync(FULL, h, 31);
    }
}

// block inclusive scan of blockDim.x elements per block (Kogge-Stone in warps, then warp sums)
__global__ void block_inclusive_scan(const int* __restrict__ in, int* __restrict__ out, int* __restrict__ block_sums, int n) {
    __shared__ int warp_sums[32];
    const unsigned gid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x & 31u;
    const unsigned wid = threadIdx.x >> 5;
    int v = gid < n ? in[gid] : 0;
    for (unsigned o = 1; o < 32; o <<= 1) {
        int t = __shfl_up_sync(FULL, v, o);
        if (lane >= o) v += t;
    }
    if (lane == 31) warp_sums[wid] = v;
    __syncthreads();
    if (wid == 0) {
        int w = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0;
        for (unsigned o = 1; o < 32; o <<= 1) {
            int t = __shfl_up_sync(FULL, w, o);
            if (lane >= o) w += t;
        }
        warp_sums[lane] = w;
    }
    __syncthreads();
    if (wid > 0) v += warp_sums[wid - 1];
    if (gid < n) out[gid] = v;
    if (threadIdx.x == blockDim.x - 1) block_sums[blockIdx.x] = v;
}

// top-k per row, k small: one warp per row, k rounds of warp argmax; the winner is knocked out
template <int K_MAX>
__global__ void topk_rows_warp(const float* __restrict__ in, float* __restrict__ out_vals,
                               int* __restrict__ out_idx, int rows, int cols, int k) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float* r = in + (size_t)row * cols;
    int taken[K_MAX];
    for (int j = 0; j < K_MAX; ++j) taken[j] = -1;
    for (int j = 0; j < k; ++j) {
        float best = -FLT_MAX;
        int best_i = 0x7fffffff;
        for (int c = lane; c < cols; c += 32) {
            bool used = false;
            for (int q = 0; q < j; ++q) used |= (taken[q] == c);
            float v = r[c];
            if (!used && (v > best || (v == best && c < best_i))) {
                best = v;
                best_i = c;
            }
        }
        for (int off = 16; off > 0; off >>= 1) {
            float ov = __shfl_down_sync(FULL, best, off);
            int oi = __shfl_down_sync(FULL, best_i, off);
            if (ov > best || (ov == best && oi < best_i)) {
                best = ov;
                best_i = oi;
            }
        }
        best = __shfl_sync(FULL, best, 0);
        best_i = __shfl_sync(FULL, best_i, 0);
        taken[j] = best_i;
        if (lane == 0) {
            out_vals[(size_t)row * k + j] = best;
            out_idx[(size_t)row * k + j] = best_i;
        }
    }
}

// argmax per row with a ballot: lanes holding the warp max vote, the lowest voting lane wins
__global__ void argmax_ballot(const float* __restrict__ logits, int* __restrict__ out, int V) {
    const int row = blockIdx.x;
    const int lane = threadIdx.x;  // 32 threads
    float best = -INFINITY;
    int bi = 0;
    for (int c = lane; c < V; c += 32) {
        float v = logits[(size_t)row * V + c];
        if (v > best) { best = v; bi = c; }
    }
    float m = best;
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
    // lowest column index among lanes holding the max
    unsigned ballot = __ballot_sync(FULL, best == m);
    int cand = (best == m) ? bi : 0x7fffffff;
    for (int o = 16; o; o >>= 1) cand = min(cand, __shfl_xor_sync(FULL, cand, o));
    if (lane == __ffs(ballot) - 1) out[row] = cand;
}

// stream compaction of positive values: warp-aggregated atomic on a global counter
__device__ __forceinline__ unsigned lane_id() { return threadIdx.x & 31; }

__global__ void compact_positive(const float* __restrict__ in, float* __restrict__ out, int* __restrict__ count, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const float v = in[i];
        const bool keep = v > 0.f;
        const unsigned mask = __ballot_sync(__activemask(), keep);
        if (keep) {
            const int leader = __ffs(mask) - 1;
            int base = 0;
            if ((int)lane_id() == leader) base = atomicAdd(count, __popc(mask));
            base = __shfl_sync(mask, base, leader);
            const unsigned rank = __popc(mask & ((1u << lane_id()) - 1));
            out[base + rank] = v;
        }
    }
}

// per-row cumulative sum, one block per row, serial per-thread chunks + block scan of chunk sums
__global__ void cumsum_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    extern __shared__ float part[];
    const int row = blockIdx.x;
    const int per = (cols + blockDim.x - 1) / blockDim.x;
    const int c0 = threadIdx.x * per;
    const int c1 = min(c0 + per, cols);
    auto at = [&](int c) -> float { return x[(size_t)row * cols + c]; };
    float s = 0.f;
    for (int c = c0; c < c1; ++c) s += at(c);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int off = 1; off < blockDim.x; off <<= 1) {
        float t = threadIdx.x >= off ? part[threadIdx.x - off] : 0.f;
        __syncthreads();
        part[threadIdx.x] += t;
        __syncthreads();
    }
    float run = threadIdx.x > 0 ? part[threadIdx.x - 1] : 0.f;
    for (int c = c0; c < c1; ++c) {
        run += at(c);
        y[(size_t)row * cols + c] = run;
    }
}
