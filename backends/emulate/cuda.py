"""``cuda_kernel`` (MLX's ``mx.fast.cuda_kernel`` conventions; a user's original file runs
through :mod:`kir.backends.emulate.original`).

MLX's CUDA signature (mlx/backend/cuda/custom_kernel.cpp, ``build_kernel``): in
``namespace mlx::core::cu``, ``__global__ void custom_kernel_<name><hash>(`` inputs
``const T* name`` (0-d inputs too), ``const __grid_constant__ Shape name_shape`` /
``Strides name_strides`` / ``int name_ndim`` where the body mentions them, outputs ``T* name``
``)``, then ``constexpr int``/``constexpr bool``/``using`` lines for the template arguments, then
the body. It launches ceil(grid / threadgroup) whole blocks with ``shared_memory`` bytes of
dynamic shared memory.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from kir.backends.emulate import launch as L
from kir.backends.emulate.source import rewrite_extern_shared, rewrite_group_memory

MAX_NDIM = 8

CUDA_TYPES = {
    np.dtype(np.float32): "float", np.dtype(np.float16): "__half", np.dtype(np.float64): "double",
    np.dtype(np.int32): "int32_t", np.dtype(np.uint32): "uint32_t",
    np.dtype(np.int64): "int64_t", np.dtype(np.uint64): "uint64_t",
    np.dtype(np.int16): "int16_t", np.dtype(np.uint16): "uint16_t",
    np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.bool_): "bool",
}
MLX_TYPE_NAMES = {np.dtype(np.float16): "float16", np.dtype(np.bool_): "bool_"}


def cuda_type(dtype: Any) -> str:
    """MLX's CUDA spelling of a dtype (``dtype_to_cuda_type``)."""
    dt = L.to_dtype(dtype)
    if dt.name == "bfloat16":  # ml_dtypes' (numpy has none of its own)
        return "__nv_bfloat16"
    if dt not in CUDA_TYPES:
        raise L.EmulatorError(f"dtype {dt} is not supported by cuda_kernel", kind="launch")
    return CUDA_TYPES[dt]


def _rewrite_cuda(text: str) -> str:
    return rewrite_group_memory(rewrite_extern_shared(text), "__shared__")


class CudaKernel:
    """An MLX-style CUDA kernel; calling it runs it on the CPU and returns numpy outputs."""

    def __init__(self, name: str, input_names: Sequence[str], output_names: Sequence[str],
                 source: str, header: str = "", ensure_row_contiguous: bool = True,
                 shared_memory: int = 0) -> None:
        if not output_names:
            raise L.EmulatorError("[cuda_kernel] Must specify at least one output.", kind="launch")
        self.name = name
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.source = source
        self.header = header
        self.shared_memory = shared_memory
        self.shape_infos = [(f"{n}_shape" in source, f"{n}_strides" in source, f"{n}_ndim" in source)
                            for n in self.input_names]
        self.body_file = f"{name}.cu"
        self.header_file = f"{name}.header.cu"
        self.last_source = ""

    def generate(self, inputs: list[np.ndarray], output_dtypes: Sequence[Any],
                 template: Sequence[tuple[str, Any]]) -> tuple[str, list[tuple[str, int]]]:
        """The C++ translation unit and its launch-argument slots ((kind, input/output index))."""
        suffix, constants = "", []
        for tname, value in template:
            if isinstance(value, (bool, np.bool_)):
                suffix += "_t" if value else "_f"
                constants.append(f"  constexpr bool {tname} = {'true' if value else 'false'};")
            elif isinstance(value, (int, np.integer)):
                suffix += f"_{int(value)}"
                constants.append(f"  constexpr int {tname} = {int(value)};")
            else:
                dt = L.to_dtype(value)
                suffix += "_" + MLX_TYPE_NAMES.get(dt, dt.name)
                constants.append(f"  using {tname} = {cuda_type(dt)};")
        fname = f"custom_kernel_{self.name}{suffix}"
        params, call, slots = [], [], []
        for i, (name, array) in enumerate(zip(self.input_names, inputs)):
            params.append(f"    const {cuda_type(array.dtype)}* {name}")
            call.append(f"(const {cuda_type(array.dtype)}*)a[{len(slots)}].p")
            slots.append(("in", i))
            if array.ndim == 0:
                continue
            shape, strides, ndim = self.shape_infos[i]
            if shape:
                params.append(f"    const __grid_constant__ Shape {name}_shape")
                call.append(f"*(const mlx::core::cu::Shape*)a[{len(slots)}].p")
                slots.append(("shape", i))
            if strides:
                params.append(f"    const __grid_constant__ Strides {name}_strides")
                call.append(f"*(const mlx::core::cu::Strides*)a[{len(slots)}].p")
                slots.append(("strides", i))
            if ndim:
                params.append(f"    const __grid_constant__ int {name}_ndim")
                call.append(f"(int)a[{len(slots)}].i")
                slots.append(("ndim", i))
        for j, (name, dtype) in enumerate(zip(self.output_names, output_dtypes)):
            params.append(f"    {cuda_type(dtype)}* {name}")
            call.append(f"({cuda_type(dtype)}*)a[{len(slots)}].p")
            slots.append(("out", j))
        unit = "\n".join([
            '#include "kir_emu_cuda.h"',
            "#define inf std::numeric_limits<float>::infinity()",
            f'#line 1 "{self.header_file}"',
            _rewrite_cuda(self.header),
            '#line 1 "<generated>"',
            "namespace mlx::core::cu {",
            "namespace cg = cooperative_groups;",
            f"__global__ void {fname}(",
            ",\n".join(params) + ") {",
            *constants,
            f'#line 1 "{self.body_file}"',
            _rewrite_cuda(self.source),
            "}",
            "}  // namespace mlx::core::cu",
            '#line 1 "<launcher>"',
            "static void kir_run_thread(void* p) {",
            "  const ::kir_emu::Arg* a = static_cast<const ::kir_emu::Arg*>(p);",
            f"  mlx::core::cu::{fname}(\n    " + ",\n    ".join(call) + ");",
            "}",
            "KIR_EMU_EXPORT int kir_emu_entry(const ::kir_emu::Arg* a, int, const uint32_t* dims,",
            "    uint64_t smem, uint64_t stack_kib, char* err, uint64_t errlen) {",
            f'  return ::kir_emu::launch("{self.name}", true, &kir_run_thread, (void*)a, dims, smem,',
            "                          stack_kib, err, errlen);",
            "}",
            "",
        ])
        return unit, slots

    def __call__(self, inputs: Sequence[Any], output_shapes: Sequence[Sequence[int]],
                 output_dtypes: Sequence[Any], grid: Sequence[int], threadgroup: Sequence[int],
                 template: Sequence[tuple[str, Any]] = (), init_value: float | None = None,
                 verbose: bool = False, shared_memory: int | None = None,
                 timeout: float = L.DEFAULT_TIMEOUT_S, **_: Any) -> list[np.ndarray]:
        """Run the kernel; returns the outputs as numpy arrays (MLX's call signature)."""
        arrays, slots, sources, so_path = L.compile_call(self, "cuda", inputs, output_shapes,
                                                         output_dtypes, template, verbose)
        g = L.triple(grid, "grid")
        t = L.triple(threadgroup, "threadgroup")
        dims = L.cuda_dims([-(-a // b) for a, b in zip(g, t)], t)
        outputs = L.poisoned_outputs(output_shapes, output_dtypes, init_value)
        buffers: list[np.ndarray] = []
        args: list[tuple[str, Any]] = []
        returns = []
        for kind, i in slots:
            if kind == "ndim":
                args.append(("i", arrays[i].ndim))
                continue
            if kind == "in":
                buffers.append(arrays[i])
            elif kind in ("shape", "strides"):
                values = arrays[i].shape if kind == "shape" else \
                    [s // arrays[i].itemsize for s in arrays[i].strides]
                if len(values) > MAX_NDIM:
                    raise L.EmulatorError(f"input of {len(values)} dimensions (at most {MAX_NDIM})",
                                          kind="launch")
                padded = np.zeros(MAX_NDIM, dtype=np.int32 if kind == "shape" else np.int64)
                padded[:len(values)] = values
                buffers.append(padded)
            else:
                returns.append(len(buffers))
                buffers.append(outputs[i])
            args.append(("p", len(buffers) - 1))
        smem = self.shared_memory if shared_memory is None else shared_memory
        return L.run_launch(str(so_path), self.name, buffers, args, dims, smem=smem,
                            returns=returns, timeout=timeout, sources=sources)


def cuda_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str], source: str,
                header: str = "", ensure_row_contiguous: bool = True,
                shared_memory: int = 0) -> CudaKernel:
    """Drop-in for ``mx.fast.cuda_kernel`` whose calls run on the CPU emulator."""
    return CudaKernel(name, input_names, output_names, source, header, ensure_row_contiguous,
                      shared_memory)
