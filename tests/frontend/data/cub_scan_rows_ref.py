"""Reference for cub_scan_rows.cu: running and preceding maxima along each row, prefix sums
and totals per 32 elements, ranks of the positive values per 8."""

import numpy as np


def running_rows(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.float64)
    floors = np.asarray(args["floors"], np.float64)
    rows = x.shape[0]
    running = np.maximum.accumulate(x, axis=1)
    before = np.maximum(floors[:, None], np.concatenate(
        [np.full((rows, 1), -np.inf), running[:, :-1]], axis=1))
    warps = x.reshape(rows, 4, 32)
    positive = (x > 0).astype(np.int32).reshape(rows, 16, 8)
    ranks = np.cumsum(positive, axis=2) - positive
    return {"running_max": running.astype(np.float32), "before_max": before.astype(np.float32),
            "warp_prefix": np.cumsum(warps, axis=2).reshape(rows, 128).astype(np.float32),
            "warp_totals": warps.sum(axis=2).astype(np.float32),
            "ranks": ranks.reshape(rows, 128).astype(np.int32)}
