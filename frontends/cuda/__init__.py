"""The CUDA frontend: preprocess, parse and lower a CUDA kernel to kir IR.

``load_cuda`` is the entry point; ``list_kernels`` names the ``__global__`` functions of a
file. Host code in the file is skipped unread (see :mod:`kir.frontends.cuda.scan`).
"""

from __future__ import annotations

import re
import sys

from kir.frontends.cuda.lower import Lowerer
from kir.frontends.cuda.parser import BUILTIN_TYPE_NAMES, SourceMap, parse_unit
from kir.frontends.cuda.scan import Unit, kernel_names, scan_units
from kir.frontends.cuda.values import ConstSym, FunctionSym

from kir.errors import KirError
from kir.ir import Kernel, Launch

__all__ = ["load_cuda", "list_kernels", "lower_source", "template_params"]

DEFAULT_LAUNCH = Launch(("1", "1", "1"), (1, 1, 1), 0)
# Statement lowering recurses once per nesting level (a few frames each) and stops with a
# KirError past lower_stmt.MAX_NESTING levels; this bound covers that depth with room to
# spare. Expression chains are lowered iteratively and need none of it.
_RECURSION_LIMIT = 12000
# Parsing and lowering cost about 20 us per character of a function: past this a kernel takes
# more than a few seconds, so it is refused up front (host code around it is skipped unread and
# only counts against the preprocessor's whole-file limit).
MAX_FUNCTION_CHARS = 256 * 1024
_TEMPLATE_TYPES = re.compile(r"\b(?:typename|class)\s+([A-Za-z_]\w*)")
_TEMPLATE_VALUE_PARAMS = re.compile(r"\b(?:int|unsigned|long|size_t|bool)\s+([A-Za-z_]\w*)")
_TYPEDEF_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*;\s*$")


def _preprocess(text: str, filename: str, defines: dict[str, str] | None) -> SourceMap:
    from kir.frontends.cuda.preprocess import preprocess

    return preprocess(text, filename, defines)


def list_kernels(text: str, filename: str) -> list[str]:
    """Names of the ``__global__`` functions defined in ``text``, in source order."""
    return kernel_names(_preprocess(text, filename, None).text)


def template_params(text: str, filename: str, kernel: str | None = None) -> list[str]:
    """The names of a ``__global__`` function's ``template<int A, int B>`` parameters, in
    declaration order (empty for a plain kernel) — what an instantiation ``k<A, B>`` needs."""
    src = _preprocess(text, filename, None)
    units = [u for u in scan_units(src.text) if u.kind == "global"]
    chosen = next((u for u in units if kernel in (None, u.name)), None)
    if chosen is None:
        return []
    header = src.text[chosen.start:chosen.end]
    if not header.startswith("template"):
        return []
    return _TEMPLATE_VALUE_PARAMS.findall(header[:header.find(">") + 1])


def load_cuda(text: str, filename: str, *, kernel: str | None = None,
              template_values: dict[str, int] | None = None, launch: Launch | None = None,
              defines: dict[str, str] | None = None) -> Kernel:
    """Parse CUDA source ``text`` and lower one ``__global__`` function to a kir Kernel.

    ``kernel`` picks the function when the file defines several; ``template_values`` gives
    integer template parameters; ``launch`` (from the spec) sizes dynamic shared memory
    and becomes ``Kernel.launch``; ``defines`` are extra ``-D`` macros. Errors are KirErrors
    (UnsupportedError for constructs outside the subset) pointing into ``filename``.
    """
    kern = lower_source(_preprocess(text, filename, defines), kernel=kernel,
                        template_values=template_values, launch=launch)
    return Kernel(kern.name, kern.params, kern.body, kern.launch, source=text)


def lower_source(src: SourceMap, *, kernel: str | None = None,
                 template_values: dict[str, int] | None = None,
                 launch: Launch | None = None) -> Kernel:
    """Lower an already preprocessed file (anything with ``text``, ``loc(offset)`` and
    ``source_line(loc)``)."""
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        return _lower(src, kernel, template_values or {}, launch or DEFAULT_LAUNCH)
    finally:
        sys.setrecursionlimit(old_limit)


def _lower(src: SourceMap, kernel: str | None, template_values: dict[str, int],
           launch: Launch) -> Kernel:
    units = scan_units(src.text)
    kernels = [u for u in units if u.kind == "global"]
    if not kernels:
        raise KirError("no __global__ function found", src.loc(0),
                       hint="kir lowers CUDA kernels; is this the right file?")
    if kernel is None:
        if len(kernels) > 1:
            names = ", ".join(u.name for u in kernels)
            raise KirError(f"several __global__ functions ({names}); pick one", src.loc(0),
                           hint="pass kernel=NAME (or set `kernel` in the spec)")
        chosen = kernels[0]
    else:
        matches = [u for u in kernels if u.name == kernel]
        if not matches:
            names = ", ".join(u.name for u in kernels)
            raise KirError(f"no __global__ function named '{kernel}' (found: {names})",
                           src.loc(0))
        chosen = matches[0]

    for unit in units:
        if unit.kind in ("global", "device") and unit.end - unit.start > MAX_FUNCTION_CHARS \
                and (unit is chosen or unit.kind == "device"):
            loc = src.loc(unit.start)
            raise KirError(f"function '{unit.name}' is {unit.end - unit.start} characters long; "
                           f"kir parses functions of at most {MAX_FUNCTION_CHARS}", loc,
                           source_line=src.source_line(loc),
                           hint="is this generated code? split it or shrink the unrolled parts")
    typedef_names = set()
    for u in units:
        if u.kind == "typedef":
            m = _TYPEDEF_NAME.search(src.text[u.start:u.end])
            if m:
                typedef_names.add(m.group(1))
    base_names = BUILTIN_TYPE_NAMES | typedef_names
    typedefs: dict[str, object] = {}
    globals_: dict[str, ConstSym] = {}
    for u in units:
        if u.kind in ("typedef", "const") and u.start < chosen.start or u.kind == "typedef":
            _top_level(src, u, base_names, typedefs, globals_, launch)

    functions: dict[str, list[FunctionSym]] = {}
    for u in units:
        if u.kind == "device":
            functions.setdefault(u.name, []).append(_parse_function(src, u, base_names))
    lowerer = Lowerer(src, functions, globals_, typedefs, launch)
    tree = parse_unit(src, chosen.start, chosen.end, "function_def",
                      base_names | _template_types(src, chosen))
    return lowerer.lower_kernel(tree, chosen.start, template_values)


def _template_types(src: SourceMap, unit: Unit) -> set[str]:
    text = src.text[unit.start:unit.end]
    if not text.startswith("template"):
        return set()
    return set(_TEMPLATE_TYPES.findall(text[:text.find(">") + 1]))


def _parse_function(src: SourceMap, unit: Unit, names: frozenset[str] | set[str]) -> FunctionSym:
    tree = parse_unit(src, unit.start, unit.end, "function_def", names | _template_types(src, unit))
    return FunctionSym(unit.name, tree, unit.start)


def _top_level(src: SourceMap, unit: Unit, names, typedefs: dict, globals_: dict,
               launch: Launch) -> None:
    """Record a top-level typedef or scalar constant; anything else there is host code."""
    try:
        own = set(_TYPEDEF_NAME.findall(src.text[unit.start:unit.end]))
        tree = parse_unit(src, unit.start, unit.end, "top_decl", set(names) - own)
        lowerer = Lowerer(src, {}, globals_, typedefs, launch)
        lowerer.offset = unit.start
        if tree.data == "typedef_decl":
            specs, declarator = tree.children
            ctype = lowerer.resolve_specs(specs)
            pointers, is_ref, ident, dims = lowerer.split_declarator(declarator)
            if ctype.base is not None and not pointers and not is_ref and not dims:
                typedefs[ident] = ctype.base
            return
        lowerer.push_scope()
        lowerer.lower_stmt(tree.children[0])
        for ident, sym in lowerer.scopes[-1].items():
            if isinstance(sym, ConstSym):
                globals_[ident] = sym
    except KirError:
        return  # not a constant kir understands: host-side, ignored unless used
