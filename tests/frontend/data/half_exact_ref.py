"""float64 references for half_exact.cu: every result rounded once to its type."""

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16


def half_exact(args: dict, sizes: dict) -> dict:
    a, b, c = (np.asarray(args[k]).astype(np.float16).astype(np.float64) for k in "abc")
    p, q = (np.asarray(args[k]).astype(BF16).astype(np.float64) for k in "pq")
    i0, i1 = (np.asarray(args[k], np.int64) for k in ("i0", "i1"))
    return {"fused": (a * b + c).astype(np.float16), "prod": (a * b).astype(np.float16),
            "sum": (a + c).astype(np.float16),
            "bprod": (p * q).astype(BF16).astype(np.float32),
            "bsum": (p + q).astype(BF16).astype(np.float32),
            "bfused": (p * q + p).astype(BF16).astype(np.float32),
            "avg": ((i0 + i1) >> 1).astype(np.int32),
            "ravg": ((i0 + i1 + 1) >> 1).astype(np.int32)}
