"""Reference for cub_offsets.cu: each expert's offset, its token count padded to a
multiple of G, and the padded total."""

import numpy as np


def expert_offsets(args: dict, sizes: dict) -> dict:
    counts = np.bincount(np.asarray(args["topk_ids"]), minlength=sizes["E"])
    g = sizes["G"]
    padded = (counts + g - 1) // g * g
    offsets = np.concatenate([[0], np.cumsum(padded)[:-1]]).astype(np.int32)
    return {"offsets": offsets, "total": np.array([padded.sum()], np.int32)}
