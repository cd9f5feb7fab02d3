"""Reference for half2_bias_act.cu: max(scale * silu(x + bias), 0), rounded like f16."""

import numpy as np


def bias_silu(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.float16).reshape(sizes["R"], sizes["P"], 2)
    v = (x + np.asarray(args["bias"], np.float16).reshape(sizes["P"], 2)).astype(np.float32)
    act = (v / (1.0 + np.exp(-v))).astype(np.float16).astype(np.float32)
    return {"y": np.maximum(act * 1.5, 0.0).astype(np.float16)}
