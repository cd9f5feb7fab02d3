"""References for the API tests' kernels: numpy (float64) and MLX."""

import mlx.core as mx
import numpy as np

EPS_FLOOR = 0.0


def rmsnorm(args, sizes):
    x = np.asarray(args["x"], dtype=np.float64)
    w = np.asarray(args["w"], dtype=np.float64)
    scale = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + float(args["eps"]))
    return {"y": (x * scale * w).astype(np.float32)}


def _rms(x, eps):
    return mx.rsqrt(mx.mean(x * x, axis=-1, keepdims=True) + max(eps, EPS_FLOOR))


def rmsnorm_mlx(args, sizes):
    x = args["x"].astype(mx.float32)
    y = x * _rms(x, float(args["eps"])) * args["w"].astype(mx.float32)
    return {"y": y.astype(args["x"].dtype)}
