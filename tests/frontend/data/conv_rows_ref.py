"""Reference for conv_rows.cu: each row convolved with the 9-tap filter, zero outside."""

import numpy as np


def rows(args: dict, sizes: dict) -> dict:
    src = np.asarray(args["d_Src"], np.float64).reshape(sizes["H"], sizes["W"])
    taps = np.asarray(args["c_Kernel"], np.float64)
    padded = np.pad(src, ((0, 0), (4, 4)))
    out = np.zeros_like(src)
    for j in range(-4, 5):  # out[x] = sum_j taps[4 - j] * src[x + j]
        out += taps[4 - j] * padded[:, 4 + j:4 + j + sizes["W"]]
    return {"d_Dst": out.astype(np.float32)}
