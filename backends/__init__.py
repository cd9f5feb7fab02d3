"""kir back ends: Metal and CUDA source for MLX's custom kernels, the MLX runner, modules.

``emit(kernel, bound, target)`` turns a kir kernel and its bound spec into an
:class:`Emitted` — the body and everything an ``mx.fast.metal_kernel`` /
``mx.fast.cuda_kernel`` call needs.
"""

from kir.backends.emitted import Emitted, InoutEncoding
from kir.backends.emitter import emit

__all__ = ["Emitted", "InoutEncoding", "emit"]
