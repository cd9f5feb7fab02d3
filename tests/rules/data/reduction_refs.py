"""numpy references for the differently-written reduction kernels beside this file."""

import numpy as np


def dot(args, sizes):
    a, b = args["a"].astype(np.float64), args["b"].astype(np.float64)
    return {"c": np.array([args["c"][0] + np.dot(a, b)], dtype=np.float32)}


def row_sumsq(args, sizes):
    x = args["x"].astype(np.float64)
    return {"out": (args["out"] + (x ** 2).sum(axis=1)).astype(np.float32)}


def rms_norm_inplace(args, sizes):
    x = args["x"].astype(np.float64)
    inv = 1.0 / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + 1e-6)
    return {"x": (x * inv * args["weight"]).astype(np.float32)}


def layernorm_stats(args, sizes):
    """Layer norm over rows (eps 1e-5) and the per-row mean and 1/std it saves."""
    x = np.asarray(args["inp"], np.float64).reshape(sizes["N"], sizes["C"])
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    w = np.asarray(args["weight"], np.float64)
    b = np.asarray(args["bias"], np.float64)
    return {"out": ((x - mean) * rstd * w + b).astype(np.float32),
            "mean": mean[:, 0].astype(np.float32), "rstd": rstd[:, 0].astype(np.float32)}


def gemv(args, sizes):
    a, x = args["A"].astype(np.float64), args["x"].astype(np.float64)
    return {"y": (a @ x).astype(np.float32)}
