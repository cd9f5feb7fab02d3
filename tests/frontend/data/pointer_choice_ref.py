"""References for pointer_choice.cu."""

import numpy as np


def split_qkv(args: dict, sizes: dict) -> dict:
    parts = np.asarray(args["qkv"]).reshape(sizes["T"], 3, sizes["HD"])
    return {"q": parts[:, 0], "k": parts[:, 1], "v": parts[:, 2]}


def _norm(x, gain, eps):
    x = np.asarray(x, np.float64)
    return (x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gain).astype(np.float32)


def qk_rms_norm(args: dict, sizes: dict) -> dict:
    return {"q": _norm(args["q"], args["q_gain"], 1e-6),
            "k": _norm(args["k"], args["k_gain"], 1e-6)}
