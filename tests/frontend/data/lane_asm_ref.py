"""Reference for lane_asm.cu: the keys' counts, each lane's index and lane masks."""

import numpy as np


def binned(args: dict, sizes: dict) -> dict:
    n, k = sizes["N"], sizes["K"]
    keys = np.asarray(args["keys"])[:n]
    lanes = np.zeros((n, 5), np.uint32)
    for i in range(n):
        lane = i % 32  # 64-thread blocks: a lane's index is the thread's modulo 32
        below = (1 << lane) - 1
        lanes[i] = [lane, 0xFFFFFFFF & ~below, 0xFFFFFFFF & ~(below | 1 << lane),
                    below | 1 << lane, 1 << lane]
    return {"bins": np.bincount(keys, minlength=k).astype(np.int32), "lanes": lanes}
