"""numpy references for the backend tests' kernels (outputs that start with data)."""

import numpy as np


def axpby(args, sizes):
    c = args["alpha"] * args["A"].astype(np.float64) + args["beta"] * args["C"]
    return {"C": c.astype(np.float32)}


def grad_acc(args, sizes):
    dW = args["dW"].astype(np.float64).copy()
    np.add.at(dW, args["idx"], args["dy"])
    return {"dW": dW.astype(np.float32)}


def _bf16(x):
    """f32 values rounded to bf16 (nearest even), held in f32 as kir holds bf16."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def paged_append(args, sizes):
    k, v = args["k_pages"].copy(), args["v_pages"].copy()
    for s, p in enumerate(args["pos"]):
        if p >= 0:
            k[s, p], v[s, p] = args["k_new"][s], args["v_new"][s]
    return {"k_pages": k, "v_pages": v}


def adamw(args, sizes):
    f = np.float32
    g, p = args["grads"].astype(f), args["params"].astype(f)
    m = f(0.9) * args["m"] + f(0.1) * g
    v = f(0.999) * args["v"] + f(0.001) * g * g
    p = p - f(0.01) * (m / f(0.1) / (np.sqrt(v / f(0.001)) + f(1e-8)) + f(0.01) * p)
    return {"params": _bf16(p), "m": m, "v": v}


def tally(args, sizes):
    hits = args["hits"].astype(np.int64)
    seen = np.minimum(args["seen"].astype(np.int64) + (hits > 0), 65535).astype(np.uint16)
    return {"counts": args["counts"] + (hits << 33), "seen": seen,
            "sums": args["sums"] + args["x"].astype(np.float64) * 0.5}
