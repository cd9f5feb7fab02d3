"""Reference for single_pass_sum.cu: block b's partial is the sum of the 512-element chunks
b, b + G, b + 2G, ... of the input; element 0 is then the whole sum."""

import numpy as np


def total(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["g_idata"], dtype=np.float64)
    blocks = sizes["G"]
    chunks = np.zeros(-(-len(x) // 512) * 512)
    chunks[:len(x)] = x
    per_chunk = chunks.reshape(-1, 512).sum(axis=1)
    out = np.array([per_chunk[b::blocks].sum() for b in range(blocks)], dtype=np.float32)
    out[0] = x.sum()
    return {"g_odata": out}
