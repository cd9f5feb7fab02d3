"""Small hand-written kernels (kir IR text) for the counter and cost-model tests."""

from __future__ import annotations

import numpy as np

from kir.interp import Counters, run_kernel
from kir.ir.parser import parse_kernel

HEAD = ('kernel @{name}(x: f32* global const, y: f32* global, n: i32)\n'
        '    grid=("G", "1", "1") block=({block}, 1, 1) shared_bytes=0 {{\n')


def kernel(name: str, body: str, block: int = 256):
    """Parse a kernel with params (x, y, n), grid G blocks of ``block`` threads."""
    return parse_kernel(HEAD.format(name=name, block=block) + body + "\n}\n")


GID = "  let i: i32 = i32(block.x) * i32(block_dim.x) + i32(thread.x)\n"

COPY = kernel("copy", GID + "  y[i] = x[i]")
# Lane l of a warp reads x[l * n + w]: 32 different sectors per warp (a transpose-like read).
STRIDED = kernel("strided", GID + "  y[i] = x[(i % 32) * n + i / 32]")
UNIFORM = kernel("uniform", GID + "  y[i] = x[0]")


def per_block(work: int, block: int = 256):
    """Each block copies ``work`` consecutive elements with a block-stride loop."""
    return kernel("chunks", f"""
  let base: i32 = i32(block.x) * {work}
  for L0 k: i32 = i32(thread.x); k < {work}; k = k + {block} {{
    y[base + k] = x[base + k] * 2.0
  }}""", block)


def shared_stride(stride: int):
    """Each thread writes then reads threadgroup memory at ``thread * stride``."""
    return kernel(f"bank{stride}", GID + f"""
  shared s: f32[{32 * max(stride, 1) + 1}]
  let t: i32 = i32(thread.x) % 32
  s[t * {stride}] = x[i]
  barrier block
  y[i] = s[t * {stride}]""", 32)


def exp_kernel(fast: bool, repeat: int = 8):
    call = "fast.exp" if fast else "exp"
    return kernel("exps", GID + f"""
  let acc: f32 = x[i]
  for L0 k: i32 = 0; k < {repeat}; k = k + 1 {{
    acc = {call}(acc * 0.5)
  }}
  y[i] = acc""")


def run(k, n: int, groups: int, scalar: int | None = None) -> tuple[Counters, dict]:
    """Run ``k`` counted with x = arange(n), y = zeros(n); ``n`` param = scalar or n."""
    counters = Counters()
    x = np.arange(n, dtype=np.float32) / n
    out = run_kernel(k, {"x": x, "y": np.zeros(n, np.float32),
                         "n": n if scalar is None else scalar},
                     {"G": groups}, counters=counters)
    return counters, out
