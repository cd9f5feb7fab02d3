"""numpy references for the thread-per-row test kernels."""

import numpy as np


def softmax(args, sizes):
    x = args["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).astype(np.float32)}


def _attention(q, k, v, scale, causal=False):
    """softmax(q k^T * scale) v over the last two axes, in f64 (keys after the query masked
    when ``causal``)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tri(s.shape[-1], dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def attention(args, sizes):
    """out = softmax(q k^T * scale) v per (batch, head)."""
    out = _attention(args["q"], args["k"], args["v"], float(args["scale"]))
    return {"out": out.astype(np.float32)}


def causal_attention(args, sizes):
    """out = softmax(q k^T / sqrt(hs), keys up to the query) v over [B, T, NH, HS] buffers."""
    q, k, v = (np.moveaxis(args[n], 1, 2) for n in ("q", "k", "v"))
    out = _attention(q, k, v, 1 / np.sqrt(q.shape[-1]), causal=True)
    return {"out": np.moveaxis(out, 2, 1).astype(np.float32)}


def attention_half(args, sizes):
    """o = softmax(q k^T * scale) v per (batch, head), half buffers."""
    out = _attention(args["q"], args["k"], args["v"], float(args["scale"]))
    return {"o": out.astype(np.float16)}


def gqa(args, sizes):
    """o = softmax(q k^T * scale) v with each K/V head serving H / HKV query heads."""
    group = args["q"].shape[1] // args["k"].shape[1]
    k, v = (np.repeat(args[n], group, axis=1) for n in ("k", "v"))
    return {"o": _attention(args["q"], k, v, float(args["scale"])).astype(np.float32)}


def decode(args, sizes):
    """out = softmax(q k^T * scale) v for one query a head: q [H, 64], caches [H, S, 64]."""
    q = args["q"].astype(np.float64)[:, None, :]
    out = _attention(q, args["k_cache"].astype(np.float64), args["v_cache"].astype(np.float64),
                     float(args["softmax_scale"]))
    return {"out": out[:, 0, :].astype(np.float32)}
