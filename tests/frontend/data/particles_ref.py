"""Reference for particles.cu: one damped spring step and a phase turn per particle."""

import numpy as np


def integrate(args: dict, sizes: dict) -> dict:
    n, dt, k = sizes["N"], float(args["dt"]), float(args["k"])
    p = np.asarray(args["pos"], np.float64).reshape(n, 3)
    v = np.asarray(args["vel"], np.float64).reshape(n, 3)
    z = np.asarray(args["phase"], np.float64).reshape(n, 2)
    v = v + (-(k * p) - 0.1 * v) * dt
    p = p + dt * v
    zc = (z[:, 0] + 1j * z[:, 1]) * (0.8 + 0.6j) + (dt + 1j * dt)
    energy = 0.5 * (v * v).sum(1) + 0.5 * k * (p * p).sum(1) + np.abs(zc) ** 2
    phase = np.stack([zc.real, zc.imag], axis=1)
    return {"pos": p.astype(np.float32), "vel": v.astype(np.float32),
            "phase": phase.astype(np.float32), "energy": energy.astype(np.float32)}
