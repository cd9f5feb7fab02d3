"""Reference for rope_params.cu: RoPE on (even, odd) pairs of the first R of each head."""

import numpy as np


def rope(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], dtype=np.float64).reshape(sizes["T"], sizes["H"], sizes["D"])
    rotary = min(sizes["R"], sizes["D"])
    pairs = np.arange(rotary // 2)
    inv = 10000.0 ** (-2.0 * pairs / rotary)
    angle = (np.arange(sizes["T"]) + 3)[:, None] * inv[None, :]  # [T, pairs]
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = x.copy()
    a, b = x[..., 0:rotary:2], x[..., 1:rotary:2]
    out[..., 0:rotary:2] = a * c - b * s
    out[..., 1:rotary:2] = a * s + b * c
    return {"x": out.astype(np.float32)}
