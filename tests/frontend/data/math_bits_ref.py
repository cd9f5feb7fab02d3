"""Reference for math_bits.cu."""

import numpy as np


def _bits(values, count) -> np.ndarray:
    return np.array([count(int(v)) for v in values], np.int32)


def math_bits(args: dict, sizes: dict) -> dict:
    v = np.asarray(args["x"], np.float64)
    w = 0.5 * np.tanh(v)
    q = np.where(v > 1.0, np.inf, np.where(v < -1.0, np.nan, v))
    positive = (v > 0).reshape(-1, 32).sum(axis=1)
    f = np.stack([np.tan(w) + np.arctan(v), np.arcsin(w) + np.arccos(w),
                  np.arctan2(v, 1.5) + np.log10(np.abs(v) + 1.0),
                  np.fmod(v.astype(np.float32) * np.float32(7.0), np.float32(2.5))
                  + np.copysign(1.0, v),
                  np.where(np.isnan(q), 1.0, np.where(np.isinf(q), 2.0, 0.0)),
                  np.repeat(positive, 32)], axis=1)
    u = np.asarray(args["u"]).astype(np.uint64)
    bits = np.stack([_bits(u, lambda b: bin(b).count("1")),
                     _bits(u, lambda b: 32 - b.bit_length()),
                     _bits(u, lambda b: (b & -b).bit_length())], axis=1)
    return {"f": f.astype(np.float32), "bits": bits}
