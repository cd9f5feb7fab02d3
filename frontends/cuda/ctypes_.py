"""C types and C arithmetic for the CUDA frontend: type specifiers to kir types, literals,
the usual arithmetic conversions with explicit :class:`Cast` nodes, and integer constant
folding (so ``__shared__ float t[BM * BK]`` has a size and ``-1`` is one constant).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kir.ir import Binary, Cast, Const, Expr, Unary
from kir.ir.types import (
    BF16,
    BOOL,
    I8,
    I16,
    U16,
    U8,
    F16,
    F32,
    F64,
    I32,
    I64,
    U32,
    U64,
    ScalarType,
    VectorType,
    common_type,
)

ValueType = ScalarType | VectorType

#: Builtin type names (TYPE_NAME tokens) and the kir type each stands for.
NAMED_TYPES: dict[str, ValueType] = {
    "size_t": U64, "half": F16, "__half": F16, "__nv_bfloat16": BF16, "uint": U32,
    "uint32_t": U32, "int32_t": I32, "uint64_t": U64, "int64_t": I64, "ptrdiff_t": I64,
    "float2": VectorType(F32, 2), "float3": VectorType(F32, 3), "float4": VectorType(F32, 4),
    "int2": VectorType(I32, 2), "int3": VectorType(I32, 3), "int4": VectorType(I32, 4),
    "uint2": VectorType(U32, 2), "uint3": VectorType(U32, 3), "uint4": VectorType(U32, 4),
    "double2": VectorType(F64, 2), "uintptr_t": U64, "intptr_t": I64, "nv_bfloat16": BF16,
    "int8_t": I8, "uint8_t": U8, "int16_t": I16, "uint16_t": U16, "ushort": U16, "uchar": U8,
    "uchar2": VectorType(U8, 2),
    "uchar3": VectorType(U8, 3), "uchar4": VectorType(U8, 4), "char2": VectorType(I8, 2),
    "char4": VectorType(I8, 4), "half2": VectorType(F16, 2), "__half2": VectorType(F16, 2),
    "short2": VectorType(I16, 2), "short4": VectorType(I16, 4),
    "ushort2": VectorType(U16, 2), "ushort4": VectorType(U16, 4),
    "__nv_bfloat162": VectorType(BF16, 2), "nv_bfloat162": VectorType(BF16, 2),
    # PyTorch's names (frontends/cuda/torch_types.py has its accumulation types)
    "c10::Half": F16, "at::Half": F16, "c10::BFloat16": BF16, "at::BFloat16": BF16,
}
#: C type keywords (every other type word is a name: a typedef, struct, template parameter).
KEYWORD_TYPES = frozenset({"void", "bool", "char", "short", "int", "long", "float", "double",
                           "unsigned", "signed", "auto"})
#: Type names that exist in CUDA but lie outside the subset, with the reason.
UNSUPPORTED_TYPES = {
    "dim3": "dim3 values in device code",
    "bfloat16": "the bfloat16 name (use __nv_bfloat16)",
}
QUALIFIERS = frozenset({
    "const", "volatile", "constexpr", "static", "inline", "__inline__", "__inline", "extern",
    "register", "__global__",
    "__device__", "__host__", "__forceinline__", "__noinline__", "__shared__", "__constant__",
    "__restrict__", "__restrict", "__grid_constant__",
})


@dataclass(frozen=True)
class CType:
    """A resolved C type: ``base`` is None for void; ``pointers`` counts ``*``s."""

    base: ValueType | None
    pointers: int = 0
    const: bool = False        # const on the pointee (or the value when not a pointer)
    restrict: bool = False


def scalar_of(t: ValueType) -> ScalarType:
    return t.elem if isinstance(t, VectorType) else t


def same_width_ints(seen, held) -> bool:
    """Whether an element held as ``held`` is seen as ``seen``, another integer type of its
    width (the bits are the same: a conversion reads them)."""
    return isinstance(seen, ScalarType) and isinstance(held, ScalarType) and seen != held \
        and seen.is_int and held.is_int and seen.nbytes == held.nbytes


def combine_type_words(words: list[str]) -> ValueType | None | str:
    """kir type for C type keywords (``unsigned long long``); a str is an error message."""
    longs = words.count("long")
    unsigned = "unsigned" in words
    rest = [w for w in words if w not in ("long", "unsigned", "signed", "int")]
    if len(rest) > 1:
        return f"conflicting type specifiers '{' '.join(words)}'"
    if rest:
        word = rest[0]
        if word == "double" and longs:
            return "long double"
        if word == "char" and not longs and "int" not in words:
            return U8 if unsigned else I8  # plain char is signed in CUDA
        if word == "short" and not longs:
            return U16 if unsigned else I16  # short, unsigned short int
        if (longs or unsigned) and word not in ("double",):
            return f"conflicting type specifiers '{' '.join(words)}'"
        return {"void": None, "bool": BOOL, "float": F32, "double": F64}.get(word, word)
    if longs:
        return U64 if unsigned else I64
    return U32 if unsigned else I32


# ----------------------------------------------------------------------------- literals


def int_literal(text: str) -> Const:
    """A C integer literal with its C type (int, unsigned, long, ...)."""
    body = text.rstrip("uUlL")
    suffix = text[len(body):].lower()
    value = int(body, 16) if body[:2].lower() == "0x" else (
        int(body, 8) if len(body) > 1 and body[0] == "0" else int(body))
    is_hex = body[:2].lower() == "0x" or (len(body) > 1 and body[0] == "0")
    unsigned = "u" in suffix
    long = "l" in suffix
    if not long and not unsigned and value <= 0x7FFFFFFF:
        return Const(value, I32)
    if not long and (unsigned or is_hex) and value <= 0xFFFFFFFF:
        return Const(value, U32)
    if not unsigned and value <= 0x7FFFFFFFFFFFFFFF:
        return Const(value, I64)
    return Const(value & 0xFFFFFFFFFFFFFFFF, U64)


def float_literal(text: str) -> Const:
    """A C floating literal: ``1.0f`` is float, ``1.0`` double (C semantics, not numpy's);
    hexadecimal ones (``0x1p-24f``) too."""
    read = float.fromhex if text[:2] in ("0x", "0X") else float
    if text[-1] in "fF":  # (a hexadecimal literal ends in its exponent's decimal digits)
        return Const(float(np.float32(read(text[:-1]))), F32)
    if text[-1] in "lL":
        text = text[:-1]
    return Const(read(text), F64)


# --------------------------------------------------------------------------- conversions


def _wrap(value: int, t: ScalarType) -> int:
    bits = t.bits
    value &= (1 << bits) - 1
    if t.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def convert_const(value: int | float | bool, t: ScalarType) -> int | float | bool | None:
    """``value`` converted to ``t`` as C does, or None when C leaves it undefined."""
    if t == BOOL:
        return bool(value)
    if t.is_float:
        with np.errstate(over="ignore"):  # too large for the type: infinity, as in C
            if t == F32:
                return float(np.float32(value))
            if t == F16:
                return float(np.float16(value))
        return float(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        value = int(value)  # truncates toward zero
    return _wrap(int(value), t)


def convert(e: Expr, t: ValueType) -> Expr:
    """``e`` converted to ``t``: no node when the type already matches, a folded constant for
    a literal, else a Cast."""
    if e.type == t:
        return e
    if t == BOOL and isinstance(e.type, ScalarType):
        return to_bool(e)  # spelled `e != 0`: what C means, and clearer to every backend
    if isinstance(e, Const) and isinstance(t, ScalarType):
        folded = convert_const(e.value, t)
        if folded is not None:
            return Const(folded, t)
    return Cast(e, t)


def to_bool(e: Expr) -> Expr:
    """C truthiness: ``e != 0`` (no node when ``e`` is already bool)."""
    if e.type == BOOL:
        return e
    if isinstance(e, Const):
        return Const(bool(e.value), BOOL)
    return Binary("!=", e, convert(Const(0, I32), e.type), BOOL)


def promote(t: ScalarType) -> ScalarType:
    """C's integer promotion (bool and the char types to int)."""
    return I32 if t in (BOOL, I8, U8, I16, U16) else t


def fold_int(op: str, a: int, b: int, t: ScalarType) -> int | bool | None:
    """Integer ``a op b`` in type ``t`` with C semantics, or None (division by zero)."""
    if op in ("/", "%"):
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return _wrap(q if op == "/" else a - q * b, t)
    if op in ("<<", ">>"):
        if b < 0 or b >= t.bits:
            return None
        return _wrap(a << b, t) if op == "<<" else _wrap(a >> b, t)
    table = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b,
             "==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}
    result = table[op]
    return result if isinstance(result, bool) else _wrap(result, t)


COMPARE = ("==", "!=", "<", "<=", ">", ">=")


def binary(op: str, a: Expr, b: Expr) -> Expr:
    """C binary operator on scalar values with the usual arithmetic conversions made
    explicit; integer constants fold. Raises TypeError with a message for bad operands."""
    if isinstance(a.type, VectorType) or isinstance(b.type, VectorType):
        raise TypeError(f"operator '{op}' on vector type "
                        f"{a.type if isinstance(a.type, VectorType) else b.type} "
                        "(CUDA has no built-in vector arithmetic)")
    if op in ("&&", "||"):
        left, right = to_bool(a), to_bool(b)
        if isinstance(left, Const) and isinstance(right, Const):
            value = (left.value and right.value) if op == "&&" else (left.value or right.value)
            return Const(bool(value), BOOL)
        return Binary(op, left, right, BOOL)
    if op in ("<<", ">>"):
        t = promote(a.type)
        if not t.is_int:
            raise TypeError(f"operator '{op}' needs integer operands, not {a.type}")
        if not promote(b.type).is_int:
            raise TypeError(f"operator '{op}' needs integer operands, not {b.type}")
    else:
        t = common_type(a.type, b.type)
        if op in ("%", "&", "|", "^") and not t.is_int:
            raise TypeError(f"operator '{op}' needs integer operands, not {t}")
    left, right = convert(a, t), convert(b, t)
    rtype = BOOL if op in COMPARE else t
    if t.is_int and isinstance(left, Const) and isinstance(right, Const):
        folded = fold_int(op, int(left.value), int(right.value), t)
        if folded is not None:
            return Const(folded, rtype)
    if t in (F32, F64) and op in "+-*/" and isinstance(left, Const) and isinstance(right, Const):
        folded = fold_float(op, float(left.value), float(right.value), t)
        if folded is not None:
            return Const(folded, t)
    return Binary(op, left, right, rtype)


def fold_float(op: str, a: float, b: float, t: ScalarType) -> float | None:
    """``a op b`` in IEEE ``t`` (f32 or f64), as the GPU computes it, or None when it is not a
    finite number (left to run time). ``2.0f / M_PI`` then needs no double at run time."""
    kind = np.float32 if t == F32 else np.float64
    with np.errstate(all="ignore"):
        x, y = kind(a), kind(b)
        value = {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y != 0 else kind("nan")}[op]
    return float(value) if math.isfinite(float(value)) else None


def unary(op: str, a: Expr) -> Expr:
    """C unary ``-``, ``!``, ``~`` (constants fold)."""
    if isinstance(a.type, VectorType):
        raise TypeError(f"operator '{op}' on vector type {a.type}")
    if op == "!":
        inner = to_bool(a)
        if isinstance(inner, Const):
            return Const(not inner.value, BOOL)
        return Unary("!", inner, BOOL)
    t = promote(a.type)
    if op == "~" and not t.is_int:
        raise TypeError(f"operator '~' needs an integer operand, not {a.type}")
    value = convert(a, t)
    if isinstance(value, Const):
        if op == "-":
            folded = -value.value if t.is_float else _wrap(-int(value.value), t)
            return Const(folded, t)
        return Const(_wrap(~int(value.value), t), t)
    return Unary(op, value, t)


def const_value(e: Expr) -> int | float | bool | None:
    """The value of a constant expression (after folding), else None."""
    return e.value if isinstance(e, Const) else None


def index_type_ok(t: object) -> bool:
    return isinstance(t, ScalarType) and (t.is_int or t == BOOL)


def pick_math_type(args: list[Expr]) -> ScalarType:
    """Result type of an overloaded CUDA math function (``max(int, int)`` is int,
    ``sqrt(float)`` is float, an integer argument to a float function means double)."""
    t = args[0].type
    for a in args[1:]:
        t = common_type(t, a.type)  # type: ignore[arg-type]
    return t  # type: ignore[return-value]


FLOAT_CONSTANTS: dict[str, Const] = {
    "INFINITY": Const(math.inf, F32), "HUGE_VALF": Const(math.inf, F32),
    "CUDART_INF_F": Const(math.inf, F32), "NAN": Const(math.nan, F32),
    "CUDART_NAN_F": Const(math.nan, F32),
    "FLT_MAX": Const(float(np.finfo(np.float32).max), F32),
    "FLT_MIN": Const(float(np.finfo(np.float32).tiny), F32),
    "FLT_EPSILON": Const(float(np.finfo(np.float32).eps), F32),
    "DBL_MAX": Const(float(np.finfo(np.float64).max), F64),
    "HUGE_VAL": Const(math.inf, F64), "M_PI": Const(math.pi, F64),
    "INT_MAX": Const(2**31 - 1, I32), "INT_MIN": Const(-2**31, I32),
    "UINT_MAX": Const(2**32 - 1, U32),
    "DBL_MIN": Const(float(np.finfo(np.float64).tiny), F64),
    "DBL_EPSILON": Const(float(np.finfo(np.float64).eps), F64),
    "LLONG_MAX": Const(2**63 - 1, I64), "LLONG_MIN": Const(-2**63, I64),
    "ULLONG_MAX": Const(2**64 - 1, U64),
    # math.h's constants (doubles, as the header defines them)
    "M_E": Const(math.e, F64), "M_LOG2E": Const(1 / math.log(2), F64),
    "M_LOG10E": Const(1 / math.log(10), F64), "M_LN2": Const(math.log(2), F64),
    "M_LN10": Const(math.log(10), F64), "M_PI_2": Const(math.pi / 2, F64),
    "M_PI_4": Const(math.pi / 4, F64), "M_1_PI": Const(1 / math.pi, F64),
    "M_2_PI": Const(2 / math.pi, F64), "M_2_SQRTPI": Const(2 / math.sqrt(math.pi), F64),
    "M_SQRT2": Const(math.sqrt(2), F64), "M_SQRT1_2": Const(math.sqrt(0.5), F64),
    # CUDA's math_constants.h (floats end in _F; the emulator's copy of the header:
    # backends/emulate/cuda_include/math_constants.h)
    **{name + suffix: Const(value, t) for name, value in {
        "CUDART_PI": math.pi, "CUDART_PIO2": math.pi / 2, "CUDART_PIO4": math.pi / 4,
        "CUDART_3PIO4": 3 * math.pi / 4, "CUDART_2_OVER_PI": 2 / math.pi,
        "CUDART_SQRT_2_OVER_PI": math.sqrt(2 / math.pi), "CUDART_SQRT_HALF": math.sqrt(0.5),
        "CUDART_SQRT_TWO": math.sqrt(2), "CUDART_THIRD": 1 / 3, "CUDART_L2E": math.log2(math.e),
        "CUDART_L2T": math.log2(10), "CUDART_LG2": math.log10(2), "CUDART_LGE": math.log10(math.e),
        "CUDART_LN2": math.log(2), "CUDART_LNT": math.log(10), "CUDART_LNPI": math.log(math.pi),
        "CUDART_ZERO": 0.0, "CUDART_ONE": 1.0}.items()
       for suffix, t in (("_F", F32), ("", F64))},
    "CUDART_SQRT_2PI": Const(math.sqrt(2 * math.pi), F64),
    "CUDART_SQRT_PIO2": Const(math.sqrt(math.pi / 2), F64),
    "CUDART_INF": Const(math.inf, F64), "CUDART_NAN": Const(math.nan, F64),
}
