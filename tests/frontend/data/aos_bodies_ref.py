"""numpy reference for aos_bodies.cu: columns pos.x, pos.y, pos.z, mass, vel[0..2], age."""

import numpy as np


def advance(args: dict, sizes: dict) -> dict:
    b = np.asarray(args["bodies"], np.float64)
    dt = float(args["dt"])
    nxt = b.copy()
    nxt[:, 0:3] += b[:, 4:7] * dt
    nxt[:, 6] -= 9.81 * dt
    nxt[:, 7] += dt
    kinetic = 0.5 * b[:, 3] * (b[:, 4:7] ** 2).sum(axis=1)
    energy = kinetic + b[:, 3] * 9.81 * nxt[:, 2]
    return {"next": nxt.astype(np.float32), "energy": energy.astype(np.float32)}
