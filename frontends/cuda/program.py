"""The device side of one CUDA file as the lowering of a kernel sees it.

A file is read in two steps. :func:`read_program` looks at every top-level unit the scanner
found but parses none of its functions: it only collects the names the parser must know
(typedefs, ``using`` aliases, structs, enums, template functions) and wraps each
``__device__`` function so it is parsed the first time a kernel calls it. Struct definitions
are parsed the first time a type names them. So a helper kir cannot read — a function
returning an unsupported type, a bf16 helper, a struct with methods — refuses only the
kernels that use it, with its own location, never its neighbours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kir.frontends.cuda.parser import (
    BUILTIN_TYPE_NAMES,
    SourceMap,
    parse_unit,
    template_header_length,
)
from kir.frontends.cuda.scan import FUNCTION_TYPEDEF, SPECIALIZATION_HEADER, Unit
from kir.frontends.cuda.struct_text import PatchedSource, operator_word
from kir.frontends.cuda.values import FunctionSym, StructType

from kir.errors import KirError, UnsupportedError

# Parsing and lowering cost about 20 us per character of a function: past this a kernel takes
# more than a few seconds, so it is refused up front (host code around it is skipped unread and
# only counts against the preprocessor's whole-file limit).
MAX_FUNCTION_CHARS = 256 * 1024
_TEMPLATE_TYPES = re.compile(r"\b(?:typename|class)\s+([A-Za-z_]\w*)")
_TYPEDEF_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*;\s*$")

_ENUM_TYPE = re.compile(r"enum\b(?:\s+(?:class|struct)\b)?\s*([A-Za-z_]\w*)")
# Cooperative groups' types, usable unqualified after `using namespace cooperative_groups;`.
_CG_TYPES = ("thread_block", "thread_block_tile", "grid_group", "thread_group",
             "coalesced_group", "plus", "greater", "less")
_LOCAL_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=")
_LOCAL_TYPEDEF = re.compile(r"\btypedef\b[^;{}]*?\b([A-Za-z_]\w*)\s*;")
# <type_traits> templates a constant condition may ask (``std::is_same_v<T, float>``,
# ``std::is_same<T, half>::value``): template names for the parser, answered at compile time
TYPE_TRAITS = frozenset(name + suffix for name in (
    "is_same", "is_floating_point", "is_integral", "is_signed", "is_unsigned")
    for suffix in ("", "_v"))
_USING_CG = re.compile(r"\busing\s+namespace\s+(?:cooperative_groups|cg)\s*;")


@dataclass
class Program:
    """The file's device-side declarations: functions by name (overloads in order), struct
    units by name, the type and template-function names the parser needs, and what was
    found broken at the top level (reported where it is used)."""

    src: SourceMap
    functions: dict[str, list[FunctionSym]]
    struct_units: dict[str, Unit]
    type_names: frozenset[str]
    template_names: frozenset[str]
    struct_types: dict[str, StructType] = field(default_factory=dict)
    broken: dict[str, KirError] = field(default_factory=dict)
    constants: dict[str, Unit] = field(default_factory=dict)  # __constant__ memory by name
    # struct name -> (unit, text, template parameters) when it holds no data, else None:
    # read once (lower_view_struct.data_free_struct), asked at every use of the type
    data_free: dict[str, tuple | None] = field(default_factory=dict)
    # struct name -> its member functions (struct_text.MemberFunction), read once
    methods: dict[str, list] = field(default_factory=dict)
    # struct template name -> its explicit specializations' units (``template <> struct``)
    specializations: dict[str, list] = field(default_factory=dict)
    # `using namespace cooperative_groups;` somewhere in the file: its functions may be
    # called unqualified (`this_thread_block()`, `reduce(tile, v, plus<float>())`)
    using_cg: bool = False


def template_types(src: SourceMap, unit: Unit) -> set[str]:
    """Names of the ``typename``/``class`` parameters of a unit's ``template<...>`` header,
    and of the aliases its body declares (``using T = ...;``, ``typedef ... T;``): the
    parser must see them as type names."""
    text = src.text[unit.start:unit.end]
    local = set(_LOCAL_USING.findall(text)) | set(_LOCAL_TYPEDEF.findall(text))
    return local | set(template_parameters(src, unit))


def template_parameters(src: SourceMap, unit: Unit) -> tuple[str, ...]:
    """The ``typename``/``class`` parameters of a unit's ``template<...>`` header, in order
    (what template arguments bind to); none for a unit that is not a template."""
    text = src.text[unit.start:unit.end]
    if not text.startswith("template"):
        return ()
    return tuple(_TEMPLATE_TYPES.findall(text[:template_header_length(text)]))


def unit_type_name(src: SourceMap, unit: Unit) -> str | None:
    """The type name a typedef, alias, struct or enum unit declares, if any."""
    if unit.name:
        return unit.name
    text = src.text[unit.start:unit.end]
    if unit.kind == "typedef":
        found = FUNCTION_TYPEDEF.match(text) or _TYPEDEF_NAME.search(text)
        return found.group(1) if found else None
    if unit.kind == "enum":
        found = _ENUM_TYPE.match(text)
        return found.group(1) if found else None
    return None


def read_program(src: SourceMap, units: list[Unit]) -> Program:
    """Collect the names and (unparsed) functions of a scanned file."""
    names = set(BUILTIN_TYPE_NAMES)
    using_cg = bool(_USING_CG.search(src.text))
    if using_cg:
        names.update(_CG_TYPES)
    struct_units: dict[str, Unit] = {}
    specializations: dict[str, list[Unit]] = {}
    for unit in units:
        if unit.kind == "specialization":  # (its primary may be declared only)
            specializations.setdefault(unit.name, []).append(unit)
            names.add(unit.name)
        if unit.kind in ("typedef", "struct", "enum", "union"):
            name = unit_type_name(src, unit)
            if name:
                names.add(name)
                if unit.kind == "struct":
                    struct_units.setdefault(name, unit)
    templates = frozenset({u.name for u in units if u.kind == "device"
                           and src.text.startswith("template", u.start)}
                          | {"cg::tiled_partition"} | TYPE_TRAITS
                          | ({"tiled_partition"} if using_cg else set()))
    type_names = frozenset(names)
    functions: dict[str, list[FunctionSym]] = {}
    for unit in units:
        if unit.kind == "device":
            operator = unit.name.startswith("operator")  # a free operator: a C name inlined
            functions.setdefault(unit.name, []).append(
                FunctionSym("operator_" + operator_word(unit.name[8:]) if operator else unit.name,
                            unit.start, _parser_for(src, unit, type_names, templates),
                            _is_template(src.text, unit.start),
                            src.text[unit.start:unit.end]))
    constants = {u.name: u for u in units if u.kind == "constant"}
    program = Program(src, functions, struct_units, type_names, templates, constants=constants,
                      specializations=specializations, using_cg=using_cg)
    for unit in units:  # a union is refused where a kernel names it, located at its definition
        if unit.kind == "union" and unit.name:
            loc = src.loc(unit.start)
            program.broken[unit.name] = UnsupportedError(
                f"'{unit.name}' is a union: unions not supported", loc,
                source_line=src.source_line(loc),
                hint="read the buffer as the type you need with reinterpret_cast, or copy the "
                     "bytes with memcpy into a local of that type")
    return program


def _is_template(text: str, start: int) -> bool:
    """Whether the function at ``start`` is a template: a ``template <...>`` header with
    parameters (``template <>`` is an explicit specialization, a function of fixed types
    that overload resolution matches as such)."""
    return text.startswith("template", start) \
        and not SPECIALIZATION_HEADER.match(text, start)


def _parser_for(src: SourceMap, unit: Unit, type_names: frozenset[str],
                templates: frozenset[str]):
    def parse():
        check_size(src, unit)
        text = src
        if unit.name.startswith("operator"):  # its name read as a plain identifier
            found = re.search(r"\boperator\s*[^\w\s(]+", src.text[unit.start:unit.end])
            text = PatchedSource(src, [(unit.start + found.start(), unit.start + found.end(),
                                        operator_word(unit.name[8:]))])
        return parse_unit(text, unit.start, unit.end, "function_def",
                          type_names | template_types(src, unit), templates)
    return parse


def check_size(src: SourceMap, unit: Unit) -> None:
    """Refuse a function too long to parse in reasonable time, at its first token."""
    if unit.end - unit.start > MAX_FUNCTION_CHARS:
        loc = src.loc(unit.start)
        raise KirError(f"function '{unit.name}' is {unit.end - unit.start} characters long; "
                       f"kir parses functions of at most {MAX_FUNCTION_CHARS}", loc,
                       source_line=src.source_line(loc),
                       hint="is this generated code? split it or shrink the unrolled parts")


def parse_kernel_unit(program: Program, unit: Unit):
    """The parse tree of a ``__global__`` function."""
    check_size(program.src, unit)
    return parse_unit(program.src, unit.start, unit.end, "function_def",
                      program.type_names | template_types(program.src, unit),
                      program.template_names)
