"""An emitted CUDA kernel compiled by kir (NVRTC, :mod:`kir.backends.nvrtc`) and run through
``mx.fast.precompiled_cuda_kernel``: what a search's GPU worker runs.

``mx.fast.cuda_kernel`` compiles on the first call, behind MLX's device headers, and that
compile (3.0-3.5 s a candidate on the H200) bounded how many candidates a search judged per
second. A kernel kir emits needs none of those headers, so :func:`precompiled_source` wraps it
in a lean prelude (fixed-width integers, and the 16-bit float headers only when the kernel
uses those types) as an ``extern "C"`` function, and kir compiles it ahead of the first run,
with MLX's options, on the worker's CPU without holding the GPU lock.

The kernel is the same text MLX would compile (body, helpers, shared memory, launch), so the
machine code is the same; what a search checks at the compiled sizes and times is this binary.
The result a user gets is re-timed through ``mx.fast.cuda_kernel`` itself
(:meth:`kir.measure.mlx.MLXEvaluator.retime`), and a kernel the lean prelude cannot compile
goes through MLX's own path (:meth:`kir.measure.gpu.jobs.MLXRunner.build_ahead`).
"""

from __future__ import annotations

import hashlib
import math

from kir.backends.allocation import output_allocations, unpad_outputs
from kir.backends.cubin import check_block_fits
from kir.backends.cuda import mlx_parameters
from kir.backends.emitted import Emitted
from kir.backends.mlx_runner import MLXKernel, _mx, mx_dtype
from kir.backends.nvrtc import Compiled, nvrtc
from kir.errors import KirError

# Fixed-width integers: NVRTC has no C library of its own (MLX's headers bring <cstdint>
# through libcu++, which is much of their compile time), nvcc does (kir's tests build this
# source with it). 64-bit as glibc's LP64 ``long``.
INTEGERS = """#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#else
#include <cstdint>
#endif
"""


def precompiled_source(e: Emitted) -> tuple[str, str]:
    """The translation unit kir compiles for ``e`` and its kernel's name: the prelude, the
    emitted header, then ``extern "C" __global__ void NAME(...)`` with MLX's parameter list
    (inputs ``const T*``, outputs ``T*``) around the body. The name carries a hash of the
    text: MLX keeps precompiled modules by name for the life of the process."""
    if e.template:
        raise KirError("a kernel with template arguments is compiled by MLX only")
    params = mlx_parameters(zip(e.input_names, e.input_dtypes),
                            zip(e.output_names, e.output_dtypes))
    text = f"{e.header or ''}\n{e.source}"
    prelude = INTEGERS
    if "__half" in text or "half2" in text or "f16" in (*e.input_dtypes, *e.output_dtypes):
        prelude += "#include <cuda_fp16.h>\n"
    if "__nv_bfloat16" in text or "bf16" in (*e.input_dtypes, *e.output_dtypes):
        prelude += "#include <cuda_bf16.h>\n"
    body = (f"{prelude}\n{e.header or ''}\n"
            "extern \"C\" __global__ void KIR_NAME(\n" + ",\n".join(params) + ") {\n"
            f"{e.source}\n}}\n")
    name = "kir_" + hashlib.sha256(body.encode()).hexdigest()[:24]
    return body.replace("KIR_NAME", name, 1), name


class PrecompiledKernel(MLXKernel):
    """:class:`MLXKernel`'s calls, on a binary kir compiled itself (CUDA only). Raises a
    :class:`KirError` when NVRTC refuses the lean translation unit, and its subclass
    :class:`~kir.backends.cubin.LaunchLimitError` when a block of the launch's size needs
    more registers than the device gives one (checked in the binary, before any launch)."""

    compiled_ahead = True

    def __init__(self, emitted: Emitted) -> None:
        if emitted.target != "cuda":
            raise KirError("only CUDA kernels are compiled ahead by kir")
        self.emitted = emitted
        source, self.name = precompiled_source(emitted)
        compiler = nvrtc()
        self.compiled: Compiled = compiler.compile(source, f"{self.name}.cu")
        if not self.compiled.is_ptx:
            check_block_fits(self.compiled.image, self.name, math.prod(emitted.threadgroup),
                             compiler.registers_per_block)

    def launch(self, arrays: list) -> list:
        e = self.emitted
        outs = _mx().fast.precompiled_cuda_kernel(
            name=self.name, compiled_source=self.compiled.image, inputs=arrays,
            output_shapes=output_allocations(e),
            output_dtypes=[mx_dtype(d) for d in e.output_dtypes], scalars=[],
            grid=e.grid, threadgroup=e.threadgroup, shared_memory=e.shared_memory,
            init_value=e.init_value, ensure_row_contiguous=True)
        return unpad_outputs(e, outs)
