"""numpy reference for short_types.cu."""

import numpy as np


def widen(args: dict, sizes: dict) -> dict:
    raw = np.asarray(args["raw"], np.uint16)
    offs = np.asarray(args["offs"], np.int16)
    data = np.asarray(args["bytes"], np.uint8)
    with np.errstate(invalid="ignore"):  # NaN and infinite patterns among the raw bits
        out = (raw.astype(np.uint32) << 16).view(np.float32) + offs.astype(np.float32)
    keys = ((raw ^ 0x8000).astype(np.int64) + offs.astype(np.int64)).astype(np.uint16)
    words = data.view(np.uint32).view(np.int32)
    halves = ((offs.astype(np.int64) * 3 - 7).astype(np.int16) >> 1).astype(np.int16)
    return {"out": out, "keys": keys, "words": words, "halves": halves}
