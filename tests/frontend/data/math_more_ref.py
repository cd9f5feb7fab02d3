"""float64 references for math_more.cu (the inputs as the kernel sees them, in f32)."""

import math

import numpy as np


def _erfc(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[np.float64])(v)


def math_more(args: dict, sizes: dict) -> dict:
    x = np.asarray(args["x"], np.float32).astype(np.float64)
    y = np.asarray(args["y"], np.float32).astype(np.float64)
    e = np.asarray(args["e"], np.int64)
    f = lambda v: np.asarray(v, np.float32).astype(np.float64)  # noqa: E731 (an f32 product)
    norm3 = lambda p, q, r: np.sqrt(p * p + q * q + r * r)  # noqa: E731
    geo = (np.hypot(x, y) + norm3(x, y, 1.5) + 1 / norm3(x, 2.0, y) + 1 / np.hypot(y, 0.5)
           + np.cbrt(f(x * 10)) + 1 / np.cbrt(f(np.abs(y) + 0.1)))
    sx, cy = f(x * 7) % 2, f(y * 3) % 2
    wave = np.sin(np.pi * sx) + np.cos(np.pi * cy) + 10.0 ** x
    hyper = np.arcsinh(f(x * 5)) + np.arccosh(f(np.abs(y) + 1)) + np.arctanh(f(x * 0.9))
    rounded = np.rint(f(x * 1000)).astype(np.int64) + 3 * np.copysign(
        np.floor(np.abs(f(y * 77)) + 0.5), f(y * 77)).astype(np.int64)
    scaled = x * 2.0 ** e + y * 2.0 ** np.trunc(-e / 2)
    sign = (np.signbit(x).astype(np.int32) * 2 + (x - y > 0).astype(np.int32)
            + 4 * (x < math.sqrt(0.5) / math.log(2) - 1.0).astype(np.int32))
    return {"prob": 0.5 * _erfc(-f(x * 3) * math.sqrt(0.5)),
            "tail": _erfc(f(np.abs(x) * 4)) + _erfc(-y), "geo": geo, "wave": wave,
            "hyper": hyper, "rounded": rounded, "scaled": scaled, "sign": sign}
