"""Template arguments a file itself gives its kernel: explicit instantiations and launches.

A template kernel is compiled for the arguments its file names: an explicit instantiation
(``template __global__ void k<float, 256>(const float*, int);``, often from a macro per
dtype) or a launch in the file's host code (``k<float, 256><<<grid, block>>>(...)``). When
the spec gives no value for a template parameter and it has no default, the frontend takes
it from the first of those in the file (instantiations first, in source order), so such a
file lowers without a spec's ``templates`` table; a spec's value always wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kir.frontends.cuda.ctypes_ import NAMED_TYPES
from kir.frontends.cuda.macros import lex
from kir.frontends.cuda.ppexpr import evaluate
from kir.frontends.cuda.signature import Signature, split_top_level
from kir.ir.types import VectorType

# C type names -> kir dtypes, as template type arguments and host declarations name them
DTYPES = {"float": "f32", "double": "f64", "half": "f16", "__half": "f16",
          "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "int": "i32", "int32_t": "i32",
          "unsigned": "u32", "uint": "u32", "uint32_t": "u32", "unsigned int": "u32",
          "long": "i64", "long long": "i64", "int64_t": "i64", "size_t": "u64",
          "uint64_t": "u64", "unsigned long": "u64", "unsigned long long": "u64",
          "bool": "bool", "float2": "f32", "float4": "f32", "float3": "f32", "int2": "i32",
          "int4": "i32", "uint2": "u32", "uint4": "u32", "double2": "f64", "half2": "f16",
          "__half2": "f16", "int8_t": "i8", "uint8_t": "u8",
          "int16_t": "i16", "uint16_t": "u16", "short": "i16", "unsigned short": "u16",
          "c10::Half": "f16",
          "c10::BFloat16": "bf16", "at::Half": "f16", "at::BFloat16": "bf16"}

_ARGS = r"<((?:[^<>;{}]|<(?:[^<>;{}]|<[^<>;{}]*>)*>)*)>"


@dataclass(frozen=True)
class ValueText:
    """A template value argument kir reads as a constant expression in the file's scope
    (an enumerator such as ``Act::Relu``, a ``constexpr``), not as a number here."""

    text: str


def instantiation_values(text: str, signature: Signature) -> dict[str, int | str | ValueText]:
    """The template values of ``signature``'s kernel that preprocessed ``text`` names, in the
    form a spec's ``templates`` gives them (ints, dtype names, ``&function``), or as
    :class:`ValueText` for a value only the file's scope gives; a parameter whose argument
    kir cannot read is left out."""
    if not signature.template:
        return {}
    name = re.escape(signature.name)
    explicit = re.compile(rf"\btemplate\s+(?:__global__\s+)?(?:void\s+)?{name}\s*{_ARGS}\s*\(")
    launch = re.compile(rf"\b{name}\s*{_ARGS}\s*<<<")
    found = explicit.search(text)
    host = None
    if found is None:
        found = launch.search(text)
        if found is None:
            return {}
        host = _LaunchContext(text, signature.name, found.start())
    values: dict[str, int | str | ValueText] = {}
    for (kind, param), arg in zip(signature.template, split_top_level(found.group(1))):
        arg = " ".join(arg.split())
        if host is not None:
            arg = host.substituted(arg)
        value = _value(kind, arg)
        if isinstance(value, ValueText) and host is not None:
            value = host.number(arg, value)
        if value is not None:
            values[param] = value
    return values


class _LaunchContext:
    """What the host code around a launch says of its template arguments: the launching
    function's own template parameters, bound by the one instantiation or call of it in the
    file (``template void run<half>(...)``, ``run<float, 4>(...)``), and the host variables
    defined before the launch (``constexpr int HEAD_SIZE = 128;``)."""

    def __init__(self, text: str, kernel: str, at: int) -> None:
        from kir.frontends.cuda.launch_sites import HostReader

        self.text = text
        reader = HostReader(text)
        launch = next((x for x in reader.launches({kernel}) if x.offset == at), None)
        self.variables = launch.variables if launch is not None else {}
        self.bound: dict[str, str] = {}
        function = next(((name, start) for name, start, end, _, _ in reader.functions
                         if start <= at < end), None)
        if function is not None:
            self.bound = _host_template_binding(text, *function)

    def substituted(self, arg: str) -> str:
        """``arg`` with the launching function's template parameters replaced by what its
        instantiation gives them."""
        if not self.bound:
            return arg
        return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: self.bound.get(m.group(0), m.group(0)),
                      arg)

    def number(self, arg: str, fallback: ValueText) -> int | ValueText:
        """``arg`` evaluated with the host variables at their values, else ``fallback``."""
        from kir.frontends.cuda.host_expr import HostExprError, Translator, parse_expr

        def resolve(name: str):
            var = self.variables.get(name)
            if var is None or var.expr is None or var.param:
                return None
            return ("expr", var.expr, var.type)

        try:
            value = Translator(resolve).value(parse_expr(arg))
        except (HostExprError, ValueError, ZeroDivisionError, RecursionError):
            return fallback
        return int(value) if float(value).is_integer() else fallback


def _host_template_binding(text: str, name: str, body_start: int) -> dict[str, str]:
    """The template parameters of host function ``name`` (its body at ``body_start``) ->
    the argument texts of the first instantiation or call of it that names them all."""
    at = text.rfind(name, 0, body_start)
    head_start = max(text.rfind(";", 0, at), text.rfind("}", 0, at)) + 1
    header = re.search(r"\btemplate\s*<(.*)>", text[head_start:at], re.DOTALL)
    if header is None:
        return {}
    params = []
    for piece in split_top_level(header.group(1)):
        ident = re.findall(r"[A-Za-z_]\w*", piece.split("=", 1)[0])
        if len(ident) >= 2:
            params.append(ident[-1])
    for use in re.finditer(rf"\b{re.escape(name)}\s*{_ARGS}\s*\(", text):
        if use.start() == at:
            continue
        args = [" ".join(a.split()) for a in split_top_level(use.group(1))]
        if 0 < len(args) <= len(params):  # (the rest deduced from the call's arguments)
            return dict(zip(params, args))
    return {}


def type_argument(arg: str) -> str | None:
    """A type template argument as kir binds it: a dtype (``float`` -> ``"f32"``), a vector
    type's own name (``half2``: the vector, not a dtype of its elements), or the name of a
    type the file defines (a function object); None for what it cannot name."""
    arg = arg.replace("const ", "")
    if isinstance(NAMED_TYPES.get(arg), VectorType):
        return arg
    return DTYPES.get(arg) or (arg if re.fullmatch(r"[A-Za-z_][\w:]*", arg) else None)


def _value(kind: str, arg: str) -> int | str | ValueText | None:
    if kind == "typename":
        return type_argument(arg)
    if kind == "function":
        head = arg.lstrip("&").split("<", 1)[0].strip()
        return f"&{head}" if re.fullmatch(r"[A-Za-z_][\w:]*", head) else None
    arg = re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", arg))

    def fail(message: str, offset: int):
        raise ValueError(message)

    try:
        return int(evaluate(lex(arg, 0, len(arg), True), fail, 0, strict=True))
    except (ValueError, RecursionError):
        return ValueText(arg)
