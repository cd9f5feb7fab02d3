"""kir back ends: Metal and CUDA source for MLX's custom kernels, the MLX runner, modules.

``emit(kernel, bound, target)`` turns a kir kernel and its bound spec into an
:class:`Emitted` — the body and everything an ``mx.fast.metal_kernel`` /
``mx.fast.cuda_kernel`` call needs. :data:`TARGETS` is the one table of targets (each a
:class:`kir.target.Target` with its limits, packaging and dialect).
"""

from kir.backends.emitted import Emitted, InoutEncoding
from kir.backends.emitter import emit
from kir.backends.targets import TARGETS, target_for, target_named

from kir.target import Target

__all__ = ["TARGETS", "Emitted", "InoutEncoding", "Target", "emit", "target_for", "target_named"]
