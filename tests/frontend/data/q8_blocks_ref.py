"""numpy reference for q8_blocks.cu: each 34-byte block is a little-endian half scale and
32 int8 quants."""

import numpy as np


def q8_gemv(args: dict, sizes: dict) -> dict:
    raw = np.ascontiguousarray(np.asarray(args["weights"], np.uint8))
    rows, nblocks = raw.shape[0], raw.shape[1]
    scale = raw[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
    quants = raw[..., 2:34].copy().view(np.int8).astype(np.float64)
    x = np.asarray(args["x"], np.float32).astype(np.float64).reshape(nblocks, 32)
    with np.errstate(invalid="ignore", over="ignore"):
        y = ((quants * x).sum(axis=2) * scale).sum(axis=1)
    return {"y": y.astype(np.float32).reshape(rows)}
