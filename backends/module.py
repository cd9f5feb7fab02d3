"""Write emitted kernels out for users: a drop-in MLX Python module, or Metal source.

The module imports only ``mlx.core`` (and ``math``), nothing from kir, and follows MLX's own
custom-kernel conventions (mlx-lm style):

* sizes are read from the arguments' shapes at call time (each plain size name in a spec
  shape is solved from the array's dimension) and checked against every other dimension and
  the spec's ``require`` constraints; grid, output shapes and scalar arguments come from the
  spec's expressions at those sizes;
* it holds one or more :class:`Variant` kernels and picks one per call: a kernel a rule
  specialized only at the sizes it was validated for, kernels tuned on another chip or at
  other sizes behind the one tuned for this GPU nearest in size, the general kernel last;
  one variant per dtype when the kernel is generic (``template <typename T>``);
* when no GPU kernel can run (no Metal or CUDA device, a size or dtype no variant takes) it
  calls the spec's MLX reference (``reference_mlx``) copied into it, or says why it cannot;
* the public function is an ``mx.custom_function``, so ``@fn.vjp`` attaches a gradient;
* ``warmup()`` compiles every variant (optionally on import), and outputs whose initial
  contents MLX's single ``init_value`` cannot express are XOR-decoded or accumulated as in
  :mod:`kir.backends.emitted`.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from kir.backends.allocation import module_source as allocation_source
from kir.backends.emitted import Emitted, value_bits
from kir.backends.metal import metal_signature

from kir.errors import KirError
from kir.ir.types import SCALARS
from kir.spec.pyexpr import PRELUDE, size_expr_to_python
from kir.spec.require import to_python as require_to_python

MX_DTYPES = {"bool": "bool_", "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32",
             "u32": "uint32",
             "i64": "int64", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
             "f32": "float32", "u16": "uint16", "f64": "float64"}
_BITS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


@dataclass(frozen=True)
class Variant:
    """One kernel the module may launch.

    ``sizes`` are the sizes it was emitted and validated at; ``fixed`` names the sizes its
    body bakes in (template values, block, static shared memory), which a call must match;
    ``exact`` marks a kernel a rule specialized to ``sizes`` (used at exactly those);
    ``device`` is the GPU it was tuned on (None: any); ``label`` says where it came from."""

    emitted: Emitted
    sizes: Mapping[str, int]
    fixed: tuple[str, ...] = ()
    exact: bool = False
    device: str | None = None
    time_ms: float | None = None
    label: str = "general kernel"


@dataclass(frozen=True)
class Fallback:
    """Python source defining ``function(args, sizes) -> {output: mx.array}`` (the spec's
    ``reference_mlx``, copied with what it needs from its file ``origin``)."""

    source: str
    function: str
    origin: str = ""


@dataclass(frozen=True)
class ModuleOptions:
    """``warmup_on_import`` compiles every variant when the module is imported (on a GPU);
    ``name`` overrides the public function's name (default: the kernel's)."""

    warmup_on_import: bool = False
    name: str | None = None
    notes: tuple[str, ...] = field(default=())


def python_name(arg: str) -> str:
    """``arg`` as a Python identifier (C names that are Python keywords get a ``_``)."""
    return f"{arg}_" if keyword.iskeyword(arg) else arg


def default_fixed(spec) -> tuple[str, ...]:
    """Sizes a kernel lowered from ``spec`` bakes into its body whatever the rules did:
    those its template values, block and dynamic shared memory are computed from (the
    spec's structural sizes, :func:`kir.spec.shrink.structural_sizes`)."""
    from kir.spec.shrink import structural_sizes

    names = structural_sizes(spec)
    return tuple(n for n in spec.sizes if n in names)


def call_args(spec, emitted: Emitted) -> list[str]:
    """The arguments a caller passes, in spec order: input buffers and outputs whose
    initial contents are data (``init = "input"``)."""
    data = {a for a, k in zip(emitted.input_args, emitted.input_kinds)
            if k in ("buffer", "key")}
    data |= {a.arg for a in emitted.accumulate if a.init == "input"}
    return [a for a in spec.args if a in data]


def _lit(value) -> str:
    """``repr`` for the module's data, with infinities and NaN spelled through ``math``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "math.nan" if math.isnan(value) else ("math.inf" if value > 0 else "-math.inf")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_lit(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_lit(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _py(text: str) -> str:
    return size_expr_to_python(text, "S")


def _lambda_tuple(exprs: Sequence[str]) -> str:
    items = ", ".join(f"_count({_py(e)})" for e in exprs)
    return f"lambda S: ({items}{',' if len(exprs) == 1 else ''})"


def _variant_entry(spec, v: Variant) -> str:
    e = v.emitted
    dtypes = {a: d for a, d, k in zip(e.input_args, e.input_dtypes, e.input_kinds)
              if k == "buffer"}
    dtypes.update(zip(e.output_args, e.output_dtypes))
    grid = _lambda_tuple(e.grid_exprs) if e.grid_exprs else f"lambda S: {tuple(e.blocks)!r}"
    small = {}
    if "constant " in e.source or "constant " in e.header:
        # Metal puts inputs of fewer than 8 elements in the constant address space; a body
        # that names the space is right only for inputs on the same side of that line.
        small = {a: math.prod(s) < 8 for a, s, k in zip(e.input_args, e.input_shapes,
                                                       e.input_kinds) if k == "buffer"}
    encodings = []
    for enc in e.inout_decode:
        bits = _BITS[SCALARS[enc.dtype].nbytes]
        encodings.append((enc.arg, bits, MX_DTYPES[enc.dtype], enc.key))
    init_bits = {}
    for enc in e.inout_decode:
        if enc.key_input is not None:
            init_bits[enc.arg] = int(value_bits(e.init_value or 0.0, SCALARS[enc.dtype]))
    template = [(n, MX_DTYPES.get(val, val) if isinstance(val, str) else val)
                for n, val in e.template]
    fields = {
        "label": v.label, "name": e.name, "source": e.source, "header": e.header,
        "input_names": list(e.input_names), "input_args": list(e.input_args),
        "input_kinds": list(e.input_kinds),
        "scalar_dtypes": {a: MX_DTYPES[d] for a, d, k in zip(e.input_args, e.input_dtypes,
                                                            e.input_kinds) if k == "scalar"},
        "output_names": list(e.output_names), "output_args": list(e.output_args),
        "output_dtypes": [MX_DTYPES[d] for d in e.output_dtypes],
        "dtypes": {a: MX_DTYPES[d] for a, d in dtypes.items()},
        "threadgroup": tuple(e.threadgroup), "template": template,
        "init_value": e.init_value, "atomic_outputs": e.atomic_outputs,
        "shared_memory": e.shared_memory, "encodings": encodings, "init_bits": init_bits,
        "accumulate": [(a.arg, a.init) for a in e.accumulate],
        "sizes": dict(v.sizes), "fixed": list(v.fixed), "exact": v.exact,
        "device": v.device, "time_ms": v.time_ms, "small": small,
    }
    body = "".join(f"        {k!r}: {_lit(val)},\n" for k, val in fields.items())
    return f"    {{\n{body}        'grid': {grid},\n    }},\n"


def module_source(spec, variants: Sequence[Variant], *, fallback: Fallback | None = None,
                  options: ModuleOptions = ModuleOptions()) -> str:
    """The text of the generated module for ``spec`` (a Spec or BoundSpec) and its
    ``variants`` (at least one; see the module docstring)."""
    spec = getattr(spec, "spec", spec)
    if not variants:
        raise KirError("a module needs at least one kernel variant")
    first = variants[0].emitted
    kernel_name = first.kernel_name or first.name
    fn = python_name(options.name or kernel_name)
    if not fn.isidentifier():
        raise KirError(f"kernel name {fn!r} is not a Python identifier")
    args = call_args(spec, first)
    for v in variants[1:]:
        if call_args(spec, v.emitted) != args or v.emitted.target != first.target:
            raise KirError(f"variant {v.label!r} takes other arguments than {variants[0].label!r}")
    solve = []
    for arg in args:
        for axis, dim in enumerate(spec.args[arg].shape):
            if str(dim) in spec.sizes:
                solve.append((arg, axis, str(dim)))
    shapes = {name: _lambda_tuple(a.shape) for name, a in spec.args.items() if a.is_buffer}
    shapes.update((name, _lambda_tuple((count,))) for v in variants
                  for name, count in v.emitted.scratch)
    scalars = {name: f"lambda S: {_py(a.value)}" for name, a in spec.args.items()
               if a.is_scalar}
    require = [(text, f"lambda S: {require_to_python(text, 'S')}") for text in spec.require]
    outputs = [(name, a.role, a.init) for name, a in spec.args.items()
               if a.role in ("out", "inout")]
    generic = sorted({a for a in spec.args for v in variants
                      if _dtype_of(v, a) != _dtype_of(variants[0], a)})
    table = "\n".join(f"#   {i}. {v.label}" + (f", {v.time_ms:.4g} ms" if v.time_ms else "")
                      for i, v in enumerate(variants))
    dtypes = sorted({_dtype_of(v, a) for v in variants for a in generic} - {None})
    params = ", ".join(python_name(a) for a in args)
    returns = ", ".join(a for a in first.output_args
                        if a in spec.args and spec.args[a].role != "scratch")
    lines = [
        f'"""{fn}: MLX kernel generated by kir ({first.target}) from '
        f'{Path(str(spec.path)).name}.',
        "",
        f"    {fn}({params}) -> {returns}",
        "",
        "Pass mx.arrays; sizes are read from their shapes "
        f"({', '.join(f'{a}.shape = {tuple(spec.args[a].shape)}' for a in args)}).",
        *([f"Generic over the dtype of {', '.join(generic)}: {', '.join(dtypes)}."]
          if generic else []),
        "Without a GPU kernel for a call (no device, or sizes/dtypes no kernel below takes) "
        + (f"it runs the MLX reference {fallback.origin or fallback.function}."
           if fallback else "it raises RuntimeError (the spec names no reference_mlx)."),
        f"Attach a gradient with @{fn}.vjp (an mx.custom_function); warmup() compiles the "
        "kernels.",
        *options.notes,
        'Regenerate with kir instead of editing this file."""',
        "",
        "import math",
        "",
        "import mlx.core as mx",
        "",
        f"FUNCTION = {fn!r}",
        f"TARGET = {first.target!r}",
        f"SIZES = {dict(spec.sizes)!r}",
        f"ARGS = {args!r}",
        f"SOLVE = {solve!r}",
        f"GENERIC = {generic!r}",
        f"OUTPUTS = {_lit(outputs)}",
        f"SPEC_DTYPES = {({n: MX_DTYPES[a.dtype] for n, a in spec.args.items() if a.dtype})!r}",
        f"WARMUP_ON_IMPORT = {options.warmup_on_import!r}",
        "SHAPES = {" + ", ".join(f"{k!r}: {v}" for k, v in shapes.items()) + "}",
        "SCALARS = {" + ", ".join(f"{k!r}: {v}" for k, v in scalars.items()) + "}",
        "REQUIRE = [" + ", ".join(f"({t!r}, {f})" for t, f in require) + "]",
        "# The kernels, most specific first; a call takes the best one that fits:",
        table,
        "VARIANTS = [",
        "".join(_variant_entry(spec, v) for v in variants) + "]",
        "",
        PRELUDE,
        "",
        "# Outputs MLX's CUDA allocator would take from its small managed pool are padded",
        "# (kir.backends.allocation says why).",
        allocation_source(),
        "",
        _RUNTIME.replace("__FUNCTION__", fn),
    ]
    if fallback is not None:
        lines += ["", f"_REFERENCE_SOURCE = {fallback.source!r}",
                  f"_REFERENCE_FUNCTION = {fallback.function!r}"]
    else:
        lines += ["", "_REFERENCE_SOURCE = None", "_REFERENCE_FUNCTION = None"]
    call = f"[{params}{',' if len(args) == 1 else ''}]"
    lines += ["", "", "# mx.custom_function, so a gradient can be attached: @" + fn + ".vjp",
              f"_custom = mx.custom_function(lambda {params}: _call({call}))", "", "",
              f"def {fn}({params}):",
              f'    """{fn}({params}) -> {returns}; see the module docstring."""',
              f"    return _custom({params})", "", "",
              f"{fn}.vjp, {fn}.jvp, {fn}.vmap = _custom.vjp, _custom.jvp, _custom.vmap",
              "", "if WARMUP_ON_IMPORT and available():", "    warmup()"]
    return "\n".join(lines) + "\n"


def _dtype_of(v: Variant, arg: str) -> str | None:
    e = v.emitted
    for a, d, k in zip(e.input_args, e.input_dtypes, e.input_kinds):
        if a == arg and k == "buffer":
            return MX_DTYPES[d]
    for a, d in zip(e.output_args, e.output_dtypes):
        if a == arg:
            return MX_DTYPES[d]
    return None


def write_module(emitted: Emitted, path: str | Path, spec, *,
                 fallback: Fallback | None = None,
                 options: ModuleOptions = ModuleOptions()) -> Path:
    """Write a module holding the one kernel ``emitted`` (the general kernel at the spec's
    sizes; ``spec`` is the Spec or BoundSpec it was emitted for). The Python API and
    ``kir compile`` write richer ones (dtype variants, specialized and tuned kernels) with
    :func:`write_variants`."""
    sizes = dict(spec.sizes)
    return write_variants([Variant(emitted, sizes, default_fixed(getattr(spec, "spec", spec)))],
                          path, spec, fallback=fallback, options=options)


def write_variants(variants: Sequence[Variant], path: str | Path, spec, *,
                   fallback: Fallback | None = None,
                   options: ModuleOptions = ModuleOptions()) -> Path:
    """Write :func:`module_source` to ``path``."""
    path = Path(path)
    path.write_text(module_source(spec, variants, fallback=fallback, options=options))
    return path


# The module's runtime: everything below is copied into every generated module (it may use
# only math and mlx.core). __FUNCTION__ is the public function's name.
_RUNTIME = '''
_KERNELS = {}
_SCALARS_MADE = {}
_DEVICE = []
_REFERENCE = []


def available():
    """Whether this machine can run the module's GPU kernels (else calls fall back)."""
    backend = getattr(mx, TARGET, None)
    try:
        return bool(backend is not None and backend.is_available())
    except Exception:
        return False


def device_name():
    """The GPU's name as kir's tuning database records it (picks tuned variants)."""
    if not _DEVICE:
        name = ""
        for getter in (getattr(mx, "device_info", None),
                       getattr(getattr(mx, TARGET, None), "device_info", None)):
            try:
                info = getter() if getter is not None else {}
            except Exception:
                info = {}
            name = info.get("device_name") or info.get("name") or ""
            if name:
                break
        _DEVICE.append(str(name))
    return _DEVICE[0]


def _count(value):
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"__FUNCTION__: a grid or shape expression gave {value}")
        value = int(value)
    return value


def _solve(arrays):
    """Sizes from the arguments' shapes, every shape checked."""
    sizes = dict(SIZES)
    source = {}
    for arg, value in zip(ARGS, arrays):
        if value.ndim != len(SHAPES[arg](SIZES)):
            raise ValueError(f"__FUNCTION__: argument {arg!r} must have "
                             f"{len(SHAPES[arg](SIZES))} dimensions, got shape "
                             f"{tuple(value.shape)}")
    for arg, axis, name in SOLVE:
        value = int(arrays[ARGS.index(arg)].shape[axis])
        if name in source and sizes[name] != value:
            raise ValueError(f"__FUNCTION__: {arg}.shape[{axis}] = {value} but "
                             f"{source[name]} = {sizes[name]} (both are {name})")
        sizes[name], source[name] = value, f"{arg}.shape[{axis}]"
    for arg, value in zip(ARGS, arrays):
        want = SHAPES[arg](sizes)
        if tuple(value.shape) != want:
            raise ValueError(f"__FUNCTION__: argument {arg!r} must have shape {want} "
                             f"with sizes {sizes}, got {tuple(value.shape)}")
    return sizes


def _fits(variant, sizes, dtypes, arrays=None):
    if any(sizes[name] != variant["sizes"][name] for name in variant["fixed"]):
        return False
    if variant["exact"] and any(sizes[k] != v for k, v in variant["sizes"].items()):
        return False
    if any(dtypes.get(arg, dtype) != dtype for arg, dtype in variant["dtypes"].items()):
        return False
    if arrays is None:
        return True
    return all((arrays[ARGS.index(arg)].size < 8) == small
               for arg, small in variant["small"].items() if arg in ARGS)


def _distance(sizes, tuned):
    return sum(abs(math.log2(max(sizes[k], 1)) - math.log2(max(v, 1)))
               for k, v in tuned.items() if k in sizes)


def choose(sizes, dtypes, arrays=None):
    """The variant a call at ``sizes`` with argument ``dtypes`` runs (None: none fits):
    tuned for this GPU over general over tuned for another, specialized over general, then
    nearest in size (log scale)."""
    device = device_name()
    sizes = dict(SIZES, **sizes)  # sizes the shapes do not give keep their compiled values
    best, best_score = None, None
    for index, variant in enumerate(VARIANTS):
        if not _fits(variant, sizes, dtypes, arrays):
            continue
        rank = 2 if variant["device"] == device else 1 if variant["device"] is None else 0
        score = (rank, variant["exact"], -_distance(sizes, variant["sizes"]), -index)
        if best_score is None or score > best_score:
            best, best_score = variant, score
    return best


def _kernel(variant):
    key = variant["name"]
    if key not in _KERNELS:
        maker = getattr(mx.fast, f"{TARGET}_kernel")
        extra = ({"atomic_outputs": variant["atomic_outputs"]} if TARGET == "metal"
                 else {"shared_memory": variant["shared_memory"]})
        _KERNELS[key] = maker(name=variant["name"], input_names=variant["input_names"],
                              output_names=variant["output_names"],
                              source=variant["source"], header=variant["header"], **extra)
    return _KERNELS[key]


def _scalar(value, dtype):
    """A scalar argument as an array, padded on CUDA like a small output (see
    allocated_elements); kept per value, so repeated calls allocate nothing."""
    key = (value, str(dtype))
    array = _SCALARS_MADE.get(key)
    if array is None:
        if len(_SCALARS_MADE) >= 256:
            _SCALARS_MADE.clear()
        elements = allocated_elements(TARGET, 1, dtype.size)
        array = mx.array(value if elements == 1 else [value] * elements, dtype=dtype)
        _SCALARS_MADE[key] = array
    return array


def _bits(value, bits):
    return value.view(getattr(mx, bits))


def _launch(variant, arrays, sizes):
    by_arg = dict(zip(ARGS, arrays))
    inputs = []
    for arg, kind in zip(variant["input_args"], variant["input_kinds"]):
        if kind == "buffer":
            inputs.append(by_arg[arg])
        elif kind == "scalar":
            dtype = getattr(mx, variant["scalar_dtypes"][arg])
            inputs.append(_scalar(SCALARS[arg](sizes), dtype))
        else:  # the key of an output holding data: bits(data) ^ bits(init_value)
            _, bits, _, _ = next(e for e in variant["encodings"] if e[0] == arg)
            inputs.append(_bits(by_arg[arg], bits)
                          ^ mx.array(variant["init_bits"][arg], dtype=getattr(mx, bits)))
    threadgroup = variant["threadgroup"]
    blocks = variant["grid"](sizes)
    kwargs = {}
    if variant["template"]:
        kwargs["template"] = [(n, getattr(mx, v) if isinstance(v, str) else v)
                              for n, v in variant["template"]]
    shapes = [SHAPES[arg](sizes) for arg in variant["output_args"]]
    dtypes = [getattr(mx, d) for d in variant["output_dtypes"]]
    outputs = _kernel(variant)(
        inputs=inputs, grid=tuple(b * t for b, t in zip(blocks, threadgroup)),
        threadgroup=threadgroup,
        output_shapes=[allocated_shape(TARGET, s, d.size) for s, d in zip(shapes, dtypes)],
        output_dtypes=dtypes, init_value=variant["init_value"], **kwargs)
    outputs = [unpad_output(out, shape) for out, shape in zip(outputs, shapes)]
    for arg, bits, dtype, key in variant["encodings"]:
        i = variant["output_args"].index(arg)
        mask = (inputs[variant["input_args"].index(arg)] if key is None
                else mx.array(key, dtype=getattr(mx, bits)))
        outputs[i] = (_bits(outputs[i], bits) ^ mask).view(getattr(mx, dtype))
    for arg, init in variant["accumulate"]:
        i = variant["output_args"].index(arg)
        initial = by_arg[arg] if init == "input" else init
        outputs[i] = (outputs[i] + initial).astype(outputs[i].dtype)
    return outputs


def _reference():
    if _REFERENCE_SOURCE is None:
        return None
    if not _REFERENCE:
        # kir copied the spec's reference_mlx (and what it uses from its file) here.
        namespace = {"__name__": f"{FUNCTION}_reference"}
        exec(compile(_REFERENCE_SOURCE, f"<{FUNCTION} reference_mlx>", "exec"), namespace)
        _REFERENCE.append(namespace[_REFERENCE_FUNCTION])
    return _REFERENCE[0]


def _fallback(arrays, sizes, why):
    """The MLX reference with every argument as the kernel would get it."""
    reference = _reference()
    if reference is None:
        raise RuntimeError(f"__FUNCTION__: {why}, and the spec names no reference_mlx to "
                           "fall back on")
    by_arg = dict(zip(ARGS, arrays))
    generic = next((by_arg[a].dtype for a in GENERIC if a in by_arg), None)
    args = {}
    for name, make in SCALARS.items():
        args[name] = make(sizes)
    for name, _, init in OUTPUTS:
        if name not in by_arg:
            dtype = generic if name in GENERIC and generic is not None \\
                else getattr(mx, SPEC_DTYPES[name])
            fill = 0 if init in (None, "none", "input") else init
            args[name] = mx.full(SHAPES[name](sizes), fill, dtype=dtype)
    args.update(by_arg)
    result = reference(args, dict(sizes))
    outputs = []
    for name, _, _ in OUTPUTS:
        dtype = generic if name in GENERIC and generic is not None \\
            else getattr(mx, SPEC_DTYPES[name])
        outputs.append(mx.array(result[name]).astype(dtype))
    return outputs


def _call(arrays):
    arrays = [value if isinstance(value, mx.array) else mx.array(value) for value in arrays]
    sizes = _solve(arrays)
    dtypes = {arg: str(value.dtype).split(".")[-1] for arg, value in zip(ARGS, arrays)}
    broken = [text for text, holds in REQUIRE if not holds(sizes)]
    variant = None
    if broken:
        why = f"sizes {sizes} break the kernel's requirement {broken[0]!r}"
    elif not available():
        why = f"no {TARGET} device here"
    else:
        variant = choose(sizes, dtypes, arrays)
        why = f"no kernel takes sizes {sizes} with dtypes {dtypes}"
    if variant is None:
        outputs = _fallback(arrays, sizes, why)
    else:
        launched = _launch(variant, arrays, sizes)
        returned = {name for name, _, _ in OUTPUTS}  # not the kernel's scratch buffers
        outputs = [out for out, arg in zip(launched, variant["output_args"]) if arg in returned]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def warmup():
    """Compile and run every variant once at the sizes it was made for (zeros as inputs),
    so the first real call does not pay the GPU compile. Does nothing without a device."""
    if not available():
        return 0
    for variant in VARIANTS:
        sizes = dict(SIZES, **variant["sizes"])
        arrays = [mx.zeros(SHAPES[arg](sizes), dtype=getattr(mx, variant["dtypes"][arg]))
                  for arg in ARGS]
        mx.eval(_launch(variant, arrays, sizes))
    return len(VARIANTS)
'''


def full_metal_source(emitted: Emitted) -> str:
    """The whole Metal source MLX would compile: header, then the ``[[kernel]]`` function
    with the signature MLX generates from the inputs, outputs and attributes used — named
    ``custom_kernel_<kernel>``, without the per-text hash ``Emitted.name`` carries for MLX's
    kernel cache."""
    if emitted.target != "metal":
        raise KirError(f"full Metal source asked for a {emitted.target} kernel")
    inputs = list(zip(emitted.input_names, emitted.input_dtypes, emitted.input_shapes))
    outputs = list(zip(emitted.output_names, emitted.output_dtypes))
    prelude = "#include <metal_stdlib>\nusing namespace metal;\n\n"
    header = emitted.header + "\n\n" if emitted.header else ""
    return prelude + header + metal_signature(emitted.kernel_name or emitted.name, inputs,
                                              outputs, emitted.source,
                                              emitted.atomic_outputs, list(emitted.template))


def write_metal_source(emitted: Emitted, path: str | Path) -> Path:
    """Write :func:`full_metal_source` to ``path`` (for embedding outside MLX)."""
    path = Path(path)
    path.write_text(full_metal_source(emitted))
    return path
