"""Reference for last_block_sum.cu: the sum of x."""

import numpy as np


def total(args: dict, sizes: dict) -> dict:
    return {"total": np.array([np.sum(args["x"], dtype=np.float64)], dtype=np.float32)}
