"""Where a loaded kernel can run (:data:`RUNNERS`, the choices of ``kir run --target``), and
checking it there against its reference.

``interp`` is kir's numpy interpreter; ``emulate-metal`` / ``emulate-cuda`` run the emitted
source on the CPU emulator; ``emulate-original`` runs the user's own CUDA there;
``cupy-original`` runs it on an NVIDIA GPU through CuPy (NVRTC); ``mlx`` (or ``mlx-metal`` /
``mlx-cuda``) runs the emitted kernel on this machine's GPU through MLX. Every target is a
function ``(loaded, inputs) -> outputs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from kir.driver.load import Loaded
from kir.errors import KirError, UnsupportedError
from kir.spec.compare import CheckResult, compare_outputs

Runner = Callable[[Loaded, dict], dict[str, np.ndarray]]


def run_interp(loaded: Loaded, inputs: dict, *,
               max_steps: int | None = None) -> dict[str, np.ndarray]:
    """Run on the numpy interpreter (under the ``interp_s`` limit); returns the spec's
    outputs."""
    from kir.interp import run_kernel
    from kir.limits import current

    result = run_kernel(loaded.kernel, inputs, loaded.bound.sizes, max_steps=max_steps,
                        time_limit_s=current().interp_s)
    return {name: result[name] for name in loaded.bound.outputs}


def run_emitted(target: str, emulated: bool) -> Runner:
    """A runner that emits ``target`` source and runs it on the CPU emulator or on MLX."""
    def runner(loaded: Loaded, inputs: dict) -> dict[str, np.ndarray]:
        from kir.backends import emit

        emitted = emit(loaded.kernel, loaded.bound, target)
        if emulated:
            from kir.backends.emulated_runner import EmulatedKernel

            return EmulatedKernel(emitted)(inputs)
        from kir.backends.mlx_runner import MLXKernel

        return MLXKernel(emitted)(inputs)
    return runner


def run_original(loaded: Loaded, inputs: dict, *, timeout: float = 60.0) -> dict[str, np.ndarray]:
    """Run the user's original ``__global__`` function from ``loaded.source`` on the emulator
    with the spec's launch; returns the spec's outputs. Arguments bind to the kernel's
    parameters by name, as everywhere else (a null argument is passed as ``nullptr``, one the
    spec leaves out takes its default)."""
    from kir.backends.emulate import run_original_cuda
    from kir.backends.emulated_runner import require_emulator

    require_emulator()
    bound = loaded.bound
    params, args = _original_arguments(loaded, inputs, trailing_defaults=True)
    _refuse_three_vector_buffers(loaded, params)
    results = run_original_cuda(loaded.source, loaded.kernel.name, args, grid=bound.grid,
                                block=bound.block, shared_bytes=bound.shared_bytes,
                                template_args=_template_arguments(loaded, params),
                                filename=str(loaded.path), include_dirs=loaded.include_dirs,
                                constants=_constant_symbols(loaded, params, inputs),
                                timeout=timeout)
    return _outputs(loaded, params, results)


def _refuse_three_vector_buffers(loaded: Loaded, params: list) -> None:
    """The emulator's CUDA header lays a 3-vector out in 16 bytes (Metal's layout), CUDA in
    12: a buffer of them would be read at the wrong places, so such a kernel is refused."""
    for p in params:
        if p.pointer and p.type_word and p.type_word.rstrip("3") != p.type_word \
                and p.type_word[:-1] in _THREE_VECTOR_ELEMENTS:
            raise UnsupportedError(
                f"emulate-original cannot run '{loaded.kernel.name}': parameter '{p.name}' is "
                f"a {p.type_word} buffer, which the emulator lays out in 16 bytes per element "
                "(CUDA: 12)", next((q.loc for q in loaded.kernel.params if q.name == p.name),
                                   None),
                hint="check kir's translation with --target emulate-cuda or emulate-metal")


_THREE_VECTOR_ELEMENTS = {"float", "int", "uint", "double", "char", "uchar", "short",
                          "ushort", "long", "ulong", "longlong", "ulonglong", "half"}


def _constant_symbols(loaded: Loaded, params: list, inputs: dict) -> dict[str, np.ndarray]:
    """The ``__constant__`` memory the kernel reads (its parameters beyond the signature's),
    each argument's value in the parameter's type: what the host would have copied there."""
    from kir.ir.cops import np_dtype
    from kir.ir.types import PointerType

    out = {}
    for param in _constant_params(loaded, params):
        t = param.type.elem if isinstance(param.type, PointerType) else param.type
        out[param.name] = np.asarray(inputs[param.name], dtype=np_dtype(t))
    return out


def _constant_params(loaded: Loaded, params: list) -> list:
    """The kernel's parameters its signature does not have: ``__constant__`` memory (not
    the ``__device__`` variables it writes, which the original file keeps itself)."""
    written = {n for p in params for n in p.argument_names}
    written |= {name for name, _ in loaded.kernel.launch.scratch}
    return [p for p in loaded.kernel.params if p.name not in written]


def run_original_cupy(loaded: Loaded, inputs: dict) -> dict[str, np.ndarray]:
    """The user's original kernel on this machine's NVIDIA GPU, compiled by NVRTC through
    CuPy; arguments bind by name as for ``emulate-original``."""
    from kir.backends.cupy_original import run_original_cupy as run
    from kir.backends.original_source import qualified_name

    bound = loaded.bound
    params, args = _original_arguments(loaded, inputs, trailing_defaults=False)
    namespace = qualified_name(loaded.source, loaded.kernel.name).rpartition("::")[0]
    dtypes = [_scalar_dtype(loaded, p) for p in params]
    if _constant_params(loaded, params):
        raise KirError(f"kernel {loaded.kernel.name} reads __constant__ memory, which "
                       "cupy-original does not fill", hint="run the original with --target "
                       "emulate-original, or check kir's translation (--target mlx)")
    args = [_cupy_struct(p, a) if p.fields else a for p, a in zip(params, args)]
    results = run(loaded.source, loaded.kernel.name, args, dtypes, grid=bound.grid,
                  block=bound.block, shared_bytes=bound.shared_bytes,
                  template_args=[str(a) for a in _template_arguments(loaded, params,
                                                                     namespace)],
                  filename=str(loaded.path), include_dirs=loaded.include_dirs)
    return _outputs(loaded, params, results)


def _cupy_struct(param, value) -> np.void:
    """A struct argument as CuPy passes it (a numpy record); one holding pointers would need
    device addresses in it, which CuPy does not write."""
    if value.pointers:
        raise KirError(f"the struct parameter {param.name!r} holds pointers: cupy-original "
                       "cannot pass it", hint="run the original with --target "
                       "emulate-original, or check kir's translation (--target mlx)")
    return value.record


def _scalar_dtype(loaded: Loaded, param) -> str | None:
    arg = loaded.bound.spec.args.get(param.name)
    kernel_param = next((p for p in loaded.kernel.params if p.name == param.name), None)
    if kernel_param is not None and not kernel_param.is_buffer:
        return str(kernel_param.type)
    return param.dtype or (arg.dtype if arg is not None else None)


def _original_arguments(loaded: Loaded, inputs: dict, trailing_defaults: bool):
    """The original kernel's parameters and their values in order; with
    ``trailing_defaults`` the parameters after the last one the spec gives are left out (the
    compiler applies their defaults), else they get the values kir computes for them."""
    from kir.frontends.cuda import kernel_params

    params = kernel_params(loaded.source, str(loaded.path), loaded.kernel.name,
                           loaded.include_dirs)
    args = [_original_argument(loaded, p, inputs) for p in params]
    while trailing_defaults and args and args[-1] is _DEFAULT:
        args.pop()
    return params, [_default_value(p) if a is _DEFAULT else a for p, a in zip(params, args)]


def _outputs(loaded: Loaded, params: list, results: list) -> dict[str, np.ndarray]:
    bound = loaded.bound
    by_name = {}
    for p, r in zip(params, results):  # a struct's result: its pointer members' buffers
        by_name.update(r if isinstance(r, dict) else {p.name: r})
    from kir.backends.emulated_runner import as_kir_array

    return {name: as_kir_array(by_name[name]).reshape(bound.shape(name))
            for name in bound.outputs}


_C_TYPES = {"f32": "float", "f64": "double", "f16": "__half", "bf16": "__nv_bfloat16",
            "i8": "signed char", "u8": "unsigned char", "i16": "short", "u16": "unsigned short",
            "i32": "int", "u32": "unsigned int", "i64": "long long",
            "u64": "unsigned long long", "bool": "bool"}


def _original_argument(loaded: Loaded, param, inputs: dict):
    """The value the original kernel gets for ``param`` (a frontend KernelParam)."""
    spec = loaded.bound.spec
    if param.fields:
        return _struct_argument(param, inputs)
    arg = spec.args.get(param.name)
    if arg is not None and arg.null:
        return None
    if arg is not None and arg.dtype == "bf16" and arg.is_buffer:
        # kir holds bf16 values in f32 arrays; the original kernel reads 2-byte elements
        from kir.backends.emulated_runner import as_bf16

        return as_bf16(inputs[param.name])
    if arg is not None:
        return inputs[param.name]
    if _data_free(loaded, param):
        from kir.backends.emulate.original import StructArgument

        return StructArgument(np.zeros((), np.dtype([("empty", np.uint8)])))  # C++: 1 byte
    if param.default is None:
        raise spec.error(f"the kernel's parameter {param.name!r} is not in the spec's [args]",
                         "args", hint=f"add {param.name} = {{ ... }} to {spec.path.name}")
    return _DEFAULT


def _data_free(loaded: Loaded, param) -> bool:
    """A struct parameter kir's kernel does not take: a function object holding no data
    (``Op op``), which the original gets default-made."""
    return (param.type_word is not None and not param.pointer and param.dtype is None
            and all(p.name != param.name for p in loaded.kernel.params))


def _struct_argument(param, inputs: dict):
    """A struct parameter's value from its fields' arguments (``p_theta``, ...): a numpy
    record with the struct's C layout (numpy's aligned structs lay fields out as C does),
    its pointer members' buffers given beside it (the launcher writes their addresses)."""
    from kir.backends.emulate.original import StructArgument
    from kir.ir.cops import np_dtype
    from kir.spec.schema import dtype_of

    def dtype(layout: tuple) -> np.dtype:
        return np.dtype([(name, dtype(t) if isinstance(t, tuple) else
                          np.uint64 if t.endswith("*") else np_dtype(dtype_of(t)))
                         for name, t in layout], align=True)

    record = np.zeros((), dtype(param.layout))
    pointers: list[tuple[int, str, np.ndarray]] = []

    def fill(record: np.ndarray, layout: tuple, base: str, at: int) -> None:
        for field, t in layout:  # the names struct_fields gives: base_field, nested too
            name, offset = f"{base}_{field}", at + record.dtype.fields[field][1]
            if isinstance(t, tuple):
                fill(record[field], t, name, offset)
            elif t.endswith("*"):
                pointers.append((offset, name, inputs[name]))
            else:
                record[field] = inputs[name]

    fill(record, param.layout, param.name, 0)
    return StructArgument(record[()], tuple(pointers))


_DEFAULT = object()
_KEYWORDS = {"int", "unsigned", "signed", "long", "short", "bool", "char", "const", "uint",
             "size_t"}


def _default_value(param):
    """A defaulted parameter's value when a later one is given (so it must be passed)."""
    if param.pointer:
        return None  # the frontend accepts only null pointer defaults
    if param.default_value is None:
        raise KirError(f"parameter {param.name!r} defaults to {param.default!r}, which kir "
                       "cannot evaluate", hint=f"give {param.name} in the spec's [args]")
    return param.default_value


def _template_arguments(loaded: Loaded, params: list, namespace: str = "") -> list[int | str]:
    """The original kernel's template arguments: the spec's ``templates`` (a size of the
    same name for a value), a type deduced from the dtype of a parameter declared with it,
    or — for trailing parameters with a default — nothing (C++ applies the default). A value
    of a named type (an enum) is converted to it, named from ``namespace`` when given."""
    from kir.frontends.cuda import instantiated_template_values, kernel_template

    from kir.frontends.cuda.instantiations import ValueText

    template = kernel_template(loaded.source, str(loaded.path), loaded.kernel.name,
                               loaded.include_dirs)
    # the file's own instantiation or launch, where the spec gives nothing: what the
    # frontend lowered the kernel with
    from_file = instantiated_template_values(loaded.source, str(loaded.path),
                                             loaded.kernel.name, loaded.include_dirs)
    values = {**from_file, **loaded.bound.template_values()}
    spec = loaded.bound.spec
    deduced = {}
    for p in params:
        arg = spec.args.get(p.name)
        if p.type_word and arg is not None and arg.dtype and p.type_word not in deduced:
            deduced[p.type_word] = arg.dtype
    out: list[int | str | None] = []
    for t in template:
        value = values.get(t.name)
        if t.is_type:
            dtype = value if isinstance(value, str) else deduced.get(t.name)
            # a dtype, or a type the file defines (a function object) by its name
            out.append(_C_TYPES.get(dtype, dtype) if dtype else None)
        elif isinstance(value, ValueText):  # an enumerator or constant of the file's scope
            out.append(value.text)
        elif isinstance(value, int):
            # a named type (an enum) needs the integer converted to it explicitly
            named = t.type_text and not set(t.type_text.split()) <= _KEYWORDS
            prefix = f"{namespace}::" if namespace and named else ""
            out.append(f"({prefix}{t.type_text})({value})" if named else value)
        elif isinstance(value, str) and value.startswith("&"):  # a function: its name
            out.append(value[1:])
        else:
            out.append(None)
        if out[-1] is None and not t.has_default:
            what = "type" if t.is_type else "value"
            raise spec.error(f"the spec gives no {what} for template parameter {t.name!r}",
                             "templates", hint=f"add templates = {{ {t.name} = ... }}")
    while out and out[-1] is None:
        out.pop()
    if None in out:
        missing = template[out.index(None)].name
        raise spec.error(f"the spec gives no value for template parameter {missing!r} (a "
                         "later one has a value)", "templates")
    return out  # type: ignore[return-value]


def run_mlx(loaded: Loaded, inputs: dict) -> dict[str, np.ndarray]:
    """MLX on this machine's GPU: Metal on Apple Silicon, else CUDA."""
    from kir.backends.mlx_runner import available_targets, require_target

    have = available_targets()
    target = "metal" if "metal" in have else "cuda" if "cuda" in have else "metal"
    require_target(target)
    return run_emitted(target, emulated=False)(loaded, inputs)


RUNNERS: dict[str, Runner] = {
    "interp": run_interp,
    "emulate-metal": run_emitted("metal", emulated=True),
    "emulate-cuda": run_emitted("cuda", emulated=True),
    "emulate-original": run_original,
    "cupy-original": run_original_cupy,
    "mlx": run_mlx,
    "mlx-metal": run_emitted("metal", emulated=False),
    "mlx-cuda": run_emitted("cuda", emulated=False),
}


@dataclass(frozen=True)
class Outcome:
    outputs: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    reference_name: str
    result: CheckResult


def reference_outputs(loaded: Loaded, inputs: dict) -> tuple[dict[str, np.ndarray], str]:
    """The spec's reference function's outputs, or the interpreter's when it names none."""
    expected = loaded.bound.reference(inputs)
    if expected is not None:
        return expected, f"reference {loaded.spec.reference}"
    return run_interp(loaded, inputs), "the interpreter (the spec names no reference)"


def check_on_target(loaded: Loaded, target: str, *, seed: int = 0,
                    max_steps: int | None = None) -> Outcome:
    """Run ``loaded`` on ``target`` with the spec's random inputs for ``seed`` and compare."""
    from kir.errors import KirError

    if target not in RUNNERS:
        raise KirError(f"unknown target {target!r}", hint=f"choose one of {', '.join(RUNNERS)}")
    bound = loaded.bound
    inputs = bound.make_inputs(seed)
    expected, name = reference_outputs(loaded, copy_inputs(inputs))
    if target == "interp":
        got = run_interp(loaded, copy_inputs(inputs), max_steps=max_steps)
    else:
        got = RUNNERS[target](loaded, copy_inputs(inputs))
    result = compare_outputs(got, expected, lambda out: bound.tolerance(bound.spec.args[out].dtype))
    return Outcome(got, expected, name, result)


def copy_inputs(inputs: dict) -> dict:
    """A copy of an input set whose arrays a run may write without touching the original."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
