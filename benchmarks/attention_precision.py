"""How far MLX's f32 attention and kir's rebuilt attention (``mma-attention`` on TF32 and on
3xTF32 tensor cores) are from attention computed in f64, on the same inputs: whether the
built-in kir is compared with computes at f32's precision or at TF32's.

    python3 benchmarks/attention_precision.py [--size N=1024 --size H=16]

Prints one JSON line per kernel: max absolute error of O, and the largest error relative to
the largest |O|. Needs MLX with a GPU back end (CUDA here)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)

    import mlx.core as mx

    from kir.backends import TARGETS, emit
    from kir.backends.mlx_runner import MLXKernel
    from kir.driver.load import load_kernel, parse_size_overrides
    from kir.driver.registry import load_registry
    from kir.driver.runners import copy_inputs
    from kir.rules import apply_trace, context_for, parse_step

    sizes = {"B": 1, "H": 16, "N": 1024, "D": 64, **parse_size_overrides(args.size, "--size")}
    loaded = load_kernel(ROOT / "examples" / "flash_attn.cu", sizes=sizes)
    inputs = loaded.bound.make_inputs(0)
    want = loaded.bound.reference(copy_inputs(inputs))["O"].astype(np.float64)
    q, k, v = (inputs[n].astype(np.float64) for n in "QKV")
    scale = float(inputs["softmax_scale"])
    s = q @ np.swapaxes(k, -1, -2) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    exact = (p / p.sum(axis=-1, keepdims=True)) @ v  # f64 throughout
    rows = [("reference (f64, rounded to f32)", want)]
    sdpa = mx.fast.scaled_dot_product_attention(*(mx.array(inputs[n]) for n in "QKV"),
                                                scale=scale)
    rows.append(("mx.fast.scaled_dot_product_attention", np.array(sdpa, np.float64)))
    registry = load_registry()
    ctx = context_for(loaded, TARGETS["cuda"])
    for precision in ("tf32", "tf32x3"):
        steps = [parse_step(t, registry) for t in ("mma-attention{at=kernel,config=64x32/4}",
                                                   f"{precision}-matrix{{at=all}}")]
        kernel = apply_trace(loaded.kernel, steps, registry, ctx, strict=True).kernel
        got = MLXKernel(emit(kernel, loaded.bound, "cuda"))(copy_inputs(inputs))["O"]
        rows.append((f"kir mma-attention, {precision}", np.asarray(got, np.float64)))
    largest = float(np.abs(exact).max())
    for label, values in rows:
        err = float(np.abs(values - exact).max())
        print(json.dumps({"kernel": label, "max_abs_err": err,
                          "relative_to_max": err / largest, "sizes": sizes}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
