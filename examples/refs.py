"""numpy references for the examples: ``ref(args, sizes) -> {output name: array}``.

Each computes in float64 from the kernel's inputs and returns float32 arrays shaped as the
spec's out/inout buffers, holding what the kernel leaves in them.
"""

from __future__ import annotations

import numpy as np


def _f64(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=np.float64)


def flash_attn(args: dict, sizes: dict) -> dict:
    """O = softmax(Q K^T * scale) V; l and m end as each row's sum of exp(s - max) and max."""
    q, k, v = _f64(args["Q"]), _f64(args["K"]), _f64(args["V"])
    scores = q @ np.swapaxes(k, -1, -2) * float(args["softmax_scale"])
    row_max = scores.max(axis=-1)
    weights = np.exp(scores - row_max[..., None])
    row_sum = weights.sum(axis=-1)
    out = (weights / row_sum[..., None]) @ v
    return {"O": out.astype(np.float32), "l": row_sum.astype(np.float32),
            "m": row_max.astype(np.float32)}


def softmax(args: dict, sizes: dict) -> dict:
    """Softmax over each row of x."""
    x = _f64(args["x"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).astype(np.float32)}


def softmax_mlx(args: dict, sizes: dict) -> dict:
    """Softmax over each row of x in MLX: the generated module's fallback where there is no
    GPU kernel, and the baseline a GPU search reports against."""
    import mlx.core as mx

    return {"y": mx.softmax(args["x"].astype(mx.float32), axis=-1).astype(args["x"].dtype)}


def layernorm(args: dict, sizes: dict) -> dict:
    """(x - mean) / sqrt(var + eps) * gamma + beta over each row (biased variance)."""
    x = _f64(args["x"])
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + float(args["eps"])) * _f64(args["gamma"]) + _f64(args["beta"])
    return {"y": y.astype(np.float32)}


def sgemm(args: dict, sizes: dict) -> dict:
    """C = A @ B."""
    return {"C": (_f64(args["A"]) @ _f64(args["B"])).astype(np.float32)}


def reduce(args: dict, sizes: dict) -> dict:
    """out[0] = initial out[0] + sum(in)."""
    total = _f64(args["out"])[0] + _f64(args["in"]).sum()
    return {"out": np.array([total], dtype=np.float32)}


def selective_scan(args: dict, sizes: dict) -> dict:
    """y[b, t, d] = sum_n Cm[b, t, n] * h[b, d, n](t), h(t) = exp(dt A) h(t-1) + dt Bm x."""
    x, delta, a = _f64(args["x"]), _f64(args["delta"]), _f64(args["A"])
    bm, cm = _f64(args["Bm"]), _f64(args["Cm"])
    batch, seqlen, dim = x.shape
    h = np.zeros((batch, dim, a.shape[1]))
    y = np.zeros((batch, seqlen, dim))
    for t in range(seqlen):
        dt = delta[:, t, :, None]                                   # [b, d, 1]
        h = np.exp(dt * a[None]) * h + dt * bm[:, t, None, :] * x[:, t, :, None]
        y[:, t, :] = (h * cm[:, t, None, :]).sum(axis=-1)
    return {"y": y.astype(np.float32)}
