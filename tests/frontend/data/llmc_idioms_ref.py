"""Reference for llmc_idioms.cu: each row of input + residual, times its inverse root mean
square over its largest magnitude."""

import numpy as np


def residual_scale(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["inp"], np.float64) + np.asarray(args["res"], np.float64)
    scale = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5)
    scale /= np.abs(x).max(axis=1, keepdims=True)
    return {"out": (x * scale).astype(np.float32)}
