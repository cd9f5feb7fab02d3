"""``mx.fast.metal_kernel`` / ``cuda_kernel`` stand-ins that run on kir's CPU emulator and
take and return mx.arrays, so a generated module runs unchanged where there is no GPU."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from kir.backends.emulate import cuda_kernel, metal_kernel

_NUMPY = {mx.float32: np.float32, mx.float16: np.float16, mx.int32: np.int32,
          mx.uint32: np.uint32, mx.uint16: np.uint16, mx.int64: np.int64, mx.bool_: np.bool_}


class Emulated:
    """One built kernel; calls count in ``calls``."""

    def __init__(self, kernel) -> None:
        self.kernel = kernel
        self.calls = 0

    def __call__(self, *, inputs, output_shapes, output_dtypes, grid, threadgroup,
                 template=(), init_value=None, **_):
        self.calls += 1
        arrays = [np.array(a) for a in inputs]
        outs = self.kernel(inputs=arrays, output_shapes=output_shapes,
                           output_dtypes=[np.dtype(_NUMPY[d]) for d in output_dtypes],
                           grid=grid, threadgroup=threadgroup,
                           template=[(n, np.dtype(_NUMPY[v]) if v in _NUMPY else v)
                                     for n, v in template], init_value=init_value)
        return [mx.array(o) for o in outs]


def install(monkeypatch) -> list[Emulated]:
    """Route MLX's custom kernels to the emulator and say a device is there; returns the
    list of kernels built (in order)."""
    built: list[Emulated] = []

    def make(factory):
        def build(**kwargs):
            built.append(Emulated(factory(**kwargs)))
            return built[-1]
        return build

    monkeypatch.setattr(mx.fast, "metal_kernel", make(metal_kernel))
    monkeypatch.setattr(mx.fast, "cuda_kernel", make(cuda_kernel))
    monkeypatch.setattr(mx.metal, "is_available", lambda: True)
    monkeypatch.setattr(mx.cuda, "is_available", lambda: True)
    return built
