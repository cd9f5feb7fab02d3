"""CPU emulator of emitted Metal and CUDA source (and of a user's original CUDA kernels).

Kernels are compiled with the host C++ compiler against small shim headers and run with the
threads of a group as fibers on one OS thread, in a worker subprocess (so that a hang or a
crash becomes an :class:`EmulatorError`, not a dead caller). See docs in each module.
"""

from kir.backends.emulate.cuda import CudaKernel, cuda_kernel
from kir.backends.emulate.original import run_original_cuda
from kir.backends.emulate.metal import MetalKernel, metal_kernel
from kir.backends.emulate.toolchain import EmulatorError, emulator_available

__all__ = [
    "CudaKernel",
    "EmulatorError",
    "MetalKernel",
    "cuda_kernel",
    "emulator_available",
    "metal_kernel",
    "run_original_cuda",
]
