"""Run and check MLX Metal kernels without a Mac.

* :func:`metal_kernel` has ``mx.fast.metal_kernel``'s signature and semantics and runs the
  kernel on kir's C++ CPU emulator, MLX arrays in and out (numpy with ``numpy=True``).
* :func:`emulate_metal_kernels` (a context manager) and the pytest plugin
  (``pytest --emulate-metal`` or the ``emulated_metal`` fixture) make ``mx.fast.metal_kernel``
  itself resolve to it where Metal is absent, so a module's own tests run on Linux unchanged.
* ``kir check MODULE.py:FUNCTION --reference MODULE.py:REF`` (:mod:`kir.emulate.check`) runs a
  kernel wrapper at several shapes against a reference with every check the emulator has.

See docs/MLX_KERNELS.md.
"""

from kir.backends.emulate import EmulatorError, emulator_available
from kir.emulate.kernel import MetalKernel, metal_kernel
from kir.emulate.patch import emulate_metal_kernels

__all__ = ["EmulatorError", "MetalKernel", "emulate_metal_kernels", "emulator_available",
           "metal_kernel"]
