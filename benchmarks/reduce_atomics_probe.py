"""What a two-stage reduction has to avoid on MLX's CUDA back end: times a grid-stride sum of
2^24 floats (1024 threads a block, float4 loads, warp shuffles) through ``mx.fast.cuda_kernel``
with G blocks, finishing four ways — one float ``atomicAdd`` per block on ``out[0]``; block
partials stored and summed by a second ``cuda_kernel`` launch; block partials stored and the
last block to finish (found with an integer ``atomicAdd`` on a counter) summing them; and
block partials stored only (no final sum: the floor). ``mx.sum`` is timed in the same run.
The atomic form is also timed with an output of 2, 4, 64 and 1024 floats (only the first used):
MLX's CUDA allocator serves allocations under 8 bytes from a managed "small pool", and
whether atomics on it cost a host round trip is what that column answers.

    python benchmarks/reduce_atomics_probe.py
"""

from __future__ import annotations


import numpy as np
from mlx_timing import median_ms

N = 1 << 24
THREADS = 1024

_BLOCK_SUM = """
    __shared__ float warp_sums[32];
    unsigned int tid = threadIdx.x;
    unsigned int stride = gridDim.x * blockDim.x;
    unsigned int n4 = (unsigned int)n[0] / 4u;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float acc = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + tid; i < n4; i += stride) {
        float4 v = x4[i];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((tid & 31u) == 0u) warp_sums[tid >> 5] = acc;
    __syncthreads();
    if (tid < 32u) {
        acc = tid < (blockDim.x >> 5) ? warp_sums[tid] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    }
"""

_FINISH = {
    "atomic": "    if (tid == 0u) atomicAdd(&out[0], acc);\n",
    "partials": "    if (tid == 0u) out[blockIdx.x] = acc;\n",
    "last_block": """
    __shared__ bool last;
    if (tid == 0u) {
        partials[blockIdx.x] = acc;
        __threadfence();
        last = atomicAdd(&count[0], 1u) == gridDim.x - 1u;
    }
    __syncthreads();
    if (last) {
        __threadfence();
        float s = 0.0f;
        for (unsigned int b = tid; b < gridDim.x; b += blockDim.x) s += ((volatile float*)partials)[b];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if ((tid & 31u) == 0u) warp_sums[tid >> 5] = s;
        __syncthreads();
        if (tid == 0u) {
            float t = 0.0f;
            for (unsigned int w = 0; w < (blockDim.x >> 5); ++w) t += warp_sums[w];
            out[0] = t;
        }
    }
""",
}

_SECOND = """
    __shared__ float warp_sums[32];
    unsigned int tid = threadIdx.x;
    float s = 0.0f;
    for (unsigned int b = tid; b < (unsigned int)g[0]; b += blockDim.x) s += partials[b];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((tid & 31u) == 0u) warp_sums[tid >> 5] = s;
    __syncthreads();
    if (tid == 0u) {
        float t = 0.0f;
        for (unsigned int w = 0; w < (blockDim.x >> 5); ++w) t += warp_sums[w];
        out[0] = t;
    }
"""


def main() -> None:
    import mlx.core as mx

    rng = np.random.default_rng(0)
    host = rng.standard_normal(N).astype(np.float32)
    x = mx.array(host)
    n = mx.array(np.int32(N))
    want = float(host.astype(np.float64).sum())
    kernels = {
        name: mx.fast.cuda_kernel(
            name=f"probe_{name}", input_names=["x", "n"],
            output_names=["out", "partials", "count"] if name == "last_block" else ["out"],
            source=_BLOCK_SUM + finish)
        for name, finish in _FINISH.items()}
    second = mx.fast.cuda_kernel(name="probe_second", input_names=["partials", "g"],
                                 output_names=["out"], source=_SECOND)
    ms, _ = median_ms(lambda: mx.sum(x))
    print(f"mx.sum: {ms:.4f} ms", flush=True)
    for blocks in (8, 16, 32, 66, 132, 264, 528, 1056):
        grid = (blocks * THREADS, 1, 1)
        tg = (THREADS, 1, 1)
        row = [f"G={blocks:5d}"]

        def atomic(elements=1):
            return kernels["atomic"](inputs=[x, n], grid=grid, threadgroup=tg,
                                     output_shapes=[(elements,)], output_dtypes=[mx.float32],
                                     init_value=0)[0][:1]

        def partials_only():
            return kernels["partials"](inputs=[x, n], grid=grid, threadgroup=tg,
                                       output_shapes=[(blocks,)],
                                       output_dtypes=[mx.float32])[0]

        def two_launches():
            parts = partials_only()
            return second(inputs=[parts, mx.array(np.int32(blocks))], grid=(THREADS, 1, 1),
                          threadgroup=tg, output_shapes=[(1,)], output_dtypes=[mx.float32])[0]

        def last_block():
            return kernels["last_block"](
                inputs=[x, n], grid=grid, threadgroup=tg,
                output_shapes=[(1,), (blocks,), (1,)],
                output_dtypes=[mx.float32, mx.float32, mx.uint32], init_value=0)[0]

        for label, fn in (("atomic", atomic), ("atomic, out of 2", lambda: atomic(2)),
                          ("atomic, out of 4", lambda: atomic(4)),
                          ("atomic, out of 64", lambda: atomic(64)),
                          ("atomic, out of 1024", lambda: atomic(1024)),
                          ("2 launches", two_launches),
                          ("last block", last_block), ("partials only", partials_only)):
            ms, out = median_ms(fn)
            got = float(np.asarray(out).astype(np.float64).sum())
            ok = abs(got - want) <= 1e-3 * max(1.0, abs(want)) + 1.0
            row.append(f"{label} {ms:.4f} ms{'' if ok else ' WRONG'}")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
