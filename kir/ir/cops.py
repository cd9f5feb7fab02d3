"""C (and GPU) arithmetic on numpy arrays: what numpy does differently, done the C way.

numpy floors integer division, promotes mixed scalars, warns on overflow and traps nothing;
CUDA truncates, keeps the operand type, wraps silently, masks shift counts and never traps.
Every function here takes values that are numpy arrays or numpy scalars of the node's
dtype and returns the same dtype. Callers run under ``np.errstate(all="ignore")``.
"""

from __future__ import annotations

import math
import operator
from typing import Callable

import numpy as np

from kir.ir.types import ScalarType, VectorType

Value = np.ndarray | np.generic


def np_dtype(t: ScalarType | VectorType) -> np.dtype:
    """The numpy dtype holding one (scalar) element of ``t``."""
    return (t.elem if isinstance(t, VectorType) else t).numpy


def scalar_of(t: ScalarType | VectorType) -> ScalarType:
    """The element type of a vector type, or the scalar type itself."""
    return t.elem if isinstance(t, VectorType) else t


def const_value(value: int | float | bool, t: ScalarType) -> np.generic:
    """A literal as a numpy scalar of ``t``'s dtype; out-of-range integers wrap as C does."""
    dtype = t.numpy
    if t.name == "bool":
        return np.bool_(bool(value))
    if t.is_int:
        if isinstance(value, float):
            return c_cast(np.float64(value), t)  # type: ignore[return-value]
        wrapped = int(value) % (1 << t.bits)
        return np.array(wrapped, dtype=np.uint64).astype(dtype)[()]
    out = np.array(value, dtype=np.float64).astype(dtype)[()]
    return round_bf16(out)[()] if t.name == "bf16" else out


def round_bf16(x: Value) -> np.ndarray:
    """Round f32 values to the nearest bfloat16 (ties to even), kept in f32 storage."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    return _unwrap(np.where(np.isnan(x), x, rounded.view(np.float32)))


def _float_to_int(x: Value, dtype: np.dtype) -> np.ndarray:
    # GPUs convert with saturation (cvt.rzi.sat): NaN -> 0, out of range -> the nearest limit.
    info = np.iinfo(dtype)
    hi = np.float64(info.max)
    if int(hi) > info.max:  # 2**63 - 1 and 2**64 - 1 are not doubles; step below them
        hi = np.nextafter(hi, np.float64(0))
    t = np.trunc(np.asarray(x, dtype=np.float64))
    t = np.where(np.isnan(t), 0.0, np.clip(t, np.float64(info.min), hi))
    return _unwrap(t.astype(dtype))


def _unwrap(x: np.ndarray) -> Value:
    # Uniform values travel as numpy scalars; np.where & co. return 0-d arrays instead.
    return x[()] if x.ndim == 0 else x


def c_cast(x: Value, t: ScalarType | VectorType) -> Value:
    """C conversion of ``x`` to ``t`` (element-wise for vectors): float to int truncates
    toward zero and saturates, integers wrap, anything to bool tests against zero."""
    return caster(t)(x)


def caster(t: ScalarType | VectorType) -> Callable[[Value], Value]:
    """A function converting values to ``t`` as :func:`c_cast` does, specialized once."""
    st = scalar_of(t)
    dtype = st.numpy
    if st.name == "bool":
        return lambda x: x if x.dtype == np.bool_ else np.not_equal(x, 0)
    if st.name == "bf16":
        return lambda x: round_bf16(np.asarray(x).astype(dtype))
    if st.is_int:
        def to_int(x: Value) -> Value:
            src = x.dtype
            if src == dtype:
                return x
            if src.kind == "f":
                return _float_to_int(x, dtype)
            return x.astype(dtype)
        return to_int
    return lambda x: x if x.dtype == dtype else x.astype(dtype)


def any_lane(mask: np.ndarray) -> bool:
    """Whether any lane of ``mask`` is set (count_nonzero beats ``any`` on small arrays)."""
    return np.count_nonzero(mask) != 0


def align(a: Value, b: Value) -> tuple[Value, Value]:
    """Let a per-lane scalar ``[n]`` meet a per-lane vector ``[n, c]`` element-wise."""
    da, db = np.ndim(a), np.ndim(b)
    if da == 1 and db == 2:
        return np.asarray(a)[:, None], b
    if da == 2 and db == 1:
        return a, np.asarray(b)[:, None]
    return a, b


def _all_ones(dtype: np.dtype) -> np.generic:
    return np.array(-1).astype(dtype)[()] if dtype.kind == "i" else np.iinfo(dtype).max


def int_div(a: Value, b: Value) -> Value:
    """C integer division: truncates toward zero; x / 0 gives all ones (-1 / 0xFFFFFFFF), as
    NVIDIA hardware does, instead of trapping."""
    dtype = np.result_type(a, b)
    zero = np.equal(b, 0)
    safe = np.where(zero, np.array(1, dtype=dtype), b)
    if dtype.kind == "i":
        remainder = np.fmod(a, safe)
        quotient = np.floor_divide(np.subtract(a, remainder), safe)  # exact division
    else:
        quotient = np.floor_divide(a, safe)
    return _unwrap(np.where(zero, _all_ones(dtype), quotient).astype(dtype, copy=False))


def int_mod(a: Value, b: Value) -> Value:
    """C remainder: sign of the dividend; x % 0 gives x (a - (a/0)*0 on the hardware)."""
    dtype = np.result_type(a, b)
    zero = np.equal(b, 0)
    safe = np.where(zero, np.array(1, dtype=dtype), b)
    return _unwrap(np.where(zero, a, np.fmod(a, safe)).astype(dtype, copy=False))


def _shift_count(a: Value, b: Value) -> Value:
    # GPUs use the count modulo the operand width (x << (s & 31)).
    dtype = a.dtype
    count = b if b.dtype == dtype else b.astype(dtype)
    return count & dtype.type(dtype.itemsize * 8 - 1)


def _div(a: Value, b: Value) -> Value:
    if a.dtype.kind in "iu":
        return int_div(a, b)
    return np.true_divide(a, b)


def _mod(a: Value, b: Value) -> Value:
    if a.dtype.kind in "iu":
        return int_mod(a, b)
    return np.fmod(a, b)


def _truth(x: Value) -> Value:
    return x if x.dtype == np.bool_ else np.not_equal(x, 0)


def _shl(a: Value, b: Value) -> Value:
    return a << _shift_count(a, b)


def _shr(a: Value, b: Value) -> Value:
    return a >> _shift_count(a, b)


# Python operators, not ufuncs: on numpy scalars (lane-uniform values such as loop counters)
# they take numpy's fast scalar path, forty times cheaper than a ufunc call.
BINARY: dict[str, Callable[[Value, Value], Value]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "%": _mod,
    "<<": _shl, ">>": _shr,
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "&&": lambda a, b: np.logical_and(_truth(a), _truth(b)),
    "||": lambda a, b: np.logical_or(_truth(a), _truth(b)),
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}


def _negate(x: Value) -> Value:
    return np.logical_not(x) if x.dtype == np.bool_ else -x


UNARY: dict[str, Callable[[Value], Value]] = {
    "-": _negate,
    "!": lambda x: np.logical_not(_truth(x)),
    "~": lambda x: np.logical_not(x) if x.dtype == np.bool_ else ~x,
}


# ------------------------------------------------------------------------------ intrinsics

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# Maclaurin coefficients of erf(x) * sqrt(pi) / 2: (-1)^n / (n! (2n+1)).
_ERF_SERIES = [(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(18)]
# Numerical Recipes' Chebyshev fit of erfc (fractional error < 1.2e-7), used for |x| >= 1
# where erf = 1 - erfc loses nothing; below 1 the series is exact to ~1e-15.
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
             -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erf(x: Value) -> np.ndarray:
    """erf in float64, accurate to ~3e-8 absolute: fine as a reference for f32 erff."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    small = np.minimum(z, 1.0)
    z2 = small * small
    series = np.zeros_like(small)
    for coefficient in reversed(_ERF_SERIES):
        series = series * z2 + coefficient
    series = series * small * _TWO_OVER_SQRT_PI
    big = np.maximum(z, 1.0)
    t = 1.0 / (1.0 + 0.5 * big)
    poly = np.zeros_like(big)
    for coefficient in reversed(_ERFC_FIT):
        poly = poly * t + coefficient
    erfc = t * np.exp(-big * big + poly)
    magnitude = np.where(z < 1.0, series, 1.0 - erfc)
    return _unwrap(np.where(np.isnan(x), x, np.copysign(magnitude, x)))


def _rsqrt(x: Value) -> Value:
    x = np.asarray(x)
    return np.divide(np.array(1, dtype=x.dtype), np.sqrt(x))


def _fma(a: Value, b: Value, c: Value) -> Value:
    """``a * b + c`` rounded once to the arguments' type, as fmaf (and __hfma) do."""
    dtype = np.result_type(a, b, c)
    if dtype.itemsize >= 8:  # (f64: the product rounds first; no wider type holds it)
        return np.asarray(a, dtype) * np.asarray(b, dtype) + np.asarray(c, dtype)
    return fused_multiply_add(a, b, c, dtype)


def fused_multiply_add(a: Value, b: Value, c: Value, dtype) -> Value:
    """``a * b + c`` rounded once to ``dtype`` (f16 or f32), from arguments an f64 product
    holds exactly. The f64 sum ``s`` may itself be rounded, and rounding it again to
    ``dtype`` goes wrong exactly when ``s`` lands on a midpoint of ``dtype`` that the exact
    sum lies beside (``fmaf(1+2^-15, (1-2^-15)*2^-24, 1+2^-23)`` was one ulp off): the error
    ``e`` of the f64 sum (Knuth's TwoSum: ``s + e`` is exact) says on which side."""
    x, y, z = (np.asarray(v, np.float64) for v in (a, b, c))
    p = x * y  # exact: f32 (or f16) significands multiply within f64's
    s = p + z
    back = s - p
    e = (p - (s - back)) + (z - back)
    with np.errstate(over="ignore", invalid="ignore"):
        r = s.astype(dtype)
        r64 = r.astype(np.float64)
        toward = np.where(s > r64, np.inf, -np.inf).astype(dtype)
        other = np.nextafter(r, toward)  # the neighbour of r on s's side
        tie = (s == (r64 + other.astype(np.float64)) / 2) & (e != 0)
        beside = np.where(e > 0, np.maximum(r, other), np.minimum(r, other))
    out = np.where(tie, beside, r).astype(dtype)
    return out[()] if out.ndim == 0 else out


def _erf(x: Value) -> Value:
    return erf(x).astype(np.asarray(x).dtype)


def _erfc(x: Value) -> Value:
    a = np.asarray(x)
    wide = np.vectorize(math.erfc, otypes=[np.float64])(a.astype(np.float64))
    return wide.astype(a.dtype)


def _in_f64(fn: Callable) -> Callable:
    """``fn`` computed in float64 and rounded to the argument's type once."""
    def apply(*args: Value) -> Value:
        dtype = np.result_type(*args)
        with np.errstate(all="ignore"):
            return fn(*(np.asarray(a, np.float64) for a in args)).astype(dtype)
    return apply


def _pi_times(trig: Callable) -> Callable:
    """sinpi / cospi: the argument reduced modulo 2 exactly first, so that large arguments
    and integers (sinpi(n) = 0) come out as CUDA's and Metal's do."""
    return _in_f64(lambda x: trig(np.pi * np.fmod(x, 2.0)))


def _int_aware(float_fn: Callable, int_fn: Callable) -> Callable:
    def apply(*args: Value) -> Value:
        if np.asarray(args[0]).dtype.kind in "iub":
            return int_fn(*args)
        return float_fn(*args)
    return apply


INTRINSIC_FUNCS: dict[str, Callable[..., Value]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": _rsqrt, "tanh": np.tanh, "pow": np.power, "erf": _erf, "fma": _fma,
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil,
    # C's round() takes halves away from zero; rint() to even (the default rounding mode)
    "round": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x), "rint": np.rint,
    "trunc": np.trunc,
    # fmaxf/fminf return the non-NaN operand; integer max/min are plain.
    "max": _int_aware(np.fmax, np.maximum), "min": _int_aware(np.fmin, np.minimum),
    "abs": np.abs,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "atan2": np.arctan2, "log10": np.log10, "fmod": np.fmod, "copysign": np.copysign,
    "isnan": np.isnan, "isinf": np.isinf, "bitcast": None,  # (see make_intrinsic)
    "popcount": lambda x: _bits(x, lambda v, n: bin(v).count("1")),
    "clz": lambda x: _bits(x, lambda v, n: n - v.bit_length()),
    "ctz": lambda x: _bits(x, lambda v, n: (v & -v).bit_length() - 1 if v else n),
    "exp10": _in_f64(lambda x: np.power(10.0, x)), "sinpi": _pi_times(np.sin),
    "cospi": _pi_times(np.cos), "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "hypot": np.hypot, "cbrt": np.cbrt, "erfc": _erfc,
}
# intrinsics that take integers as they are (no float overload in between)
_ON_INTEGERS = ("max", "min", "abs", "popcount", "clz", "ctz")


def _bits(x: Value, count: Callable[[int, int], int]) -> Value:
    """An integer intrinsic element by element on the unsigned bits of ``x``."""
    a = np.asarray(x)
    width = 8 * a.dtype.itemsize
    unsigned = a.astype(np.dtype(f"u{a.dtype.itemsize}"))
    out = np.vectorize(lambda v: count(int(v), width), otypes=[np.int64])(unsigned)
    out = out.astype(a.dtype)
    return out[()] if out.ndim == 0 else out  # a uniform value stays a numpy scalar


def make_intrinsic(fn: str, t: ScalarType | VectorType) -> Callable[[list[Value]], Value]:
    """A function evaluating intrinsic ``fn`` for result type ``t``: half types compute in
    f32 and round back once (as CUDA's half math does), integers go through f64 for float
    functions."""
    st = scalar_of(t)
    func = INTRINSIC_FUNCS[fn]
    to_result = caster(t)
    if fn in ("isnan", "isinf"):  # a question about a float: asked of the argument as it is
        return lambda args: to_result(func(*_aligned([np.asarray(a) for a in args])))
    if fn == "bitcast":  # the argument's bits as the result type
        target = st.numpy

        def view(args: list[Value]) -> Value:
            out = np.ascontiguousarray(np.asarray(args[0])).view(target)
            return out[()] if out.ndim == 0 else out
        return view
    if fn == "fma" and st.name == "f16":  # __hfma: one rounding to half (not f32's first)
        return lambda args: to_result(fused_multiply_add(*_aligned(
            [np.asarray(a, np.float64) for a in args]), np.float16))
    if st.name in ("f16", "bf16") or (st.is_int and fn not in _ON_INTEGERS):
        wide = np.float32 if st.is_float else np.float64
        return lambda args: to_result(func(*_aligned([np.asarray(a, wide) for a in args])))
    dtype = st.numpy

    def apply(args: list[Value]) -> Value:
        work = [a if a.dtype == dtype else to_result(a) for a in args]
        return func(*_aligned(work))
    return apply


def call_intrinsic(fn: str, args: list[Value], t: ScalarType | VectorType) -> Value:
    """Evaluate intrinsic ``fn`` on ``args`` for result type ``t`` (see make_intrinsic)."""
    return make_intrinsic(fn, t)(args)


def _aligned(args: list[Value]) -> list[Value]:
    if len(args) < 2 or all(np.ndim(a) == np.ndim(args[0]) for a in args):
        return args
    if any(np.ndim(a) == 2 for a in args):
        return [np.asarray(a)[:, None] if np.ndim(a) == 1 else a for a in args]
    return args
