"""How many elements kir asks MLX to allocate for a kernel output, and why the smallest
outputs are padded on CUDA.

MLX's CUDA allocator serves allocations of at most 8 bytes (a one-float sum, a counter)
from a small pool of managed memory (``SmallSizePool`` in mlx/backend/cuda/allocator.cpp);
larger arrays come from the ordinary pool. A kernel's atomics on the small pool's memory
serialize at about 1.5 µs each on the H200 (benchmarks/reduce_atomics_probe.py, BENCHMARKS.md
"Round 6": 264 blocks each adding once into a 1-float output take 0.37 ms, into a 1024-float
output 0.09 ms), which made every reduction ending in one ``atomicAdd`` per block slow.
So on CUDA an output of at most 8 bytes is allocated as :data:`_PADDED_BYTES` bytes, the
kernel writes its first elements, and the caller slices them back to the output's shape: the
kernel's indices and the values returned are unchanged (the emulated runner allocates alike,
so a write past such an output lands in its padding there; the interpreter, which validates
every candidate, still checks the spec's shapes). Scalar arguments, which MLX gets as
one-element arrays, are padded the same way (the kernel reads element 0): a softmax that
stages its row in shared memory waited on its row length read from the small pool (0.40 ms
a call at 8192², 0.23 ms with the scalar padded; same kernel, same process). Metal is left as it is (Apple's
unified memory has no such pool).

The generated MLX module (which imports nothing from kir) carries these same functions:
:func:`module_source` is their text, so kir's own runner and the module cannot disagree.
"""

from __future__ import annotations

import inspect
import math

_SMALL_POOL_BYTES = 8
_PADDED_BYTES = 256


def allocated_elements(target, elements, itemsize):
    """Elements to allocate for an output of ``elements`` items of ``itemsize`` bytes on
    ``target``: padded to _PADDED_BYTES on CUDA when MLX would take it from its small pool
    of managed memory (at most _SMALL_POOL_BYTES), where atomics cost a round trip each."""
    if target != "cuda" or elements * itemsize > _SMALL_POOL_BYTES:
        return elements
    return max(elements, _PADDED_BYTES // itemsize)


def allocated_shape(target, shape, itemsize):
    """``shape`` itself, or the padded 1-D allocation ``allocated_elements`` asks for."""
    elements = math.prod(shape)
    padded = allocated_elements(target, elements, itemsize)
    return tuple(shape) if padded == elements else (padded,)


def unpad_output(array, shape):
    """The output the kernel wrote, as ``shape``, from its (possibly padded) allocation."""
    if tuple(array.shape) == tuple(shape):
        return array
    return array[:math.prod(shape)].reshape(shape)


def output_allocations(emitted) -> list[tuple[int, ...]]:
    """The shapes to allocate for an emitted kernel's outputs (kir's runners; the module
    computes them from its own tables)."""
    from kir.ir.types import SCALARS

    return [allocated_shape(emitted.target, tuple(s), SCALARS[d].nbytes)
            for s, d in zip(emitted.output_shapes, emitted.output_dtypes)]


def unpad_outputs(emitted, outputs) -> list:
    """Each output as the emitted kernel's shape, from the allocations it ran on."""
    return [unpad_output(out, tuple(s)) for out, s in zip(outputs, emitted.output_shapes)]


def module_source() -> str:
    """The constants and the three policy functions above as Python text, for the generated
    module (which imports math)."""
    functions = (allocated_elements, allocated_shape, unpad_output)
    return (f"_SMALL_POOL_BYTES = {_SMALL_POOL_BYTES}\n_PADDED_BYTES = {_PADDED_BYTES}\n\n\n"
            + "\n\n".join(inspect.getsource(f) for f in functions))
