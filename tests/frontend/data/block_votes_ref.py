"""Reference for block_votes.cu: per block, counts and any/all of predicates."""

import numpy as np


def votes(args: dict, sizes: dict) -> dict:
    n = sizes["N"]
    blocks = -(-n // 64)
    x = np.zeros(blocks * 64, np.float32)
    x[:n] = np.asarray(args["x"], np.float32)
    rows = []
    for b in x.reshape(blocks, 64):
        rows.append([2 * (b > 0).sum() + (b > 0.5).sum(), int((b > 1.5).any()),
                     int((b > -10).all())])
    return {"out": np.array(rows, np.int32)}
