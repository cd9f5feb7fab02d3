"""numpy reference for aos_bodies.cu: columns mass, vel[0..2], age, pos.x, pos.y, pos.z."""

import numpy as np


def advance(args: dict, sizes: dict) -> dict:
    b = np.asarray(args["bodies"], np.float64)
    dt = float(args["dt"])
    nxt = b.copy()
    nxt[:, 5:8] += b[:, 1:4] * dt
    nxt[:, 3] -= 9.81 * dt
    nxt[:, 4] += dt
    kinetic = 0.5 * b[:, 0] * (b[:, 1:4] ** 2).sum(axis=1)
    energy = kinetic + b[:, 0] * 9.81 * nxt[:, 7]
    return {"next": nxt.astype(np.float32), "energy": energy.astype(np.float32)}
