"""Which structure a row-wise kernel (softmax, layer norm) at 8192 x 8192 needs on MLX's CUDA
back end to beat MLX's built-in: hand-written kernels through ``mx.fast.cuda_kernel``, one
change each, timed next to ``mx.softmax`` / ``mx.fast.layer_norm`` in the same process
(median of 20 after 5 warm-ups, ``mx.eval`` per call; each result checked against numpy).

- ``reread``: every pass reads the row from global memory again (float4 loads), as the
  kernels kir emits today do (softmax: an online max/sum pass then the write pass; layer
  norm: mean, variance and write passes, one warp a row);
- ``fused-stats`` (layer norm): sum and sum of squares in one pass, var = E[x^2] - mean^2;
- ``registers``: the row read once into registers (each thread keeps its float4s), every
  later pass reads the registers — one block a row;
- ``shared``: the row staged once in shared memory (32 KB), later passes read it there.

    python3 benchmarks/row_probe.py
"""

from __future__ import annotations

import numpy as np
from mlx_timing import median_ms

ROWS = COLS = 8192

_BLOCK_REDUCE = """
template <bool MAX>
__device__ float block_reduce(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    int warps = blockDim.x / 32;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float r = scratch[0];
    for (int w = 1; w < warps; ++w) r = MAX ? fmaxf(r, scratch[w]) : r + scratch[w];
    return r;
}
"""

# Softmax, one block a row, float4 loads; PER = float4s a thread keeps (register variant).
_SOFTMAX = {
    "reread": (256, """
    __shared__ float scratch[32];
    const float4* in = reinterpret_cast<const float4*>(x) + (size_t)blockIdx.x * (COLS / 4);
    float4* out = reinterpret_cast<float4*>(y) + (size_t)blockIdx.x * (COLS / 4);
    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x; c < COLS / 4; c += blockDim.x) {
        float4 v = in[c];
        float mv = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        float nm = fmaxf(m, mv);
        s = s * __expf(m - nm) + __expf(v.x - nm) + __expf(v.y - nm) + __expf(v.z - nm)
            + __expf(v.w - nm);
        m = nm;
    }
    float rm = block_reduce<true>(m, scratch);
    float rs = block_reduce<false>(s * __expf(m - rm), scratch);
    float inv = 1.0f / rs;
    for (int c = threadIdx.x; c < COLS / 4; c += blockDim.x) {
        float4 v = in[c];
        out[c] = make_float4(__expf(v.x - rm) * inv, __expf(v.y - rm) * inv,
                             __expf(v.z - rm) * inv, __expf(v.w - rm) * inv);
    }
"""),
    "registers": (1024, """
    __shared__ float scratch[32];
    constexpr int PER = COLS / 4 / 1024;
    const float4* in = reinterpret_cast<const float4*>(x) + (size_t)blockIdx.x * (COLS / 4);
    float4* out = reinterpret_cast<float4*>(y) + (size_t)blockIdx.x * (COLS / 4);
    float4 r[PER];
    float m = -INFINITY;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        r[k] = in[threadIdx.x + k * 1024];
        m = fmaxf(m, fmaxf(fmaxf(r[k].x, r[k].y), fmaxf(r[k].z, r[k].w)));
    }
    float rm = block_reduce<true>(m, scratch);
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < PER; ++k)
        s += __expf(r[k].x - rm) + __expf(r[k].y - rm) + __expf(r[k].z - rm) + __expf(r[k].w - rm);
    float inv = 1.0f / block_reduce<false>(s, scratch);
    #pragma unroll
    for (int k = 0; k < PER; ++k)
        out[threadIdx.x + k * 1024] = make_float4(__expf(r[k].x - rm) * inv, __expf(r[k].y - rm) * inv,
                                                  __expf(r[k].z - rm) * inv, __expf(r[k].w - rm) * inv);
"""),
    "shared": (256, """
    __shared__ float scratch[32];
    __shared__ float4 row[COLS / 4];
    const float4* in = reinterpret_cast<const float4*>(x) + (size_t)blockIdx.x * (COLS / 4);
    float4* out = reinterpret_cast<float4*>(y) + (size_t)blockIdx.x * (COLS / 4);
    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x; c < COLS / 4; c += blockDim.x) {
        float4 v = in[c];
        row[c] = v;
        float mv = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        float nm = fmaxf(m, mv);
        s = s * __expf(m - nm) + __expf(v.x - nm) + __expf(v.y - nm) + __expf(v.z - nm)
            + __expf(v.w - nm);
        m = nm;
    }
    float rm = block_reduce<true>(m, scratch);
    float rs = block_reduce<false>(s * __expf(m - rm), scratch);
    float inv = 1.0f / rs;
    for (int c = threadIdx.x; c < COLS / 4; c += blockDim.x) {
        float4 v = row[c];
        out[c] = make_float4(__expf(v.x - rm) * inv, __expf(v.y - rm) * inv,
                             __expf(v.z - rm) * inv, __expf(v.w - rm) * inv);
    }
"""),
}

_LN_WRITE = """
    for (int c = LANE0; c < COLS / 4; c += STEP) {
        float4 v = SRC, g = gamma4[c], b = beta4[c];
        out[c] = make_float4((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y,
                             (v.z - mean) * rstd * g.z + b.z, (v.w - mean) * rstd * g.w + b.w);
    }
"""

_LN_HEAD = """
    const float4* gamma4 = reinterpret_cast<const float4*>(gamma);
    const float4* beta4 = reinterpret_cast<const float4*>(beta);
"""

_WARP_ROW = _LN_HEAD + """
    int lane = threadIdx.x & 31;
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const float4* in = reinterpret_cast<const float4*>(x) + row * (COLS / 4);
    float4* out = reinterpret_cast<float4*>(y) + row * (COLS / 4);
"""

_LAYERNORM = {
    "reread": (128, _WARP_ROW + """
    float s = 0.0f;
    for (int c = lane; c < COLS / 4; c += 32) { float4 v = in[c]; s += (v.x + v.y) + (v.z + v.w); }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float mean = s / COLS;
    float q = 0.0f;
    for (int c = lane; c < COLS / 4; c += 32) {
        float4 v = in[c];
        q += (v.x - mean) * (v.x - mean) + (v.y - mean) * (v.y - mean)
           + (v.z - mean) * (v.z - mean) + (v.w - mean) * (v.w - mean);
    }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    float rstd = rsqrtf(q / COLS + eps[0]);
""" + _LN_WRITE.replace("LANE0", "lane").replace("STEP", "32").replace("SRC", "in[c]")),
    "fused-stats": (128, _WARP_ROW + """
    float s = 0.0f, q = 0.0f;
    for (int c = lane; c < COLS / 4; c += 32) {
        float4 v = in[c];
        s += (v.x + v.y) + (v.z + v.w);
        q += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
    }
    for (int o = 16; o > 0; o >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
        q += __shfl_xor_sync(0xffffffffu, q, o);
    }
    float mean = s / COLS;
    float rstd = rsqrtf(fmaxf(q / COLS - mean * mean, 0.0f) + eps[0]);
""" + _LN_WRITE.replace("LANE0", "lane").replace("STEP", "32").replace("SRC", "in[c]")),
    "registers": (1024, _LN_HEAD + """
    __shared__ float scratch[32];
    constexpr int PER = COLS / 4 / 1024;
    const float4* in = reinterpret_cast<const float4*>(x) + (size_t)blockIdx.x * (COLS / 4);
    float4* out = reinterpret_cast<float4*>(y) + (size_t)blockIdx.x * (COLS / 4);
    float4 r[PER];
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        r[k] = in[threadIdx.x + k * 1024];
        s += (r[k].x + r[k].y) + (r[k].z + r[k].w);
    }
    float mean = block_reduce<false>(s, scratch) / COLS;
    float q = 0.0f;
    #pragma unroll
    for (int k = 0; k < PER; ++k)
        q += (r[k].x - mean) * (r[k].x - mean) + (r[k].y - mean) * (r[k].y - mean)
           + (r[k].z - mean) * (r[k].z - mean) + (r[k].w - mean) * (r[k].w - mean);
    float rstd = rsqrtf(block_reduce<false>(q, scratch) / COLS + eps[0]);
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        int c = threadIdx.x + k * 1024;
        float4 v = r[k], g = gamma4[c], b = beta4[c];
        out[c] = make_float4((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y,
                             (v.z - mean) * rstd * g.z + b.z, (v.w - mean) * rstd * g.w + b.w);
    }
"""),
    "shared": (256, _LN_HEAD + """
    __shared__ float scratch[32];
    __shared__ float4 row[COLS / 4];
    const float4* in = reinterpret_cast<const float4*>(x) + (size_t)blockIdx.x * (COLS / 4);
    float4* out = reinterpret_cast<float4*>(y) + (size_t)blockIdx.x * (COLS / 4);
    float s = 0.0f;
    for (int c = threadIdx.x; c < COLS / 4; c += blockDim.x) {
        float4 v = in[c]; row[c] = v; s += (v.x + v.y) + (v.z + v.w);
    }
    float mean = block_reduce<false>(s, scratch) / COLS;
    float q = 0.0f;
    for (int c = threadIdx.x; c < COLS / 4; c += blockDim.x) {
        float4 v = row[c];
        q += (v.x - mean) * (v.x - mean) + (v.y - mean) * (v.y - mean)
           + (v.z - mean) * (v.z - mean) + (v.w - mean) * (v.w - mean);
    }
    float rstd = rsqrtf(block_reduce<false>(q, scratch) / COLS + eps[0]);
""" + _LN_WRITE.replace("LANE0", "threadIdx.x").replace("STEP", "blockDim.x")
      .replace("SRC", "row[c]")),
}


def main() -> None:
    import mlx.core as mx

    rng = np.random.default_rng(0)
    host = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    gamma_h = rng.standard_normal(COLS).astype(np.float32)
    beta_h = rng.standard_normal(COLS).astype(np.float32)
    x, gamma, beta = mx.array(host), mx.array(gamma_h), mx.array(beta_h)
    eps = mx.array(np.float32(1e-5))
    header = f"#define COLS {COLS}\n" + _BLOCK_REDUCE

    e = np.exp(host - host.max(axis=1, keepdims=True))
    want_softmax = e / e.sum(axis=1, keepdims=True)
    ms, _ = median_ms(lambda: mx.softmax(x, axis=-1))
    print(f"mx.softmax: {ms:.4f} ms", flush=True)
    for name, (threads, body) in _SOFTMAX.items():
        kernel = mx.fast.cuda_kernel(name=f"row_probe_softmax_{name.replace('-', '_')}",
                                     input_names=["x"], output_names=["y"], source=body,
                                     header=header)
        blocks = ROWS

        def run():
            return kernel(inputs=[x], grid=(blocks * threads, 1, 1), threadgroup=(threads, 1, 1),
                          output_shapes=[(ROWS, COLS)], output_dtypes=[mx.float32])[0]
        ms, out = median_ms(run)
        err = float(np.abs(np.asarray(out) - want_softmax).max())
        print(f"softmax {name:12s} {threads:5d} threads: {ms:.4f} ms (max error {err:.2g})",
              flush=True)

    mean = host.mean(axis=1, keepdims=True)
    var = host.var(axis=1, keepdims=True)
    want_ln = (host - mean) / np.sqrt(var + 1e-5) * gamma_h + beta_h
    ms, _ = median_ms(lambda: mx.fast.layer_norm(x, gamma, beta, 1e-5))
    print(f"mx.fast.layer_norm: {ms:.4f} ms", flush=True)
    for name, (threads, body) in _LAYERNORM.items():
        kernel = mx.fast.cuda_kernel(name=f"row_probe_ln_{name.replace('-', '_')}",
                                     input_names=["x", "gamma", "beta", "eps"],
                                     output_names=["y"], source=body, header=header)
        blocks = ROWS // (threads // 32) if threads == 128 else ROWS

        def run():
            return kernel(inputs=[x, gamma, beta, eps], grid=(blocks * threads, 1, 1),
                          threadgroup=(threads, 1, 1), output_shapes=[(ROWS, COLS)],
                          output_dtypes=[mx.float32])[0]
        ms, out = median_ms(run)
        err = float(np.abs(np.asarray(out) - want_ln).max())
        print(f"layernorm {name:12s} {threads:5d} threads: {ms:.4f} ms (max error {err:.2g})",
              flush=True)


if __name__ == "__main__":
    main()
