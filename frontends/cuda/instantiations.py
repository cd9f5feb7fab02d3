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

from kir.frontends.cuda.macros import lex
from kir.frontends.cuda.ppexpr import evaluate
from kir.frontends.cuda.signature import Signature, split_top_level

# C type names -> kir dtypes, as template type arguments and host declarations name them
DTYPES = {"float": "f32", "double": "f64", "half": "f16", "__half": "f16",
          "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "int": "i32", "int32_t": "i32",
          "unsigned": "u32", "uint": "u32", "uint32_t": "u32", "unsigned int": "u32",
          "long": "i64", "long long": "i64", "int64_t": "i64", "size_t": "u64",
          "uint64_t": "u64", "unsigned long": "u64", "unsigned long long": "u64",
          "bool": "bool", "float2": "f32", "float4": "f32", "float3": "f32", "int2": "i32",
          "int4": "i32", "uint2": "u32", "uint4": "u32", "double2": "f64", "half2": "f16",
          "__half2": "f16", "int8_t": "i8", "uint8_t": "u8",
          "int16_t": "i16", "uint16_t": "u16", "short": "i16", "unsigned short": "u16", "c10::Half": "f16",
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
    found = explicit.search(text) or launch.search(text)
    if found is None:
        return {}
    values: dict[str, int | str | ValueText] = {}
    for (kind, param), arg in zip(signature.template, split_top_level(found.group(1))):
        value = _value(kind, " ".join(arg.split()))
        if value is not None:
            values[param] = value
    return values


def _value(kind: str, arg: str) -> int | str | ValueText | None:
    if kind == "typename":  # a dtype, or the name of a type the file defines (a functor)
        arg = arg.replace("const ", "")
        return DTYPES.get(arg) or (arg if re.fullmatch(r"[A-Za-z_][\w:]*", arg) else None)
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
