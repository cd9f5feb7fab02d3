"""numpy reference for warp_sync.cu: each warp's 32 lanes reduced and matched in Python."""

import numpy as np


def warp_sync(args: dict, sizes: dict) -> dict:
    keys = np.asarray(args["keys"], np.int64)
    bits = np.asarray(args["bits"], np.uint64)
    n, k = len(keys), int(sizes["K"])
    out = {name: np.zeros(n, np.uint32) for name in
           ("peers_out", "umax", "ors", "ands", "xors", "all_mask", "group_sums")}
    out.update({name: np.zeros(n, np.int32) for name in ("sums", "mins", "all_same")})
    for w in range(0, n, 32):
        key, b = keys[w:w + 32], bits[w:w + 32]
        lanes = range(32)
        for j in lanes:
            out["peers_out"][w + j] = sum(1 << m for m in lanes if key[m] == key[j])
            out["group_sums"][w + j] = sum(int(b[m]) for m in lanes if key[m] == key[j]) \
                % (1 << 32)
        out["sums"][w:w + 32] = key.sum()
        out["mins"][w:w + 32] = key.min() - 5
        out["umax"][w:w + 32] = b.max()
        ors, ands, xors = 0, 0xFFFFFFFF, 0
        for v in b:
            ors |= int(v) >> 7
            ands &= int(v) | 0x0F0F0F0F
            xors ^= int(v)
        out["ors"][w:w + 32], out["ands"][w:w + 32], out["xors"][w:w + 32] = ors, ands, xors
        uniform = (w // 32) % 3 == 0 or len(set(key.tolist())) == 1
        out["all_mask"][w:w + 32] = 0xFFFFFFFF if uniform else 0
        out["all_same"][w:w + 32] = int(uniform)
    out["counts"] = np.bincount(keys, minlength=k).astype(np.int32)
    return out
