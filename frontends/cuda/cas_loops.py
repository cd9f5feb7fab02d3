"""Compare-and-swap retry loops read as the atomic they implement.

CUDA has no ``atomicMax`` on floats (nor, before sm_60, ``atomicAdd`` on doubles), so kernels
carry a helper that builds one from ``atomicCAS`` on the value's bits (the CUDA C++
Programming Guide's ``atomicAdd`` for doubles is the model): the value's bits are read
through an integer pointer to the same address, and ``do { assumed = old; old =
atomicCAS(bits, assumed, to_bits(f(from_bits(assumed), value))); } while (assumed != old);``
retries until no other thread wrote in between; ``f`` is ``fmaxf``, ``fminf``, ``+``, a
ternary picking the larger or smaller, or the value itself.

kir's IR has atomic max, min, add and exchange on floats, each emitted the way each target
does it best (a native atomic, or the target's own retry loop), so a helper whose whole body
is this loop, combining the old value and the argument by one of those operations, is read
as that atomic: :func:`cas_loop` recognizes it from the function's text (tokens, so layout,
comments and ``::`` qualifiers do not matter). Anything else that calls ``atomicCAS`` is
refused where it is written, with what kir reads instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|!=|==|[^\s\w]")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)

# value -> bits and bits -> value, per the element the helper works on
_TO_BITS = {"__float_as_int": "f32", "__float_as_uint": "f32",
            "__double_as_longlong": "f64"}
_FROM_BITS = {"__int_as_float": "f32", "__uint_as_float": "f32",
              "__longlong_as_double": "f64"}
_MAX = ("fmaxf", "fmax", "max")
_MIN = ("fminf", "fmin", "min")


@dataclass(frozen=True)
class CasLoop:
    """A helper read as ``op`` (an IR atomic op) on the buffer its parameter ``address``
    (an index into its parameter list) points into, of ``value`` (an index too)."""

    op: str
    element: str  # "f32" or "f64"
    address: int
    value: int


def body_and_params(text: str) -> tuple[str, list[str]] | None:
    """A ``__device__`` function's body as its tokens joined by spaces (comments and ``::``
    qualifiers dropped; ``>=`` is two tokens, ``> =``) and its parameters' names, or None
    when the text has no body."""
    tokens = _TOKEN.findall(_COMMENT.sub(" ", text))
    tokens = [t for k, t in enumerate(tokens)
              if not (t == ":" and k + 1 < len(tokens) and tokens[k + 1] == ":")
              and not (t == ":" and k and tokens[k - 1] == ":")]
    if "(" not in tokens or "{" not in tokens or tokens[-1] != "}":
        return None
    return " ".join(tokens[tokens.index("{") + 1:-1]), _params(tokens)


def cas_loop(text: str) -> CasLoop | None:
    """The atomic a ``__device__`` function's text implements with a compare-and-swap retry
    loop, or None when the text is not such a function."""
    found = body_and_params(text)
    if found is None or "atomicCAS" not in found[0]:
        return None
    body, params = found
    if len(params) != 2:
        return None
    name = r"([A-Za-z_]\w*)"
    int_type = r"(?:unsigned |signed )?(?:long long |long )?(?:int|unsigned|long long|long)"
    cast = (rf"(?:{int_type} \* {name} = \( {int_type} \* \) {name}"
            rf"|(?:auto|{int_type}) \* {name} = reinterpret_cast < {int_type} \* > "
            rf"\( {name} \)) ;")
    found = re.match(cast, body)
    if not found:
        return None
    bits = found.group(1) or found.group(3)
    address = found.group(2) or found.group(4)
    if address not in params:
        return None
    value = params[1 - params.index(address)]
    rest = body[found.end():].strip()
    declare = re.match(rf"{int_type} {name} = \* {re.escape(bits)} , {name} ;", rest) or \
        re.match(rf"{int_type} {name} = \* {re.escape(bits)} ; {int_type} {name} ;", rest)
    if not declare:
        return None
    old, assumed = declare.group(1), declare.group(2)
    rest = rest[declare.end():].strip()
    loop = re.match(
        rf"do \{{ {assumed} = {old} ; {old} = atomicCAS \( {bits} , {assumed} , (.*) \) ; \}} "
        rf"while \( (?:{assumed} != {old}|{old} != {assumed}) \) ;", rest)
    if not loop:
        return None
    tail = rest[loop.end():].strip()
    if tail not in ("", f"return {old} ;") and not re.fullmatch(
            rf"return \w+ \( {old} \) ;", tail):
        return None
    return _combine(loop.group(1), assumed, value, address, params)


def _params(tokens: list[str]) -> list[str]:
    """The parameter names of the first parenthesized list (the last word of each)."""
    start = tokens.index("(")
    depth, names, last = 0, [], None
    for t in tokens[start:]:
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
            if depth == 0:
                if last:
                    names.append(last)
                return names
        elif t == "," and depth == 1:
            names.append(last)
            last = None
        elif re.fullmatch(r"[A-Za-z_]\w*", t) and depth == 1:
            last = t
    return []


def _combine(new_bits: str, assumed: str, value: str, address: str,
             params: list[str]) -> CasLoop | None:
    """The op of ``to_bits(f(from_bits(assumed), value))``."""
    outer = re.fullmatch(r"(\w+) \( (.*) \)", new_bits)
    if not outer or outer.group(1) not in _TO_BITS:
        return None
    element = _TO_BITS[outer.group(1)]
    expr = outer.group(2)
    if expr == value:  # the old value unused: an exchange
        return CasLoop("exch", element, params.index(address), params.index(value))
    views = re.findall(rf"(\w+) \( {assumed} \)", expr)
    if len(set(views)) != 1 or _FROM_BITS.get(views[0]) != element:
        return None
    expr = re.sub(rf"\w+ \( {assumed} \)", "A", expr)
    v = re.escape(value)
    op = None
    if expr in (f"{value} + A", f"A + {value}"):
        op = "add"
    else:
        call = re.fullmatch(rf"(\w+) \( (?:{v} , A|A , {v}) \)", expr)
        if call and call.group(1) in _MAX:
            op = "max"
        elif call and call.group(1) in _MIN:
            op = "min"
        else:
            ternary = re.fullmatch(
                rf"(?:\( )?(A|{v}) ([<>]=?) (A|{v}) (?:\) )?\? (A|{v}) : (A|{v})", expr)
            if ternary and {ternary.group(1), ternary.group(3)} == {"A", value} and \
                    ternary.group(4) != ternary.group(5):
                first_wins = ternary.group(4) == ternary.group(1)
                greater = ternary.group(2).startswith(">")
                op = "max" if greater == first_wins else "min"
    if op is None:
        return None
    return CasLoop(op, element, params.index(address), params.index(value))
