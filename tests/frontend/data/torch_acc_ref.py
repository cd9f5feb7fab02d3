"""Reference for torch_acc.cu: each row over its root mean square (accumulated in float:
3000 squares near 1 would lose their sum in half precision)."""

import numpy as np


def rms_scale(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["in"], np.float64)
    inv = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
    return {"out": (x * inv).astype(np.float16)}
