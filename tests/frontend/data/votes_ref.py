"""Reference for votes.cu: per warp of 32 lanes, the ballot bits and any/all flags."""

import numpy as np


def votes(args: dict, sizes: dict) -> dict:
    warps = np.asarray(args["x"]).reshape(-1, 32)
    bits = (warps > 0).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    ballot = bits.sum(axis=1).astype(np.uint32)
    any_ = (warps > np.float32(0.9)).any(axis=1).astype(np.int32)
    all_ = (warps > np.float32(-0.9)).all(axis=1).astype(np.int32)
    return {"ballot": np.repeat(ballot, 32), "any": np.repeat(any_, 32),
            "all": np.repeat(all_, 32)}
