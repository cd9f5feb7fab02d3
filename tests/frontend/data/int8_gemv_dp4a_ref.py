"""numpy reference for int8_gemv_dp4a.cu: exact int32 row sums, then the scales in f32."""

import numpy as np


def gemv(args: dict, sizes: dict) -> dict:
    w = np.asarray(args["vx"], np.int64)
    x = np.asarray(args["vy"], np.int64)
    acc = (w @ x).astype(np.int32)
    scale = np.asarray(args["row_scale"], np.float32) * np.float32(args["y_scale"])
    return {"dst_i32": acc, "dst": scale * acc.astype(np.float32)}
