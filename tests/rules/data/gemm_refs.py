"""Reference for tests/rules/data/gemm_ab_ifelse.cu (float64, cast back to f32)."""

import numpy as np


def gemm_ab(args, sizes):
    a, b, c = (args[n].astype(np.float64) for n in ("A", "B", "C"))
    return {"C": (args["alpha"] * (a @ b) + args["beta"] * c).astype(np.float32)}
