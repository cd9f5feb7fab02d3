"""MLX arrays in and out of the emulator, which works on numpy arrays.

bfloat16 has no numpy dtype of its own: it comes from the optional ``ml_dtypes`` package
(``pip install 'kir[bf16]'``), and crosses to and from MLX as its 16 raw bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from kir.backends.emulate.launch import bfloat16_dtype


def is_mlx_array(value: Any) -> bool:
    """True for an ``mx.array`` (checked by type name: MLX is not imported for numpy users)."""
    return type(value).__module__.startswith("mlx") and type(value).__name__ == "array"


def to_numpy(value: Any) -> Any:
    """An MLX array as numpy (evaluating it); numpy arrays and Python scalars pass through."""
    if not is_mlx_array(value):
        return value
    import mlx.core as mx

    if value.dtype == mx.bfloat16:
        return np.array(value.view(mx.uint16)).view(bfloat16_dtype())
    return np.array(value)


def to_mlx(array: np.ndarray) -> Any:
    """A numpy array as an MLX array of the same dtype (bfloat16 included)."""
    import mlx.core as mx

    if array.dtype.name == "bfloat16":
        return mx.array(array.view(np.uint16)).view(mx.bfloat16)
    return mx.array(array)
