"""C and CUDA math functions kir writes with its own intrinsics (a mixin of the Lowerer):
conversions that round (``lrintf``, ``lroundf`` ...), ``signbit``, ``ldexpf``/``scalbnf``,
``fdimf``, and the reciprocal and three-argument forms (``rhypotf``, ``norm3df``,
``rnorm3df``, ``rcbrtf``, ``normcdff``). Each is exact where C's definition is a formula
over the intrinsics (``ldexpf`` scales by powers of two built from their bits), and within
the intrinsics' own error elsewhere."""

from __future__ import annotations

import math

from kir.errors import UnsupportedError
from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_bits import bitcast
from kir.ir import Call, Const, Expr, Select
from kir.ir.types import F32, F64, I32, I64, U32, ScalarType

# name -> what it computes; the float type is F32 for the ...f forms, else the argument's
ROUNDING_TO_INT = {"lrintf": "rint", "llrintf": "rint", "lrint": "rint", "llrint": "rint",
                   "lroundf": "round", "llroundf": "round", "lround": "round",
                   "llround": "round"}
COMPOSED = ("signbit", "ldexpf", "ldexp", "scalbnf", "scalbn", "fdimf", "fdim", "rhypotf",
            "rhypot", "norm3df", "norm3d", "rnorm3df", "rnorm3d", "rcbrtf", "rcbrt",
            "normcdff", "normcdf")
_ARITY = {"ldexp": 2, "scalbn": 2, "fdim": 2, "rhypot": 2, "norm3d": 3, "rnorm3d": 3}
_BASES = ("ldexp", "scalbn", "fdim", "rhypot", "norm3d", "rnorm3d", "rcbrt", "normcdf")


def _base(name: str) -> str:
    """``ldexpf`` -> ``ldexp`` (the name without the float suffix)."""
    return name[:-1] if name[:-1] in _BASES else name


class MathMixin:
    """Math functions built from kir's intrinsics; relies on the Lowerer."""

    def composed_math(self, name: str, arg_trees: list, tree) -> Expr:
        """One of :data:`ROUNDING_TO_INT` or :data:`COMPOSED`."""
        base = _base(name)
        arity = _ARITY.get(base, 1)
        self._arity(name, arg_trees, arity, arity, tree)
        values = [self.rvalue(a) for a in arg_trees]
        floats = values[:1] if base in ("ldexp", "scalbn") else values
        single = name != base or name in ("lrintf", "llrintf", "lroundf", "llroundf")
        t = F32 if single else ct.pick_math_type(floats)
        if not (isinstance(t, ScalarType) and t.is_float):
            t = F64  # an integer argument to a double function
        if t.name in ("f16", "bf16"):
            t = F32  # computed in float, as CUDA's overloads for halves do
        x = self._named(ct.convert(values[0], t), "x")
        if name in ROUNDING_TO_INT:
            return ct.convert(Call(ROUNDING_TO_INT[name], (x,), t), I64)
        if base == "signbit":
            if t == F32:
                return ct.binary("!=", ct.binary(">>", bitcast(x, U32), Const(31, U32)),
                                 Const(0, U32))
            return ct.binary("<", bitcast(x, I64), Const(0, I64))  # (CUDA views f64 as i64)
        if base in ("ldexp", "scalbn"):
            return self._scaled_by_power_of_two(x, values[1], t, arg_trees[1])
        rest = [self._named(ct.convert(v, t), "y") for v in values[1:]]
        one = Const(1.0, t)
        if base == "fdim":
            y = rest[0]
            # x - y when x > y, +0 when x <= y, NaN when either is (x + y)
            return Select(ct.binary(">", x, y), ct.binary("-", x, y),
                          Select(ct.binary("<=", x, y), Const(0.0, t), ct.binary("+", x, y),
                                 t), t)
        if base in ("rhypot", "norm3d", "rnorm3d"):
            length = Call("hypot", (x, rest[0]), t)
            if base != "rhypot":
                length = Call("hypot", (self._named(length, "h"), rest[1]), t)
            return length if base == "norm3d" else ct.binary("/", one, length)
        if base == "rcbrt":
            return ct.binary("/", one, Call("cbrt", (x,), t))
        # normcdf(x) = erfc(-x / sqrt(2)) / 2
        scaled = ct.binary("*", ct.unary("-", x), Const(math.sqrt(0.5), t))
        return ct.binary("*", Const(0.5, t), Call("erfc", (scaled,), t))

    def _scaled_by_power_of_two(self, x: Expr, n: Expr, t: ScalarType, n_tree) -> Expr:
        """``x * 2**n`` as ``ldexp`` computes it: two factors ``2**a * 2**b`` (``a + b = n``
        clamped to where the result can be finite and nonzero), each a normal power of two
        built from its exponent bits, so every product is exact but the last rounding."""
        if not (isinstance(n.type, ScalarType) and n.type.is_int):
            raise self.error(f"ldexp's exponent must be an integer, not {n.type}", n_tree,
                             UnsupportedError)
        bias, mantissa, wide = (127, 23, U32) if t == F32 else (1023, 52, I64)
        low, high = 2 - 2 * bias, 2 * bias
        n = ct.convert(n, I32)
        n = self._named(Call("max", (Call("min", (n, Const(high, I32)), I32),
                                     Const(low, I32)), I32), "n")
        half = self._named(ct.binary(">>", n, Const(1, I32)), "n_half")
        result = x
        for k in (half, ct.binary("-", n, half)):
            bits = ct.binary("<<", ct.convert(ct.binary("+", k, Const(bias, I32)), wide),
                             Const(mantissa, wide))
            result = ct.binary("*", result, bitcast(bits, t))
        return result


__all__ = ["COMPOSED", "MathMixin", "ROUNDING_TO_INT"]
