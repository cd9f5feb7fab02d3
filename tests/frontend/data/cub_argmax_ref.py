"""Reference for cub_argmax.cu: each row's first maximum, each warp's first minimum of the
row's first elements, and the sum and count of the row's positive values."""

import numpy as np


def argmax_rows(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["scores"]).astype(np.float32)
    block = sizes["BS"]
    first = x[:, :block].reshape(x.shape[0], block // 32, 32)
    warp_min = (np.argmin(first, axis=2) + np.arange(block // 32) * 32).astype(np.int32)
    positive = np.where(x > 0, x, 0).astype(np.float64)
    return {"best_ids": np.argmax(x, axis=1).astype(np.int32), "best_vals": x.max(axis=1),
            "warp_min_ids": warp_min, "positive_sums": positive.sum(axis=1).astype(np.float32),
            "positive_counts": (x > 0).sum(axis=1).astype(np.int32)}
