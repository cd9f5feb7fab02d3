"""Reference for bf16_pairs.cu (rounding to bf16 where the kernel stores or converts)."""

import numpy as np


def _bf16(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def bias_gelu(args: dict, sizes: dict) -> dict:
    r, c = sizes["R"], 2 * sizes["C"]
    x = np.asarray(args["x"], np.float32).reshape(r, c)
    v = _bf16(x + np.asarray(args["bias"], np.float32))
    g = _bf16(0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3))))
    g = _bf16(g * np.asarray(args["scale"], np.float32))
    return {"out": _bf16(g * 2.0)}
