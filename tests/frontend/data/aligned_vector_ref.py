"""Reference for aligned_vector.cu: alpha * x + bias (bias broadcast over rows)."""

import numpy as np


def scale_bias(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.float64).reshape(sizes["R"], sizes["C"])
    y = float(args["alpha"]) * x + np.asarray(args["bias"], np.float64)[None, :]
    return {"y": y.astype(np.float32)}
