"""numpy references for the spec-drafting corpus: with them a drafted spec is checked for
what it means (sizes, shapes, roles, initial contents, scalar values), not only that it
runs."""

from __future__ import annotations

import math

import numpy as np


def f64(a):
    return np.asarray(a, dtype=np.float64)


def flash_fwd(args, sizes):
    q, k, v = f64(args["Q"]), f64(args["K"]), f64(args["V"])
    s = q @ np.swapaxes(k, -1, -2) * float(args["softmax_scale"])
    m = s.max(axis=-1)
    w = np.exp(s - m[..., None])
    l = w.sum(axis=-1)
    return {"O": (w / l[..., None]) @ v, "l": l, "m": m}


def sgemm_naive(args, sizes):
    return {"C": float(args["alpha"]) * f64(args["A"]) @ f64(args["B"])
            + float(args["beta"]) * f64(args["C"])}


def gelu_llmc(args, sizes):
    x = f64(args["inp"])
    return {"out": 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))}


def layernorm_llmc(args, sizes):
    x = f64(args["inp"])
    mean = x.mean(axis=-1)
    rstd = 1 / np.sqrt(((x - mean[..., None]) ** 2).mean(axis=-1) + 1e-5)
    out = (x - mean[..., None]) * rstd[..., None] * f64(args["weight"]) + f64(args["bias"])
    return {"out": out, "mean": mean, "rstd": rstd}


def encoder_llmc(args, sizes):
    T = sizes["T"]
    return {"out": f64(args["wte"])[args["inp"]] + f64(args["wpe"])[None, :T]}


def vector_add(args, sizes):
    return {"C": f64(args["A"]) + f64(args["B"])}


def histogram(args, sizes):
    return {"bins": np.bincount(args["data"].ravel(), minlength=sizes["NUM_BINS"])
            .astype(np.uint32)}


def reduce_sum(args, sizes):
    return {"total": np.array([f64(args["in"]).sum()])}


def scale_inplace(args, sizes):
    return {"x": f64(args["x"]) * float(args["s"])}


def axpy_thrust(args, sizes):
    return {"y": float(args["a"]) * f64(args["x"]) + f64(args["y"])}


def second_half(args, sizes):
    x = f64(args["x"])
    half = sizes["total"] // 2
    return {"y": x[half:] - x[half - 1:-1]}


def transpose(args, sizes):
    return {"odata": f64(args["idata"]).T}


def relu_kernel(args, sizes):
    return {"x": None} if False else {"y": np.maximum(f64(args["x"]), 0)}


def gated_act(args, sizes):
    """silu(first half) * second half of each row (gated_act.cu)."""
    x = np.asarray(args["in"], np.float64).reshape(-1, 2 * int(args["d"]))
    d = int(args["d"])
    a, b = x[:, :d], x[:, d:]
    return {"out": a / (1.0 + np.exp(-a)) * b}
