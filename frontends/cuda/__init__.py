"""The CUDA frontend: preprocess, parse and lower a CUDA kernel to kir IR.

``load_cuda`` is the entry point; ``list_kernels`` names the ``__global__`` functions of a
file. Host code in the file is skipped unread (see :mod:`kir.frontends.cuda.scan`), and of
the device side only what the chosen kernel reaches is parsed (see
:mod:`kir.frontends.cuda.program`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kir.frontends.cuda.instantiations import instantiation_values, type_argument
from kir.frontends.cuda.lower import Lowerer
from kir.frontends.cuda.lower_types import DisabledOverload, function_param_name
from kir.frontends.cuda.parser import BUILTIN_TYPE_NAMES, SourceMap, parse_unit
from kir.frontends.cuda.shared_pairs import SharedPair
from kir.frontends.cuda.program import (
    MAX_FUNCTION_CHARS,
    Program,
    parse_kernel_unit,
    read_program,
    template_types,
    unit_type_name,
)
from kir.frontends.cuda.scan import FUNCTION_TYPEDEF, Unit, kernel_names, scan_units
from kir.frontends.cuda.values import FUNCTION_POINTER
from kir.frontends.cuda.signature import kernel_signature, signatures
from kir.frontends.cuda.values import ConstSym

from kir.errors import KirError
from kir.ir import Kernel, Launch

__all__ = ["ArgFacts", "KernelParam", "MAX_FUNCTION_CHARS", "TemplateParam", "load_cuda",
           "list_kernels", "kernel_params", "kernel_template", "lower_source", "template_params"]

DEFAULT_LAUNCH = Launch(("1", "1", "1"), (1, 1, 1), 0)
# Statement lowering recurses once per nesting level (a few frames each) and stops with a
# KirError past lower_stmt.MAX_NESTING levels; this bound covers that depth with room to
# spare. Expression chains are lowered iteratively and need none of it.
_RECURSION_LIMIT = 12000


@dataclass(frozen=True)
class ArgFacts:
    """What a spec says about a kernel's arguments, in the terms the frontend needs:
    ``dtypes`` maps each argument the spec gives to its dtype name (a buffer's element type;
    it instantiates ``typename T`` parameters), ``null`` names the pointer arguments passed
    as null. A parameter with a default value that the spec does not give takes its
    default."""

    dtypes: dict[str, str | None] = field(default_factory=dict)
    null: frozenset[str] = frozenset()


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a ``__global__`` function as written: its name, whether it is a
    pointer, its default value's text (None without one) and its type's name when that is
    one word (``T`` for ``const T* x``: what deduces a template type from the spec)."""

    name: str
    pointer: bool
    default: str | None = None
    type_word: str | None = None
    # the default's value (a constant kir can evaluate) and a scalar's dtype, when known
    default_value: int | float | bool | None = None
    dtype: str | None = None
    # a struct passed by value: the scalar parameters kir makes of its fields, in order
    # (``p_theta``, ``p_inner_x``: what the spec names), with their dtypes
    fields: tuple[tuple[str, str], ...] = ()
    # the same struct as nested ``(field, dtype or nested fields)`` pairs: its C layout
    layout: tuple = ()

    @property
    def argument_names(self) -> tuple[str, ...]:
        """The spec arguments this parameter takes: its fields' for a struct, else its own."""
        return tuple(name for name, _ in self.fields) or (self.name,)


@dataclass(frozen=True)
class TemplateParam:
    """One parameter of a kernel's ``template<...>``: its name, whether it is a type
    (``typename T``), and whether it has a default."""

    name: str
    is_type: bool
    has_default: bool
    # a value parameter's declared type as written (``int``, ``detail::Mode``), else ""
    type_text: str = ""


def _preprocess(text: str, filename: str, defines: dict[str, str] | None,
                include_dirs: Sequence[str | Path] = ()) -> SourceMap:
    from kir.frontends.cuda.preprocess import preprocess

    return preprocess(text, filename, defines, include_dirs=include_dirs)


def list_kernels(text: str, filename: str, include_dirs: Sequence[str | Path] = ()) -> list[str]:
    """Names of the ``__global__`` functions defined in ``text``, in source order."""
    return kernel_names(_preprocess(text, filename, None, include_dirs).text)


def _kernel_unit(src: SourceMap, kernel: str | None) -> Unit | None:
    units = [u for u in scan_units(src.text) if u.kind == "global"]
    return next((u for u in units if kernel in (None, u.name)), None)


def template_params(text: str, filename: str, kernel: str | None = None,
                    include_dirs: Sequence[str | Path] = ()) -> list[str]:
    """The names of a ``__global__`` function's value template parameters (``template<int
    A, int B>``), in declaration order (empty for a plain kernel); :func:`kernel_template`
    gives all of them, ``typename`` ones included."""
    return [p.name for p in kernel_template(text, filename, kernel, include_dirs)
            if not p.is_type]


def instantiated_template_values(text: str, filename: str, kernel: str | None = None,
                                 include_dirs: Sequence[str | Path] = ()
                                 ) -> dict[str, int | str]:
    """The template values ``kernel``'s file gives it (an explicit instantiation or a launch:
    :mod:`kir.frontends.cuda.instantiations`), which lowering uses where a spec gives none."""
    src = _preprocess(text, filename, None, include_dirs)
    try:
        return instantiation_values(src.text, kernel_signature(src.text, kernel))
    except KirError:
        return {}


def struct_sizes(text: str, filename: str, include_dirs: Sequence[str | Path] = ()
                 ) -> dict[str, int]:
    """``sizeof`` of each struct the file defines that kir reads (C's layout), by name: what
    host code's ``n * sizeof(block_q8_0)`` allocations need."""
    from kir.frontends.cuda.values import StructType, struct_size

    src = _preprocess(text, filename, None, include_dirs)
    units = scan_units(src.text)
    if not units:
        return {}
    lowerer = _file_lowerer(src, units, units[-1], DEFAULT_LAUNCH)
    sizes = {}
    for name in lowerer.program.type_names - set(BUILTIN_TYPE_NAMES):
        try:
            t = lowerer.named_type(name, None)
        except (KirError, RecursionError):
            continue
        if isinstance(t, StructType):
            sizes[name] = struct_size(t)
    return sizes


def kernel_template(text: str, filename: str, kernel: str | None = None,
                    include_dirs: Sequence[str | Path] = ()) -> list[TemplateParam]:
    """A ``__global__`` function's template parameters, in order (empty for a plain
    kernel)."""
    src = _preprocess(text, filename, None, include_dirs)
    chosen = _kernel_unit(src, kernel)
    if chosen is None:
        return []
    tree = _parse_header(src, chosen)
    template = tree.children[0] if tree is not None else None
    if template is None:
        return []
    out = []
    for p in template.children:
        if p.data == "template_type":
            out.append(TemplateParam(str(p.children[0]), True,
                                     len(p.children) > 1 and p.children[1] is not None))
        elif p.data == "template_function":  # T (*ACT_FN)(const T&): given a function's name
            out.append(TemplateParam(function_param_name(p), False, False, "function"))
        elif p.data == "template_template":
            out.append(TemplateParam(str(p.children[-1]), True, False))
        else:
            words = [str(t) for spec in p.children[0].children if spec.data == "type_word"
                     for t in spec.children if hasattr(t, "type")]
            out.append(TemplateParam(str(p.children[1]), False,
                                     len(p.children) > 2 and p.children[2] is not None,
                                     " ".join(words)))
    return out


def kernel_params(text: str, filename: str, kernel: str | None = None,
                  include_dirs: Sequence[str | Path] = ()) -> list[KernelParam]:
    """The parameters of a ``__global__`` function as written, in order (what binding
    arguments by name to the original kernel needs), with their scalar types and default
    values where kir can tell them."""
    src = _preprocess(text, filename, None, include_dirs)
    chosen = _kernel_unit(src, kernel)
    tree = _parse_header(src, chosen) if chosen is not None else None
    if tree is None:
        return []
    from kir.frontends.cuda.lower import param_parts, split_function
    from kir.frontends.cuda.lower_struct import struct_fields
    from kir.frontends.cuda.values import FieldArray
    from kir.frontends.cuda.values import StructType

    lowerer = _file_lowerer(src, scan_units(src.text), chosen, DEFAULT_LAUNCH)
    lowerer.offset = chosen.start
    params = split_function(tree)[4]
    out = []
    for ptree in (params.children if params is not None else []):
        specs, declarator, default = param_parts(ptree)
        words = [str(t) for spec in specs.children if spec.data == "type_word"
                 for t in spec.children if getattr(t, "type", "") in ("TYPE_NAME", "IDENT")]
        if declarator is None:
            continue
        name = next(str(c) for c in declarator.children if getattr(c, "type", "") == "IDENT")
        pointer = any(getattr(c, "data", "") == "pointer" for c in declarator.children)
        text_default = value = dtype = None
        if default is not None:
            start, end = _first_pos(default), _last_end(default)
            if start is not None and end is not None:
                text_default = src.text[chosen.start + start:chosen.start + end]
            if not pointer:
                value = _quietly(lowerer.constant, default, "a default")
        fields: tuple[tuple[str, str], ...] = ()
        if not pointer:
            ctype = _quietly(lowerer.resolve_specs, specs)
            base = getattr(ctype, "base", None)
            dtype = getattr(base, "name", None)
            if isinstance(base, StructType) and not any(  # (an array member: refused)
                    isinstance(t, FieldArray) for _, t in struct_fields(base, name)):
                fields = tuple((n, str(t)) for n, t in struct_fields(base, name))
        out.append(KernelParam(name, pointer, text_default,
                               words[0] if len(words) == 1 else None, value, dtype, fields,
                               _layout(base) if fields else ()))
    return out


def _layout(t) -> tuple:
    """A struct type as nested ``(field, dtype name or nested pairs)``."""
    from kir.frontends.cuda.values import StructType

    return tuple((name, _layout(ft) if isinstance(ft, StructType) else str(ft))
                 for name, ft in t.fields)


def _quietly(fn, *args):
    """``fn(*args)``, or None where kir cannot tell (a template type, a non-constant)."""
    try:
        return fn(*args)
    except KirError:
        return None


def _first_pos(tree) -> int | None:
    for token in tree.scan_values(lambda v: hasattr(v, "start_pos")):
        return token.start_pos
    return None


def _last_end(tree) -> int | None:
    ends = [t.end_pos for t in tree.scan_values(lambda v: hasattr(v, "end_pos"))]
    return max(ends) if ends else None


def _parse_header(src: SourceMap, unit: Unit):
    """The kernel's parse tree, or None when it does not parse (the caller then has no
    parameters to report; lowering gives the error)."""
    try:
        return parse_kernel_unit(read_program(src, scan_units(src.text)), unit)
    except KirError:
        return None


def load_cuda(text: str, filename: str, *, kernel: str | None = None,
              template_values: dict[str, int | str] | None = None,
              launch: Launch | None = None, defines: dict[str, str] | None = None,
              include_dirs: Sequence[str | Path] = (), args: ArgFacts | None = None) -> Kernel:
    """Parse CUDA source ``text`` and lower one ``__global__`` function to a kir Kernel.

    ``kernel`` picks the function when the file defines several; ``template_values`` gives
    template parameters (integers, or dtype names such as ``"f32"`` for ``typename T``);
    ``launch`` (from the spec) sizes dynamic shared memory and becomes ``Kernel.launch``;
    ``defines`` are extra ``-D`` macros; ``include_dirs`` are searched for ``#include
    "..."`` files after the source's own folder; ``args`` says what the spec gives (dtypes
    deduce template types, null pointers fold their tests, parameters it leaves out take
    their defaults). Errors are KirErrors (UnsupportedError for constructs outside the
    subset) pointing into ``filename`` or the header they are in.
    """
    kern = lower_source(_preprocess(text, filename, defines, include_dirs), kernel=kernel,
                        template_values=template_values, launch=launch, args=args)
    return Kernel(kern.name, kern.params, kern.body, kern.launch, source=text)


def lower_source(src: SourceMap, *, kernel: str | None = None,
                 template_values: dict[str, int | str] | None = None,
                 launch: Launch | None = None, args: ArgFacts | None = None) -> Kernel:
    """Lower an already preprocessed file (anything with ``text``, ``loc(offset)`` and
    ``source_line(loc)``)."""
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        return _lower(src, kernel, template_values or {}, launch or DEFAULT_LAUNCH, args)
    finally:
        sys.setrecursionlimit(old_limit)


def _choose(src: SourceMap, units: list[Unit], kernel: str | None) -> Unit:
    kernels = [u for u in units if u.kind == "global"]
    if not kernels:
        raise KirError("no __global__ function found", src.loc(0),
                       hint="kir lowers CUDA kernels; is this the right file?")
    if kernel is None:
        if len({u.name for u in kernels}) > 1:
            names = ", ".join(dict.fromkeys(u.name for u in kernels))
            raise KirError(f"several __global__ functions ({names}); pick one", src.loc(0),
                           hint="name it: --kernel NAME on the command line, kernel = "
                                "\"NAME\" in the spec, or kernel=NAME from Python")
        return kernels[0]
    matches = [u for u in kernels if u.name == kernel]
    if not matches:
        names = ", ".join(u.name for u in kernels)
        raise KirError(f"no __global__ function named '{kernel}' (found: {names})",
                       src.loc(0))
    return matches[0]


def _lower(src: SourceMap, kernel: str | None, template_values: dict[str, int | str],
           launch: Launch, args: ArgFacts | None) -> Kernel:
    units = scan_units(src.text)
    chosen = _choose(src, units, kernel)
    if src.text.startswith("template", chosen.start):  # what the file instantiates, unless given
        signature = kernel_signature(src.text, chosen.name)
        template_values = {**instantiation_values(src.text, signature), **template_values}
        special = _specialization_for(src.text, signature, template_values, args)
        if special is not None:  # template <> __global__ void k(half* ...): its own body
            chosen = next(u for u in units if u.kind == "global" and u.start == special)
    # overloads of one name that enable_if_t tells apart (SFINAE): the first one enabled
    candidates = [chosen] + [u for u in units if u.kind == "global" and u.name == chosen.name
                             and u.start != chosen.start]
    for k, unit in enumerate(candidates):
        pairs: list = []  # shared arrays a pointer moves between: lowered again, merged
        while True:
            lowerer = _file_lowerer(src, units, unit, launch, args)
            lowerer.shared_pairs = list(pairs)
            tree = parse_kernel_unit(lowerer.program, unit)
            try:
                return lowerer.lower_kernel(tree, unit.start, template_values)
            except DisabledOverload:
                if k + 1 == len(candidates):
                    raise
                break
            except SharedPair as moved:
                if moved.pair in pairs:
                    raise
                pairs.append(moved.pair)
    raise AssertionError("no candidate")  # (the loop returns or raises)


def _specialization_for(text: str, primary, values: dict, args: ArgFacts | None) -> int | None:
    """Where the explicit specialization of ``primary`` for these template values starts,
    if the file has one: its parameters declared with the template's type parameters name
    the types the values give (or the spec's dtypes deduce)."""
    dtypes = args.dtypes if args is not None else {}
    for special in signatures(text):
        if special.name != primary.name or not special.specialization \
                or len(special.params) != len(primary.params):
            continue
        fits = True
        for mine, theirs in zip(primary.params, special.params):
            for kind, param in primary.template:
                if kind == "typename" and mine.type_words == (param,):
                    wanted = values.get(param) or dtypes.get(mine.name)
                    fits &= wanted is not None \
                        and type_argument(" ".join(theirs.type_words)) == wanted
        if fits:
            return special.offset
    return None


def _file_lowerer(src: SourceMap, units: list[Unit], chosen: Unit, launch: Launch,
                  args: ArgFacts | None = None) -> Lowerer:
    """A Lowerer for ``chosen`` with the file's typedefs, enums and constants read."""
    program = read_program(src, units)
    typedefs: dict[str, object] = {}
    globals_: dict[str, object] = {}
    for u in units:
        if u.kind in ("typedef", "enum") or u.kind == "const" and u.start < chosen.start:
            _top_level(program, u, typedefs, globals_, launch)
    return Lowerer(src, program.functions, globals_, typedefs, launch, program=program,
                   args=args)


def _top_level(program: Program, unit: Unit, typedefs: dict, globals_: dict,
               launch: Launch) -> None:
    """Record a top-level typedef, alias, enum or scalar constant; anything else there is
    host code. A typedef or alias kir cannot read is remembered with its error, which is
    reported where a kernel uses the name."""
    src = program.src
    own = unit_type_name(src, unit)
    if own and FUNCTION_TYPEDEF.match(src.text, unit.start, unit.end):
        typedefs[own] = FUNCTION_POINTER  # a template parameter of it: a function
        return
    try:
        names = set(program.type_names) - ({own} if own and unit.kind == "typedef" else set())
        tree = parse_unit(src, unit.start, unit.end, "top_decl", names, program.template_names)
        lowerer = Lowerer(src, {}, globals_, typedefs, launch, program=program)
        lowerer.offset = unit.start
        inner = tree.children[0] if tree.data == "top_decl" else tree
        if inner.data in ("typedef_decl", "alias_decl"):
            lowerer.declare_alias(inner, typedefs)
            return
        if inner.data == "enum_def":
            lowerer.declare_enum(inner, globals_, typedefs)
            return
        lowerer.push_scope()
        lowerer.lower_stmt(tree.children[0])
        for ident, sym in lowerer.scopes[-1].items():
            if isinstance(sym, ConstSym):
                globals_[ident] = sym
    except KirError as exc:
        if own and unit.kind in ("typedef", "enum"):
            program.broken[own] = exc
        return  # not a constant kir understands: host-side, ignored unless used


__all__ += ["template_types"]
