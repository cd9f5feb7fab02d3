"""Find the device-side parts of a CUDA file without parsing the host code around them.

A CUDA file mixes kernels with host code (``main``, ``cudaMalloc``, structs only the host
uses) that lies far outside kir's subset. A brace-matching scan over the preprocessed text
splits it into top-level units (a declaration ending in ``;`` or a function ending in its
closing ``}``) and keeps only what the frontend needs: ``__global__`` and ``__device__``
function definitions (with a ``template<...>`` header before them; ``constexpr`` functions
count as device functions, as under nvcc's relaxed constexpr), ``const``/``constexpr``
scalar constants, ``typedef``s and ``using`` aliases, ``struct`` definitions and ``enum``s.
Everything else is skipped unread, and nothing is parsed here: the frontend parses a unit
only when the kernel it lowers reaches it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A unit header that opens a scope whose contents are top-level units themselves.
_SCOPE_OPENER = re.compile(r'^\s*(namespace\b[\w\s:]*|extern\s*"C"\s*)$')
# C linkage written before one function (``extern "C" __global__ void k(...)``, the form
# CuPy's RawKernel and ctypes users need): it changes symbol names only, so it is skipped.
_LINKAGE = re.compile(r'extern\s*"C(?:\+\+)?"\s*')
_IDENT = re.compile(r"[A-Za-z_]\w*")
_FN_NAME = re.compile(r"([A-Za-z_]\w*)\s*$")
_FREE_OPERATOR = re.compile(r"\boperator\s*([^\w\s(]+)\s*$")


@dataclass(frozen=True)
class Unit:
    """One top-level unit the frontend cares about: ``kind`` is ``global``, ``device``,
    ``const``, ``typedef`` (also ``using X = ...``), ``struct``, ``union`` or ``enum``;
    ``start``/``end``
    are offsets into the scanned text; ``name`` is the function's, struct's or alias's name
    (empty for constants, and for a typedef or enum when it is not found)."""

    kind: str
    name: str
    start: int
    end: int


def _is_function_header(header: str) -> bool:
    """Whether text before a ``{`` is a function signature (ends with its ``)``)."""
    return header.rstrip().endswith(")")


def _skip_literal(text: str, i: int) -> int:
    """Index just past the string or char literal starting at ``text[i]``."""
    quote = text[i]
    i += 1
    n = len(text)
    while i < n and text[i] != quote:
        if text[i] == "\\":
            i += 1
        elif text[i] == "\n":
            break
        i += 1
    return i + 1


def _raw_units(text: str) -> list[tuple[int, int, int]]:
    """Split ``text`` into top-level units: (start, end, body_open) where body_open is the
    offset of a function body's ``{`` or -1 for a ``;``-terminated unit."""
    units: list[tuple[int, int, int]] = []
    n = len(text)
    i = 0
    start = 0
    depth = 0  # brace depth inside the current unit
    parens = 0
    first_brace = -1
    open_scopes = 0
    while i < n:
        c = text[i]
        if c in "\"'":
            i = _skip_literal(text, i)
            continue
        if c == "(":
            parens += 1
        elif c == ")":
            parens = max(parens - 1, 0)
        elif c == "{":
            if depth == 0 and parens == 0 and _SCOPE_OPENER.match(text[start:i]):
                # namespace / extern "C": its contents are top level too.
                open_scopes += 1
                start = i + 1
            else:
                if depth == 0:
                    first_brace = i
                depth += 1
        elif c == "}":
            if depth == 0:
                if open_scopes:
                    open_scopes -= 1
                start = i + 1
            else:
                depth -= 1
                if depth == 0 and _is_function_header(text[start:first_brace]):
                    # A function body closes the unit (no ';' after it).
                    units.append((start, i + 1, first_brace))
                    start = i + 1
                    first_brace = -1
        elif c == ";" and depth == 0 and parens == 0:
            units.append((start, i + 1, -1))
            start = i + 1
            first_brace = -1
        i += 1
    if depth > 0 and first_brace >= 0:
        # An unclosed function body: keep it so the parser reports where input ended.
        units.append((start, n, first_brace))
    return units


def _strip_template(header: str) -> str:
    """The header text after a leading ``template<...>`` (angle brackets balanced)."""
    stripped = header.lstrip()
    if not stripped.startswith("template"):
        return header
    j = stripped.find("<")
    level = 0
    for k in range(j, len(stripped)):
        if stripped[k] == "<":
            level += 1
        elif stripped[k] == ">":
            level -= 1
            if level == 0:
                return stripped[k + 1:]
    return header


def scan_units(text: str) -> list[Unit]:
    """The device functions, constants and typedefs of a preprocessed CUDA file, in order."""
    out: list[Unit] = []
    for start, end, body in _raw_units(text):
        # Skip leading whitespace so a unit's offset is where its first token is.
        while start < end and text[start].isspace():
            start += 1
        if body >= 0:
            linkage = _LINKAGE.match(text, start, body)
            if linkage:
                start = linkage.end()
            header = text[start:body]
            words = set(_IDENT.findall(header))
            if "__global__" in words or "__device__" in words or _is_constexpr_function(header):
                signature = _strip_template(header)
                paren = _top_level_paren(signature)
                match = _FN_NAME.search(signature[:paren]) if paren >= 0 else None
                operator = _FREE_OPERATOR.search(signature[:paren]) if paren >= 0 else None
                if operator:  # float3 operator+(float3 a, float3 b)
                    out.append(Unit("device", "operator" + operator.group(1), start, end))
                elif match:
                    kind = "global" if "__global__" in words else "device"
                    out.append(Unit(kind, match.group(1), start, end))
            continue
        unit = text[start:end]
        words = unit.split(None, 1)
        if not words:
            continue
        first = words[0]
        declared = _declared_type(unit)
        if declared is not None:
            out.append(Unit(declared[0], declared[1], start, end))
        elif first == "typedef":
            out.append(Unit("typedef", "", start, end))
        elif {"__constant__", "__device__"} & set(_IDENT.findall(unit.split("=", 1)[0])) \
                and "(" not in unit.split("=", 1)[0].split("[", 1)[0]:
            names = _CONSTANT_NAME.findall(unit.split("=", 1)[0])
            # __constant__ memory (or a __device__ variable): the kernels reading it take it
            # as an input
            if names:
                out.append(Unit("constant", names[-1], start, end))
        elif first in ("const", "constexpr", "static") and "(" not in unit.split("=", 1)[0]:
            heads = set(_IDENT.findall(unit.split("=", 1)[0]))
            if heads & {"const", "constexpr"} and not heads & {"__device__", "__constant__",
                                                              "__shared__", "char"}:
                out.append(Unit("const", "", start, end))
    return out


# The name a ``__constant__`` declaration declares: the identifier before its ``[``, ``=``
# or ``;`` (``__constant__ float c_w[9];``, ``static __constant__ int c_n = 4;``).
_CONSTANT_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?=\[|;|$)")


def _top_level_paren(signature: str) -> int:
    """Offset of the ``(`` opening the parameter list (skipping ``__launch_bounds__(...)``
    and ``__align__(...)``, whose arguments may hold parentheses of their own, and those in
    a return type's template arguments: ``std::enable_if_t<(width > 0)> k(...)``)."""
    i, angles = 0, 0
    while i < len(signature):
        ch = signature[i]
        if ch == "<" and not signature[:i].rstrip().endswith("operator") \
                and signature[i + 1:i + 2] not in ("<", "="):
            angles += 1
        elif ch == ">" and angles:
            angles -= 1
        elif ch == "(":
            before = signature[:i].rstrip()
            if angles or before.endswith(("__launch_bounds__", "__align__", "alignas")):
                close = closing_bracket(signature, i)
                if close < 0:
                    return -1
                i = close + 1
                continue
            return i
        i += 1
    return -1


def closing_bracket(text: str, open_at: int) -> int:
    """Offset of the bracket closing the ``(``, ``[`` or ``{`` at ``open_at`` (nested ones
    of the same kind skipped), or -1 when the text ends first."""
    opening = text[open_at]
    closing = {"(": ")", "[": "]", "{": "}"}[opening]
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] == opening:
            depth += 1
        elif text[k] == closing:
            depth -= 1
            if depth == 0:
                return k
    return -1


# ---- C++ declarations of types (kept apart: the function scan above is unchanged by them)

_ALIGNED = r"(?:\s+(?:__align__|alignas)\s*\((?:[^()]|\([^()]*\))*\))*"  # after the keyword
_STRUCT = re.compile(rf"(?:typedef\s+)?struct\b{_ALIGNED}\s*([A-Za-z_]\w*)?\s*\{{")
_SPECIALIZATION = re.compile(rf"struct\b{_ALIGNED}\s*([A-Za-z_]\w*)\s*<")
_TYPEDEF_STRUCT_NAME = re.compile(r"\}\s*([A-Za-z_]\w*)\s*;\s*$")
_UNION = re.compile(rf"(?:typedef\s+)?union\b{_ALIGNED}\s*([A-Za-z_]\w*)?\s*\{{")
_USING = re.compile(r"using\s+([A-Za-z_]\w*)\s*=")
_ENUM = re.compile(r"enum\b(?:\s+(?:class|struct)\b)?\s*([A-Za-z_]\w*)?")


def _declared_type(unit: str) -> tuple[str, str] | None:
    """(kind, name) for a struct definition (a template struct too: the frontend refuses it
    where it is used), a ``using`` alias or an enum; None otherwise."""
    if unit.startswith("template"):
        unit = _strip_template(unit).lstrip()
        specialized = _SPECIALIZATION.match(unit)
        if specialized:  # template <> struct Vec<float, 4> { ... };
            return "specialization", specialized.group(1)
        return _declared_type(unit) if unit.startswith(("struct", "union")) else None
    union = _UNION.match(unit)
    if union:  # (refused where a kernel uses the type: kir has no unions)
        named = _TYPEDEF_STRUCT_NAME.search(unit) if unit.startswith("typedef") else None
        return "union", named.group(1) if named else union.group(1) or ""
    struct = _STRUCT.match(unit)
    if struct:
        if unit.startswith("typedef"):
            named = _TYPEDEF_STRUCT_NAME.search(unit)
            return "struct", named.group(1) if named else ""
        return "struct", struct.group(1) or ""
    using = _USING.match(unit)
    if using:
        return "typedef", using.group(1)
    enum = _ENUM.match(unit)
    if enum and "{" in unit:
        return "enum", enum.group(1) or ""
    return None


def _is_constexpr_function(header: str) -> bool:
    """A ``constexpr`` function without ``__device__`` (callable from kernels under nvcc's
    ``--expt-relaxed-constexpr``)."""
    words = _IDENT.findall(_strip_template(header).split("(", 1)[0])
    return "constexpr" in words and "__host__" not in words


# ``template <> __global__ void k(half* x)``: an explicit specialization's empty header
SPECIALIZATION_HEADER = re.compile(r"\s*template\s*<\s*>")
# ``typedef void (*dequantize_t)(const void*, int, float2&);``: a function pointer type's name
FUNCTION_TYPEDEF = re.compile(r"\btypedef\b[^;(){}]*\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")


def kernel_names(text: str) -> list[str]:
    """Names of the ``__global__`` functions defined in ``text``, in source order (a kernel
    template and its explicit specializations, one name)."""
    names = [u.name for u in scan_units(text) if u.kind == "global"]
    return list(dict.fromkeys(names))
