"""Python-integer references for int_intrinsics.cu, computed from the CUDA Math API's
definitions element by element (independent of kir's shift-and-mask lowering)."""

import numpy as np

M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def _s8(v: int) -> int:
    v &= 0xFF
    return v - 256 if v >= 128 else v


def _s16(v: int) -> int:
    v &= 0xFFFF
    return v - 65536 if v >= 32768 else v


def _s24(v: int) -> int:
    v &= 0xFFFFFF
    return v - (1 << 24) if v >= (1 << 23) else v


def _wrap32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >= (1 << 31) else v


def _one(x, y, s, t, w, wr):
    both = (y << 32) | x
    perm = 0
    for k in range(4):
        perm |= ((both >> (8 * (((y & 0x7777) >> (4 * k)) & 7))) & 0xFF) << (8 * k)
    shift_l = lambda lo, hi, sh: ((((hi << 32) | lo) << sh) >> 32) & M32  # noqa: E731
    shift_r = lambda lo, hi, sh: (((hi << 32) | lo) >> sh) & M32  # noqa: E731
    dot2_lo = 3 + sum(_s16(s >> (16 * k)) * _s8(t >> (8 * k)) for k in range(2))
    dot2_hi = -5 + sum(_s16(t >> (16 * k)) * _s8(s >> (8 * (2 + k))) for k in range(2))
    return {
        "perm": perm,
        "rev": int(f"{x:032b}"[::-1], 2),
        "rev64": int(f"{w:064b}"[::-1], 2),
        "hi": (x * y) >> 32,
        "shi": (s * t) >> 32,
        "hi64": (w * wr) >> 64,
        "rotl": shift_l(x, x, y & 31),
        "rotr": shift_r(x, y, (y >> 27) & 31),
        "clampl": shift_l(x, y, min(y & 63, 32)),
        "clampr": shift_r(x, y, min((y >> 8) & 63, 32)),
        "sad": ((y & 0xFFFF) + abs(s - t)) & M32,
        "m24": _wrap32(_s24(s) * _s24(t)),
        "um24": ((x & 0xFFFFFF) * (y & 0xFFFFFF)) & M32,
        "dot4": _wrap32((s >> 8) + sum(_s8(s >> (8 * k)) * _s8(t >> (8 * k)) for k in range(4))),
        "udot4": (7 + sum(((x >> (8 * k)) & 0xFF) * ((y >> (8 * k)) & 0xFF)
                          for k in range(4))) & M32,
        "dot2": _wrap32(dot2_lo - dot2_hi),
    }


TYPES = {"perm": np.uint32, "rev": np.uint32, "rev64": np.uint64, "hi": np.uint32,
         "shi": np.int32, "hi64": np.uint64, "rotl": np.uint32, "rotr": np.uint32,
         "clampl": np.uint32, "clampr": np.uint32, "sad": np.uint32, "m24": np.int32,
         "um24": np.uint32, "dot4": np.int32, "udot4": np.uint32, "dot2": np.int32}


def int_intrinsics(args: dict, sizes: dict) -> dict:
    a, b = (np.asarray(args[k]).astype(np.uint64).tolist() for k in "ab")
    s, t = (np.asarray(args[k]).astype(np.int64).tolist() for k in "st")
    w = [int(v) for v in np.asarray(args["w"], np.uint64)]
    n = len(a)
    rows = [_one(a[i], b[i], s[i], t[i], w[i], w[n - 1 - i]) for i in range(n)]
    return {name: np.array([r[name] for r in rows], dtype) for name, dtype in TYPES.items()}
