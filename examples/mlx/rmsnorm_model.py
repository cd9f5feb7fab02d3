"""A kir kernel inside an mlx.nn.Module.

    python examples/mlx/rmsnorm_model.py [--emulate]

kir turns rmsnorm.cu (a CUDA RMSNorm, generic in its element type T) into an MLX function
that reads sizes from its arguments' shapes, takes float32 or float16, runs the Metal kernel
on a Mac (the CUDA one with --target cuda on an NVIDIA GPU) and falls back on the spec's MLX
reference anywhere else. The model below uses it like any MLX op, at three shapes and two
dtypes, and checks it against plain MLX. ``--emulate`` runs the Metal kernel on kir's CPU
emulator instead of falling back, where there is no Apple GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np

import kir

HERE = Path(__file__).resolve().parent


class Block(nn.Module):
    """RMSNorm (kir's kernel) then a linear layer."""

    def __init__(self, dims: int, rmsnorm) -> None:
        super().__init__()
        self.rmsnorm = rmsnorm
        self.weight = mx.ones((dims,))
        self.linear = nn.Linear(dims, dims)

    def __call__(self, x: mx.array) -> mx.array:
        return self.linear(self.rmsnorm(x, self.weight.astype(x.dtype)))


def plain_rmsnorm(x: mx.array, w: mx.array, eps: float = 1e-5) -> mx.array:
    x32 = x.astype(mx.float32)
    return x32 * mx.rsqrt(mx.mean(x32 * x32, axis=-1, keepdims=True) + eps) * w


def use_emulator() -> None:
    """Route mx.fast.metal_kernel to kir's CPU emulator (a test and demo aid)."""
    from kir.backends.emulate import metal_kernel

    numpy_of = {mx.float32: np.float32, mx.float16: np.float16, mx.int32: np.int32}

    def build(**kwargs):
        kernel = metal_kernel(**kwargs)

        def call(*, inputs, output_shapes, output_dtypes, **launch):
            launch.pop("template", None)
            outputs = kernel(inputs=[np.array(a) for a in inputs], output_shapes=output_shapes,
                             output_dtypes=[np.dtype(numpy_of[d]) for d in output_dtypes],
                             **launch)
            return [mx.array(o) for o in outputs]
        return call

    mx.fast.metal_kernel = build
    mx.metal.is_available = lambda: True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulate", action="store_true",
                        help="run the Metal kernel on kir's CPU emulator")
    options = parser.parse_args()
    if options.emulate:
        use_emulator()
    # The unrewritten kernel; k.search(...).module() gives the tuned one the same way.
    build = kir.load(HERE / "rmsnorm.cu").module_build(dtypes=("f32", "f16"))
    module = build.load()
    path = "the GPU kernel" if module.available() else "the MLX fallback (no GPU kernel here)"
    labels = ", ".join(v["label"] for v in module.VARIANTS)
    print(f"rmsnorm: {len(module.VARIANTS)} kernels ({labels})")
    worst = 0.0
    for dtype in (mx.float32, mx.float16):
        for shape in ((4, 64), (16, 200), (3, 333)):
            mx.random.seed(0)
            block = Block(shape[1], module.rmsnorm)
            block.set_dtype(dtype)
            x = mx.random.normal(shape).astype(dtype)
            got = block(x)
            want = block.linear(plain_rmsnorm(x, block.weight).astype(dtype))
            error = float(mx.max(mx.abs(got.astype(mx.float32) - want.astype(mx.float32))))
            worst = max(worst, error / (1.0 if dtype == mx.float32 else 100.0))
            print(f"  {str(dtype):13} {str(shape):10} -> {got.shape} via {path}: "
                  f"max difference from plain MLX {error:.3g}")
    ok = worst < 1e-4
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
