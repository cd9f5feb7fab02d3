"""Why is the reduce example slow through MLX's cuda_kernel? Times kir's emitted reduce at
several n, and the same body with the per-block atomicAdd replaced by a plain store of the
block partial (out sized to the block count), through MLX on the GPU.

    python benchmarks/reduce_probe.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
from kir.backends import emit
from kir.backends.mlx_runner import MLXKernel, time_kernel

from kir.driver.load import load_kernel

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    import mlx.core as mx

    for n in (1 << 16, 1 << 20, 1 << 24):
        loaded = load_kernel(ROOT / "examples" / "reduce.cu", sizes={"n": n})
        emitted = emit(loaded.kernel, loaded.bound, "cuda")
        kernel = MLXKernel(emitted)
        inputs = loaded.bound.make_inputs(0)
        ms = time_kernel(kernel, inputs, 3, 5).median_ms
        blocks = emitted.blocks[0]
        plain = emitted.source.replace("atomicAdd(&out[0], partial[0]);",
                                       "out[blockIdx.x] = partial[0];")
        k2 = mx.fast.cuda_kernel(name="reduce_plain", input_names=list(emitted.input_names),
                                 output_names=["out"], source=plain)
        args = [mx.array(inputs["in"]), mx.array(np.int32(n))]
        times = []
        for i in range(8):
            start = time.perf_counter()
            out = k2(inputs=args, grid=emitted.grid, threadgroup=emitted.threadgroup,
                     output_shapes=[(blocks,)], output_dtypes=[mx.float32])
            mx.eval(out)
            if i >= 3:
                times.append((time.perf_counter() - start) * 1e3)
        total = float(np.asarray(out[0]).sum())
        plain_ms = statistics.median(times)
        print(f"n={n}: blocks={blocks} atomic {ms:.3f} ms | plain store {plain_ms:.3f} ms "
              f"(sum ok: {abs(total - inputs['in'].sum()) < 1e-2 * max(1, abs(total))})",
              flush=True)


if __name__ == "__main__":
    main()
