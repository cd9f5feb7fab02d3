"""References for the GEMMs in tests/rules/data (float64, cast back to f32)."""

import numpy as np


def gemm_ab(args, sizes):
    a, b, c = (args[n].astype(np.float64) for n in ("A", "B", "C"))
    return {"C": (args["alpha"] * (a @ b) + args["beta"] * c).astype(np.float32)}


def linear(args, sizes):
    """tests/rules/data/linear_nt.cu: out = inp @ weight^T + bias."""
    x, w, b = (args[n].astype(np.float64) for n in ("inp", "weight", "bias"))
    return {"out": (x @ w.T + b).astype(np.float32)}


def dense(args, sizes):
    """tests/rules/data/dense_bias_first.cu: y = x @ w^T + b."""
    x, w, b = (args[n].astype(np.float64) for n in ("x", "w", "b"))
    return {"y": (x @ w.T + b).astype(np.float32)}


def colmajor(args, sizes):
    """tests/rules/data/sgemm_colmajor.cu: C = A·B with every matrix stored by columns (A's
    array is [K][M], B's [N][K], C's [N][M] in row-major terms)."""
    a, b = args["A"].astype(np.float64), args["B"].astype(np.float64)
    return {"C": (b @ a).astype(np.float32)}


def bmm(args, sizes):
    """tests/rules/data/bmm_naive.cu: one product per batch."""
    a, b = args["A"].astype(np.float64), args["B"].astype(np.float64)
    return {"C": (a @ b).astype(np.float32)}
