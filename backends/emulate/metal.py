"""``metal_kernel``: MLX's ``mx.fast.metal_kernel`` run on the CPU.

The generated signature follows MLX's ``write_signature`` (mlx/backend/metal/custom_kernel.cpp):
inputs ``const device T* name`` (``constant`` when the array has fewer than 8 elements,
``const constant T& name`` when 0-d), then ``name_shape`` / ``name_strides`` / ``name_ndim``
where the body mentions them, outputs ``device T*`` (``device atomic<T>*`` with
``atomic_outputs``), then the thread attributes the body mentions; template arguments make it a
``template <...>`` kernel. A body written for MLX runs here unmodified.

``compile_options={"math_mode": ...}`` is checked as MLX checks it; "safe" (the default)
computes IEEE-exactly, "relaxed" and "fast" compile the body with the host compiler's matching
fast-math flags (so, as on a GPU, NaN and infinity tests may fold away under "fast").
``check=True`` builds the checked kernel of ``kir_emu_check.h`` (bounds of every buffer,
reads before writes, threadgroup races); its findings land in ``findings`` after each call.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
from kir.backends.emulate import checked
from kir.backends.emulate import launch as L
from kir.backends.emulate.source import rewrite_group_memory, strip_metal_includes

MAX_CONSTANT_ARRAY_SIZE = 8

# (attribute, type) in MLX's order
ATTRIBUTES = (
    ("dispatch_quadgroups_per_threadgroup", "uint"), ("dispatch_simdgroups_per_threadgroup", "uint"),
    ("dispatch_threads_per_threadgroup", "uint3"), ("grid_origin", "uint3"), ("grid_size", "uint3"),
    ("quadgroup_index_in_threadgroup", "uint"), ("quadgroups_per_threadgroup", "uint"),
    ("simdgroup_index_in_threadgroup", "uint"), ("simdgroups_per_threadgroup", "uint"),
    ("thread_execution_width", "uint"), ("thread_index_in_quadgroup", "uint"),
    ("thread_index_in_simdgroup", "uint"), ("thread_index_in_threadgroup", "uint"),
    ("thread_position_in_grid", "uint3"), ("thread_position_in_threadgroup", "uint3"),
    ("threadgroup_position_in_grid", "uint3"), ("threadgroups_per_grid", "uint3"),
    ("threads_per_grid", "uint3"), ("threads_per_simdgroup", "uint"),
    ("threads_per_threadgroup", "uint3"),
)

# numpy dtype -> MLX's Metal type string
MSL_TYPES = {
    np.dtype(np.float32): "float", np.dtype(np.float16): "float16_t",
    np.dtype(np.int32): "int32_t", np.dtype(np.uint32): "uint32_t",
    np.dtype(np.int64): "int64_t", np.dtype(np.uint64): "uint64_t",
    np.dtype(np.int16): "int16_t", np.dtype(np.uint16): "uint16_t",
    np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.bool_): "bool",
}


MATH_MODE_FLAGS = {
    "safe": (),
    "relaxed": ("-ffast-math", "-fno-finite-math-only"),
    "fast": ("-ffast-math",),
}


def math_mode_of(compile_options: Mapping[str, Any] | None) -> str:
    """The math mode of MLX's ``compile_options``, checked with MLX's messages."""
    mode = "safe"
    for key, value in (compile_options or {}).items():
        if key != "math_mode":
            raise L.EmulatorError(f"[metal_kernel] Unknown compile option `{key}`.", kind="launch")
        if value not in MATH_MODE_FLAGS:
            raise L.EmulatorError("[metal_kernel] Expected math_mode to be 'safe', 'relaxed', "
                                  "or 'fast'.", kind="launch")
        mode = value
    return mode


def msl_type(dtype: Any) -> str:
    """MLX's Metal spelling of a dtype."""
    dt = L.to_dtype(dtype)
    if dt.name == "bfloat16":
        return "bfloat16_t"
    if dt not in MSL_TYPES:
        raise L.EmulatorError(f"dtype {dt} is not supported by metal_kernel", kind="launch")
    return MSL_TYPES[dt]


def _cxx(tname: str) -> str:
    """The spelling of a Metal type name outside ``namespace metal``."""
    return "metal::" + tname if tname in ("float16_t", "bfloat16_t") else tname


def template_value(value: Any) -> tuple[str, str]:
    """(parameter kind, value text) of one template argument, as MLX writes them."""
    if isinstance(value, (bool, np.bool_)):
        return "bool", "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return "int", str(int(value))
    return "typename", msl_type(value)


class MetalKernel:
    """An MLX-style Metal kernel; calling it runs it on the CPU and returns numpy outputs."""

    def __init__(self, name: str, input_names: Sequence[str], output_names: Sequence[str],
                 source: str, header: str = "", ensure_row_contiguous: bool = True,
                 atomic_outputs: bool = False, compile_options: Mapping[str, Any] | None = None,
                 *, check: bool = False) -> None:
        if not output_names:
            raise L.EmulatorError("[metal_kernel] Must specify at least one output.", kind="launch")
        self.math_mode = math_mode_of(compile_options)
        self.check = check
        self.findings: list[Any] = []
        self.report: Any = None  # checked.Report of the last checked launch
        self.name = name
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.source = source
        self.header = header
        self.ensure_row_contiguous = ensure_row_contiguous
        self.atomic_outputs = atomic_outputs
        self.shape_infos = [(f"{n}_shape" in source, f"{n}_strides" in source, f"{n}_ndim" in source)
                            for n in self.input_names]
        self.attributes = [(a, t) for a, t in ATTRIBUTES if a in source]
        self.body_file = f"{name}.metal"
        self.header_file = f"{name}.header.metal"
        self.last_source = ""

    @property
    def compile_flags(self) -> tuple[str, ...]:
        """Host compiler flags of this kernel's math mode and build (plain or checked)."""
        return MATH_MODE_FLAGS[self.math_mode] + (checked.CHECK_FLAGS if self.check else ())

    def kernel_name(self, inputs: list[np.ndarray], output_dtypes: Sequence[Any],
                    template: Sequence[tuple[str, Any]]) -> str:
        """MLX's name for one instantiation (template values, input kinds, dtypes)."""
        name = "custom_kernel_" + self.name
        if template:
            text = "<" + ", ".join(template_value(v)[1] for _, v in template) + ">"
            name += "_" + re.sub(r"<|>|(, )", "_", text)[:-1]
        for array in inputs:
            name += "_" + msl_type(array.dtype)
            name += "s" if array.ndim == 0 else ("c" if array.size < MAX_CONSTANT_ARRAY_SIZE else "")
        for dtype in output_dtypes:
            name += "_" + msl_type(dtype)
        return name

    def generate(self, inputs: list[np.ndarray], output_dtypes: Sequence[Any],
                 template: Sequence[tuple[str, Any]]) -> tuple[str, list[str]]:
        """The C++ translation unit and the list of launch-argument slots it expects
        ("in:i", "shape:i", "strides:i", "ndim:i", "out:j")."""
        fname = self.kernel_name(inputs, output_dtypes, template)
        params, call, slots = [], [], []
        for i, (name, array) in enumerate(zip(self.input_names, inputs)):
            tname = msl_type(array.dtype)
            space = "constant" if array.size < MAX_CONSTANT_ARRAY_SIZE else "device"
            ref = "&" if array.ndim == 0 else "*"
            params.append(f"  const {space} {tname}{ref} {name} [[buffer({len(params)})]]")
            cast = f"(const {_cxx(tname)}*)a[{len(slots)}].p"
            call.append(f"*{cast}" if array.ndim == 0 else cast)
            slots.append(f"in:{i}")
            if array.ndim == 0:
                continue
            shape, strides, ndim = self.shape_infos[i]
            if shape:
                params.append(f"  const constant int* {name}_shape [[buffer({len(params)})]]")
                call.append(f"(const int*)a[{len(slots)}].p")
                slots.append(f"shape:{i}")
            if strides:
                params.append(f"  const constant int64_t* {name}_strides [[buffer({len(params)})]]")
                call.append(f"(const int64_t*)a[{len(slots)}].p")
                slots.append(f"strides:{i}")
            if ndim:
                params.append(f"  const constant int& {name}_ndim [[buffer({len(params)})]]")
                call.append(f"*(const int*)a[{len(slots)}].p")
                slots.append(f"ndim:{i}")
        for j, (name, dtype) in enumerate(zip(self.output_names, output_dtypes)):
            tname = msl_type(dtype)
            pointee = f"atomic<{tname}>" if self.atomic_outputs else tname
            params.append(f"  device {pointee}* {name} [[buffer({len(params)})]]")
            cxx = f"metal::atomic<{_cxx(tname)}>" if self.atomic_outputs else _cxx(tname)
            call.append(f"({cxx}*)a[{len(slots)}].p")
            slots.append(f"out:{j}")
        for attr, typ in self.attributes:
            params.append(f"  {typ} {attr} [[{attr}]]")
            call.append(f"::kir_emu::msl::{attr}()")
        head = ""
        if template:
            head = "template <" + ", ".join(f"{template_value(v)[0]} {n}" for n, v in template) + ">\n"
        instance = fname
        if template:
            instance += "<" + ", ".join(
                (_cxx(text) if kind == "typename" else text)
                for kind, text in (template_value(v) for _, v in template)) + ">"
        header = rewrite_group_memory(strip_metal_includes(self.header), "threadgroup")
        body = rewrite_group_memory(strip_metal_includes(self.source), "threadgroup")
        unit = "\n".join([
            '#include "kir_emu_metal.h"',
            "namespace metal {",
            f'#line 1 "{self.header_file}"',
            header,
            '#line 1 "<generated>"',
            f"{head}[[kernel]] void {fname}(",
            ",\n".join(params) + ") {",
            f'#line 1 "{self.body_file}"',
            body,
            "}",
            "}  // namespace metal",
            '#line 1 "<launcher>"',
            "static void kir_run_thread(void* p) {",
            "  const ::kir_emu::Arg* a = static_cast<const ::kir_emu::Arg*>(p);",
            f"  metal::{instance}(\n    " + ",\n    ".join(call) + ");",
            "}",
            "KIR_EMU_EXPORT int kir_emu_entry(const ::kir_emu::Arg* a, int, const uint32_t* dims,",
            "    uint64_t smem, uint64_t stack_kib, char* err, uint64_t errlen) {",
            f'  return ::kir_emu::launch("{self.name}", false, &kir_run_thread, (void*)a, dims, smem,',
            "                          stack_kib, err, errlen);",
            "}",
            "",
        ])
        return unit, slots

    def __call__(self, inputs: Sequence[Any], output_shapes: Sequence[Sequence[int]],
                 output_dtypes: Sequence[Any], grid: Sequence[int], threadgroup: Sequence[int],
                 template: Sequence[tuple[str, Any]] = (), init_value: float | None = None,
                 verbose: bool = False, timeout: float = L.DEFAULT_TIMEOUT_S,
                 **_: Any) -> list[np.ndarray]:
        """Run the kernel; returns the outputs as numpy arrays (MLX's call signature)."""
        self.report, self.findings = None, []
        if verbose:
            print(mlx_source(self, [L.as_input_array(v) for v in inputs], output_dtypes,
                             list(template.items() if isinstance(template, dict) else template)))
        arrays, slots, sources, so_path = L.compile_call(self, "metal", inputs, output_shapes,
                                                         output_dtypes, template, False)
        dims = L.metal_dims(grid, threadgroup)
        outputs = L.poisoned_outputs(output_shapes, output_dtypes, init_value)
        layouts = [strided_layout(v, a) if not self.ensure_row_contiguous else (a, a.strides)
                   for v, a in zip(inputs, arrays)]
        buffers: list[np.ndarray] = []
        roles: list[int] = []
        for slot in slots:
            kind, index = slot.split(":")
            i = int(index)
            if kind == "in":
                buffers.append(layouts[i][0])
            elif kind == "shape":
                buffers.append(np.array(arrays[i].shape, dtype=np.int32))
            elif kind == "strides":
                buffers.append(np.array([s // arrays[i].itemsize for s in layouts[i][1]],
                                        dtype=np.int64))
            elif kind == "ndim":
                buffers.append(np.array([arrays[i].ndim], dtype=np.int32))
            else:
                buffers.append(outputs[i])
            roles.append(checked.role_of(kind, init_value))
        out_first = len(buffers) - len(outputs)
        args = [("p", k) for k in range(len(buffers))]
        returns = list(range(out_first, len(buffers)))
        if not self.check:
            return L.run_launch(str(so_path), self.name, buffers, args, dims, smem=0,
                                returns=returns, timeout=timeout, sources=sources)
        reply = L.launch_reply(str(so_path), self.name, buffers, args, dims, smem=0,
                               returns=returns, timeout=timeout, check_roles=roles)
        names = [self.slot_name(slot) for slot in slots]
        report = checked.Report(reply.get("check", ""), str(so_path), sources, names, buffers)
        self.report = report
        self.findings = report.findings()
        if reply["rc"] != 0:
            raise report.launch_error(reply["err"])
        return reply["arrays"]

    def slot_name(self, slot: str) -> str:
        """The name the body uses for one launch-argument slot."""
        kind, index = slot.split(":")
        if kind == "out":
            return self.output_names[int(index)]
        name = self.input_names[int(index)]
        return name if kind == "in" else f"{name}_{kind}"


def strided_layout(value: Any, array: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """(buffer, strides in bytes) of an input MLX would not copy (``ensure_row_contiguous=False``):
    a numpy view keeps its strides over the smallest buffer that holds it; anything else is
    row-contiguous already."""
    if not isinstance(value, np.ndarray) or value.flags.c_contiguous or value.size == 0:
        return array, array.strides
    if any(s < 0 or s % value.itemsize for s in value.strides):
        return array, array.strides  # MLX would copy these too
    span = sum((n - 1) * s for n, s in zip(value.shape, value.strides)) // value.itemsize + 1
    flat = np.lib.stride_tricks.as_strided(value, shape=(span,), strides=(value.itemsize,))
    return np.array(flat), value.strides


def mlx_source(kernel: MetalKernel, inputs: list[np.ndarray], output_dtypes: Sequence[Any],
               template: Sequence[tuple[str, Any]]) -> str:
    """What MLX prints for ``verbose=True``: the header, the generated signature with the body,
    and the template instantiation (``write_signature`` in MLX's custom_kernel.cpp)."""
    fname = kernel.kernel_name(inputs, output_dtypes, template)
    params = []
    for name, array, (shape, strides, ndim) in zip(kernel.input_names, inputs, kernel.shape_infos):
        space = "constant" if array.size < MAX_CONSTANT_ARRAY_SIZE else "device"
        ref = "&" if array.ndim == 0 else "*"
        params.append(f"  const {space} {msl_type(array.dtype)}{ref} {name}")
        if array.ndim > 0:
            params += [f"  const constant int* {name}_shape"] if shape else []
            params += [f"  const constant int64_t* {name}_strides"] if strides else []
            params += [f"  const constant int& {name}_ndim"] if ndim else []
    for name, dtype in zip(kernel.output_names, output_dtypes):
        tname = msl_type(dtype)
        params.append(f"  device {f'atomic<{tname}>' if kernel.atomic_outputs else tname}* {name}")
    params = [f"{p} [[buffer({i})]]" for i, p in enumerate(params)]
    params += [f"  {typ} {attr} [[{attr}]]" for attr, typ in kernel.attributes]
    head = ""
    if template:
        head = "template <" + ", ".join(f"{template_value(v)[0]} {n}"
                                        for n, v in template) + ">\n"
    text = f"{kernel.header}{head}[[kernel]] void {fname}(\n" + ",\n".join(params) + ") {\n"
    text += kernel.source + "\n}\n"
    if template:
        inst = fname + "<" + ", ".join(template_value(v)[1] for _, v in template) + ">"
        text += (f'\ntemplate [[host_name("{fname}")]] [[kernel]] decltype({inst}) {inst};\n')
    return f"Generated source code for `{kernel.name}`:\n```\n{text}\n```"


def metal_kernel(name: str, input_names: Sequence[str], output_names: Sequence[str], source: str,
                 header: str = "", ensure_row_contiguous: bool = True,
                 atomic_outputs: bool = False, compile_options: Mapping[str, Any] | None = None,
                 *, check: bool = False) -> MetalKernel:
    """Drop-in for ``mx.fast.metal_kernel`` whose calls run on the CPU emulator (numpy out)."""
    return MetalKernel(name, input_names, output_names, source, header, ensure_row_contiguous,
                       atomic_outputs, compile_options, check=check)
