"""A ``__global__`` function's signature read from the source text, without lowering it.

What the host side and the spec need to know about a kernel before (or without) the
frontend lowering it: its template parameters (``int BM``, ``typename T``) and each
parameter's type words, pointer depth and ``const``-ness, in order. Read from the
preprocessed text with the frontend's unit scanner; the parameter list is split at top-level
commas, so no grammar is involved and kernels the frontend refuses still have signatures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kir.frontends.cuda.scan import FUNCTION_TYPEDEF, SPECIALIZATION_HEADER, scan_units

from kir.errors import KirError

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct",
               "__grid_constant__"}
_IDENT = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class ParamDecl:
    """One kernel parameter: ``type_words`` without qualifiers (``("unsigned", "int")``,
    ``("float4",)``, ``("T",)``), ``pointers`` (0 for a scalar), ``const`` (the pointee, or
    the scalar, is const), ``default`` (text after ``=``, if any)."""

    name: str
    type_words: tuple[str, ...]
    pointers: int
    const: bool
    default: str | None = None

    @property
    def type_text(self) -> str:
        return " ".join(self.type_words) + "*" * self.pointers


@dataclass(frozen=True)
class Signature:
    """A kernel's name, template parameters (``(kind, name)`` with kind ``"typename"`` or
    the value type, e.g. ``"int"``) and parameters; ``offset`` is where it starts in the
    preprocessed text."""

    name: str
    template: tuple[tuple[str, str], ...]
    params: tuple[ParamDecl, ...]
    offset: int = 0
    specialization: bool = False  # ``template <> __global__ void k(half* ...)``

    @property
    def type_params(self) -> tuple[str, ...]:
        """Names of the ``typename``/``class`` template parameters."""
        return tuple(name for kind, name in self.template if kind == "typename")

    def typed_by(self, type_param: str) -> tuple[str, ...]:
        """Parameters declared with the template type ``type_param`` (``const T* x``)."""
        return tuple(p.name for p in self.params if type_param in p.type_words)


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at ``separator`` outside (), [], {} and <> nesting."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth = max(depth - 1, 0)
        elif c == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_param(text: str) -> ParamDecl | None:
    """One parameter declaration (None for ``void`` or an unnamed one)."""
    default = None
    if "=" in text:
        text, default = (part.strip() for part in text.split("=", 1))
    text = re.sub(r"\[[^\]]*\]", "*", text)  # float x[] is a pointer
    words = _IDENT.findall(text)
    if not words or words == ["void"]:
        return None
    name = words[-1]
    before_name = text[:text.rfind(name)]
    star = before_name.find("*")
    const_part = before_name if star < 0 else before_name[:star]
    type_words = tuple(w for w in words[:-1] if w not in _QUALIFIERS)
    if not type_words:
        return None
    return ParamDecl(name, type_words, before_name.count("*"),
                     "const" in _IDENT.findall(const_part), default)


_FUNCTION_PARAM = re.compile(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")


def _template(header: str, function_types: frozenset[str] = frozenset()
              ) -> tuple[tuple[tuple[str, str], ...], str]:
    """The template parameters of a header starting ``template <...>`` and the rest;
    ``function_types`` names the file's function pointer typedefs (a parameter of one of
    them is a function)."""
    stripped = header.lstrip()
    if not stripped.startswith("template"):
        return (), header
    open_at = stripped.find("<")
    level = 0
    for k in range(open_at, len(stripped)):
        level += {"<": 1, ">": -1}.get(stripped[k], 0)
        if level == 0:
            inside, rest = stripped[open_at + 1:k], stripped[k + 1:]
            break
    else:
        return (), header
    params = []
    for part in split_top_level(inside):
        part = part.split("=", 1)[0].strip()
        function = _FUNCTION_PARAM.search(part)
        if function:  # T (*ACT_FN)(const T&): a function
            params.append(("function", function.group(1)))
            continue
        words = _IDENT.findall(part)
        if len(words) < 2:
            continue
        if words[-2] in function_types:  # dequantize_kernel_t dequantize_kernel
            params.append(("function", words[-1]))
            continue
        kind = "typename" if words[0] in ("typename", "class") else " ".join(words[:-1])
        params.append((kind, words[-1]))
    return tuple(params), rest


def signatures(text: str) -> list[Signature]:
    """The signatures of every ``__global__`` function in preprocessed ``text``."""
    out = []
    function_types = frozenset(FUNCTION_TYPEDEF.findall(text))
    for unit in scan_units(text):
        if unit.kind != "global":
            continue
        body = text.find("{", unit.start)
        header = text[unit.start:body if body >= 0 else unit.end]
        template, rest = _template(header, function_types)
        rest = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", rest)
        open_at = rest.find("(", rest.find(unit.name))
        close_at = rest.rfind(")")
        params = [parse_param(p) for p in split_top_level(rest[open_at + 1:close_at])]
        special = not template and SPECIALIZATION_HEADER.match(header) is not None
        out.append(Signature(unit.name, template, tuple(p for p in params if p), unit.start,
                             special))
    return out


def kernel_signature(text: str, kernel: str | None = None) -> Signature:
    """The signature of ``kernel`` (the only kernel when None) in preprocessed ``text``."""
    found = signatures(text)
    if kernel is not None:
        found = [s for s in found if s.name == kernel]
    if len(found) > 1 and len({s.name for s in found}) == 1:  # a template, specializations
        found = [s for s in found if not s.specialization][:1] or found[:1]
    if len(found) != 1:
        names = ", ".join(s.name for s in signatures(text)) or "none"
        raise KirError(f"no single __global__ function {kernel or ''} (found: {names})",
                       hint="name the kernel (--kernel NAME)")
    return found[0]
