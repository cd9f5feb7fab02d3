"""References for bit_atomics.cu."""

import numpy as np


def set_flags(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.int64)
    mask = np.zeros(4, np.uint32)
    parity = np.zeros(4, np.int32)
    for i, v in enumerate(x):
        mask[v & 3] |= np.uint32(1 << (i % 32))
        parity[i % 4] ^= np.int32(v)
    return {"mask": mask, "parity": parity}


def clear_flags(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.int64)
    mask = np.full(4, 0xFFFFFFFF, np.uint32)
    for i, v in enumerate(x):
        mask[v & 3] &= ~np.uint32(1 << (i % 32))
    mask = mask.view(np.int32)
    all_ok = np.array([-1 if (x > -40).all() else 0], np.int32)
    return {"mask": mask, "all_ok": all_ok}
