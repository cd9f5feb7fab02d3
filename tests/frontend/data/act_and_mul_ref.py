"""References for act_and_mul.cu: act(x) * y over the two halves of each row."""

import numpy as np


def _halves(args: dict, sizes: dict):
    x = np.asarray(args["input"], np.float64).reshape(sizes["T"], 2 * sizes["D"])
    return x[:, :sizes["D"]], x[:, sizes["D"]:]


def silu_and_mul(args: dict, sizes: dict) -> dict:
    a, b = _halves(args, sizes)
    return {"out": (a / (1.0 + np.exp(-a)) * b).astype(np.float32)}


def gelu_tanh_and_mul(args: dict, sizes: dict) -> dict:
    a, b = _halves(args, sizes)
    gelu = 0.5 * a * (1.0 + np.tanh(0.7978845608 * (a + 0.044715 * a ** 3)))
    return {"out": (gelu * b).astype(np.float32)}
