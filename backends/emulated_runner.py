"""Run an emitted kernel (Metal or CUDA, as kir emits it for MLX) on the CPU emulator, with
exactly the arguments MLX would get (:func:`kir.backends.mlx_runner.prepare_inputs`), and run a
user's ORIGINAL CUDA kernel on the emulator as an oracle that shares no code with kir's
frontend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from kir.backends.allocation import output_allocations, unpad_outputs
from kir.backends.emitted import Emitted
from kir.backends.mlx_runner import decode_outputs, prepare_inputs

from kir.errors import KirError


def require_emulator() -> None:
    from kir.backends.emulate import emulator_available

    ok, reason = emulator_available()
    if not ok:
        raise KirError(f"the CPU emulator cannot run here: {reason}",
                       hint="install g++ or clang++ (C++20), or use --target interp")


class EmulatedKernel:
    """An emitted kernel compiled for the CPU emulator; call it like :class:`MLXKernel`."""

    def __init__(self, emitted: Emitted, *, timeout: float = 60.0) -> None:
        from kir.backends import emulate

        require_emulator()
        self.emitted = emitted
        self.timeout = timeout
        common = dict(name=emitted.name, input_names=list(emitted.input_names),
                      output_names=list(emitted.output_names), source=emitted.source,
                      header=emitted.header)
        if emitted.target == "metal":
            self.kernel = emulate.metal_kernel(**common, atomic_outputs=emitted.atomic_outputs)
        else:
            self.kernel = emulate.cuda_kernel(**common, shared_memory=emitted.shared_memory)

    def __call__(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        e = self.emitted
        arrays, keys = prepare_inputs(e, inputs)
        # bf16 in 2-byte elements, as MLX gives them to the kernel (kir holds them in f32):
        # a kernel reading them four at a time (kir_bfloat164) must see the real layout
        arrays = [as_bf16(a) if d == "bf16" else a for a, d in zip(arrays, e.input_dtypes)]
        dtypes = [_bf16_dtype() if d == "bf16" else np.dtype(_NP[d]) for d in e.output_dtypes]
        # Allocated as MLX's runner allocates them (small CUDA outputs padded), so the
        # emulator runs the kernel on the buffers the GPU would give it.
        outs = self.kernel(inputs=arrays, output_shapes=output_allocations(e),
                           output_dtypes=dtypes, grid=e.grid, threadgroup=e.threadgroup,
                           template=list(e.template), init_value=e.init_value,
                           timeout=self.timeout)
        # an encoded bf16 output goes to the decoder as its bits (see backends.emitted.decode)
        raw = [np.asarray(o).view(np.uint16) if d == "bf16" and e.encoding_for(a) is not None
               else as_kir_array(o) for o, a, d in zip(outs, e.output_args, e.output_dtypes)]
        return decode_outputs(e, unpad_outputs(e, raw), keys)


def _bf16_dtype() -> np.dtype:
    from kir.backends.emulate.launch import bfloat16_dtype

    return bfloat16_dtype()  # (a located error with the install hint without ml_dtypes)


def as_bf16(array) -> np.ndarray:
    """f32-held bf16 values as 2-byte bfloat16 (rounded to nearest even, as MLX's astype):
    what a kernel on the emulator reads, kir's or the original."""
    return np.asarray(array, np.float32).astype(_bf16_dtype())


def as_kir_array(array) -> np.ndarray:
    """An emulator's output as kir holds it: bfloat16 values in f32, the rest as they are."""
    array = np.asarray(array)
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


_NP = {"bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32,
       "u32": np.uint32,
       "i64": np.int64,
       "u64": np.uint64, "f16": np.float16, "f32": np.float32, "u16": np.uint16,
       "f64": np.float64}
