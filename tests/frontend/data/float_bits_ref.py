"""Reference for float_bits.cu: order-preserving keys, the floats back, magnitudes."""

import numpy as np


def keys(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.float32)
    bits = x.view(np.uint32)
    k = np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
    return {"keys": k.astype(np.uint32), "back": x.copy(), "mag": np.abs(x)}
