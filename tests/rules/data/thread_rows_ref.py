"""numpy references for the thread-per-row test kernels."""

import numpy as np


def softmax(args, sizes):
    x = args["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).astype(np.float32)}


def attention(args, sizes):
    """out = softmax(q k^T * scale) v per (batch, head)."""
    q, k, v = (args[n].astype(np.float64) for n in ("q", "k", "v"))
    s = q @ np.swapaxes(k, -1, -2) * float(args["scale"])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"out": ((p / p.sum(axis=-1, keepdims=True)) @ v).astype(np.float32)}


def causal_attention(args, sizes):
    """out = softmax(q k^T / sqrt(hs), keys up to the query) v over [B, T, NH, HS] buffers."""
    q, k, v = (np.moveaxis(args[n].astype(np.float64), 1, 2) for n in ("q", "k", "v"))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(np.tri(s.shape[-1], dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    out = (p / p.sum(axis=-1, keepdims=True)) @ v
    return {"out": np.moveaxis(out, 2, 1).astype(np.float32)}


def attention_half(args, sizes):
    """o = softmax(q k^T * scale) v per (batch, head), half buffers."""
    q, k, v = (args[n].astype(np.float64) for n in ("q", "k", "v"))
    s = q @ np.swapaxes(k, -1, -2) * float(args["scale"])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o": ((p / p.sum(axis=-1, keepdims=True)) @ v).astype(np.float16)}


def gqa(args, sizes):
    """o = softmax(q k^T * scale) v with each K/V head serving H / HKV query heads."""
    q = args["q"].astype(np.float64)
    group = q.shape[1] // args["k"].shape[1]
    k, v = (np.repeat(args[n].astype(np.float64), group, axis=1) for n in ("k", "v"))
    s = q @ np.swapaxes(k, -1, -2) * float(args["scale"])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o": ((p / p.sum(axis=-1, keepdims=True)) @ v).astype(np.float32)}
