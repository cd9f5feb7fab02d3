"""CUDA's integer intrinsics (a mixin of the Lowerer), each written out in kir's integer
arithmetic so that every target computes the bits CUDA does: the byte dot products of
quantized inference kernels (``__dp4a``, ``__dp2a_lo``/``_hi``), byte permutes, bit reversal,
the high half of a product, funnel shifts, sums of absolute differences, 24-bit products
and integer averages (``__hadd(int, int)``; ``__hadd`` of halves is cuda_fp16.h's addition).

Semantics follow the CUDA Math API's "Integer Intrinsics" section. Signed right shifts are
arithmetic and narrowing conversions wrap, as on every GPU kir targets (and in kir's IR).
"""

from __future__ import annotations

from kir.errors import UnsupportedError
from kir.frontends.cuda import ctypes_ as ct
from kir.ir import Const, Expr, Select
from kir.ir.types import I32, I64, U32, U64, ScalarType

INT_AVERAGES = ("__hadd", "__rhadd", "__uhadd", "__urhadd")
# name -> (argument count, the arguments' type, the result's type)
INT_INTRINSICS: dict[str, tuple[int, ScalarType, ScalarType]] = {
    "__byte_perm": (3, U32, U32), "__brev": (1, U32, U32), "__brevll": (1, U64, U64),
    "__umulhi": (2, U32, U32), "__mulhi": (2, I32, I32), "__umul64hi": (2, U64, U64),
    "__funnelshift_l": (3, U32, U32), "__funnelshift_lc": (3, U32, U32),
    "__funnelshift_r": (3, U32, U32), "__funnelshift_rc": (3, U32, U32),
    "__sad": (3, I32, U32), "__usad": (3, U32, U32), "__mul24": (2, I32, I32),
    "__umul24": (2, U32, U32),
}
BYTE_DOTS = ("__dp4a", "__dp2a_lo", "__dp2a_hi")


def _bin(op: str, a: Expr, b: Expr | int) -> Expr:
    """``a op b`` in ``a``'s type (an int ``b`` a constant of it)."""
    return ct.binary(op, a, Const(b, a.type) if isinstance(b, int) else ct.convert(b, a.type))


def _signed_field(bits: Expr, low: int, width: int) -> Expr:
    """Bits ``low .. low + width`` of the u32 ``bits``, sign-extended to i32."""
    up = _bin("<<", bits, 32 - low - width) if 32 - low - width else bits
    return _bin(">>", ct.convert(up, I32), 32 - width)


def _unsigned_field(bits: Expr, low: int, width: int) -> Expr:
    """Bits ``low .. low + width`` of the u32 ``bits``, zero-extended to u32."""
    down = _bin(">>", bits, low) if low else bits
    return _bin("&", down, (1 << width) - 1)


def _reverse(bits: Expr, width: int) -> Expr:
    """``bits`` (u32 or u64) in reverse order: swap halves, then quarters, ... then pairs."""
    masks = {32: (0x0000FFFF, 0x00FF00FF, 0x0F0F0F0F, 0x33333333, 0x55555555),
             64: (0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF,
                  0x0F0F0F0F0F0F0F0F, 0x3333333333333333, 0x5555555555555555)}[width]
    shift = width // 2
    for mask in masks:
        bits = _bin("|", _bin("&", _bin(">>", bits, shift), mask),
                    _bin("<<", _bin("&", bits, mask), shift))
        shift //= 2
    return bits


class IntIntrinsicsMixin:
    """Integer intrinsics; relies on the Lowerer (operands, named temporaries, errors)."""

    def int_intrinsic(self, name: str, arg_trees: list, tree) -> Expr:
        """One of :data:`INT_INTRINSICS`: its arguments converted to the intrinsic's
        parameter type, as C converts them at the call."""
        count, arg_type, _ = INT_INTRINSICS[name]
        self._arity(name, arg_trees, count, count, tree)
        args = []
        for a in arg_trees:
            value = self.rvalue(a)
            if not (isinstance(value.type, ScalarType) and value.type.is_int):
                raise self.error(f"{name} takes integers, not {value.type}", a,
                                 UnsupportedError)
            args.append(self._named(ct.convert(value, arg_type), "arg"))
        if name == "__byte_perm":
            return self._byte_perm(*args)
        if name in ("__brev", "__brevll"):
            return _reverse(args[0], 32 if name == "__brev" else 64)
        if name in ("__umulhi", "__mulhi"):
            wide = U64 if name == "__umulhi" else I64
            product = _bin("*", ct.convert(args[0], wide), args[1])
            return ct.convert(_bin(">>", product, 32), arg_type)
        if name == "__umul64hi":
            return self._umul64hi(*args)
        if name.startswith("__funnelshift"):
            return self._funnel_shift(name, *args)
        if name in ("__sad", "__usad"):
            x, y, z = args
            difference = Select(_bin(">", x, y), _bin("-", x, y), _bin("-", y, x), arg_type)
            return _bin("+", ct.convert(z, U32), ct.convert(difference, U32)) \
                if name == "__sad" else _bin("+", z, difference)
        # __mul24 / __umul24: the low 32 bits of the product of the low 24 bits
        if name == "__mul24":
            low = [_signed_field(ct.convert(a, U32), 0, 24) for a in args]
        else:
            low = [_bin("&", a, 0xFFFFFF) for a in args]
        return ct.convert(_bin("*", ct.convert(low[0], U32), ct.convert(low[1], U32)),
                          arg_type)

    def byte_dot(self, name: str, arg_trees: list, tree) -> Expr:
        """``__dp4a(a, b, c)``: ``c`` plus the dot product of ``a``'s and ``b``'s four bytes
        (signed when ``a`` is a signed int, as CUDA picks the overload); ``__dp2a_lo`` /
        ``_hi``: ``a``'s two 16-bit halves with the low / high two bytes of ``b``."""
        self._arity(name, arg_trees, 3, 3, tree)
        values = [self.rvalue(a) for a in arg_trees]
        for value, a in zip(values, arg_trees):
            if not (isinstance(value.type, ScalarType) and value.type.is_int):
                raise self.error(f"{name} of a {value.type} value (kir reads the int "
                                 "overloads: four bytes packed in an int)", a,
                                 UnsupportedError)
        signed = values[0].type.is_signed
        bits = [self._named(ct.convert(v, U32), "packed") for v in values[:2]]
        field = _signed_field if signed else _unsigned_field
        acc = ct.convert(values[2], I32 if signed else U32)
        if name == "__dp4a":
            pairs = [(field(bits[0], 8 * k, 8), field(bits[1], 8 * k, 8)) for k in range(4)]
        else:
            first = 16 if name == "__dp2a_hi" else 0
            pairs = [(field(bits[0], 16 * k, 16), field(bits[1], first + 8 * k, 8))
                     for k in range(2)]
        for a, b in pairs:
            acc = _bin("+", acc, _bin("*", a, b))
        return acc

    def integer_average(self, name: str, arg_trees: list, tree) -> Expr | None:
        """``__hadd(int, int)`` (also ``__rhadd``, ``__uhadd``, ``__urhadd``): the average of
        two integers without overflow, rounded down (or up, the ``r`` forms); None for
        ``__hadd`` of halves, cuda_fp16.h's addition of the same name."""
        self._arity(name, arg_trees, 2, 2, tree)
        stmts, values = self.capture(lambda: [self.rvalue(a) for a in arg_trees])
        if not all(isinstance(v, Expr) and isinstance(v.type, ScalarType) and v.type.is_int
                   for v in values):
            if name == "__hadd":
                return None
            raise self.error(f"{name} takes integers", tree, UnsupportedError)
        for stmt in stmts:
            self.emit(stmt)
        signed = name in ("__hadd", "__rhadd")
        t, wide = (I32, I64) if signed else (U32, U64)
        total = ct.binary("+", ct.convert(values[0], wide), ct.convert(values[1], wide))
        if name in ("__rhadd", "__urhadd"):
            total = ct.binary("+", total, Const(1, wide))
        return ct.convert(ct.binary(">>", total, Const(1, wide)), t)

    def _byte_perm(self, x: Expr, y: Expr, s: Expr) -> Expr:
        """Byte ``n`` of the result is byte ``(s >> 4n) & 7`` of the eight bytes of ``y:x``."""
        both = self._named(_bin("|", _bin("<<", ct.convert(y, U64), 32), ct.convert(x, U64)),
                           "bytes")
        out: Expr | None = None
        for n in range(4):
            pick = _bin("&", _bin(">>", s, 4 * n) if n else s, 7)
            byte = _bin("&", _bin(">>", both, _bin("*", ct.convert(pick, U64), 8)), 0xFF)
            byte = ct.convert(byte, U32)
            byte = _bin("<<", byte, 8 * n) if n else byte
            out = byte if out is None else _bin("|", out, byte)
        assert out is not None
        return out

    def _umul64hi(self, a: Expr, b: Expr) -> Expr:
        """The high 64 bits of the 128-bit product, from 32-bit halves (schoolbook)."""
        half = [(self._named(_bin("&", v, 0xFFFFFFFF), "lo"),
                 self._named(_bin(">>", v, 32), "hi")) for v in (a, b)]
        (a_lo, a_hi), (b_lo, b_hi) = half
        low = self._named(_bin("*", a_lo, b_lo), "ll")
        cross1 = self._named(_bin("*", a_hi, b_lo), "hl")
        cross2 = self._named(_bin("*", a_lo, b_hi), "lh")
        # the middle column: both cross products' low halves and the carry out of low
        carried = _bin("+", _bin(">>", low, 32), _bin("&", cross1, 0xFFFFFFFF))
        middle = self._named(_bin("+", carried, _bin("&", cross2, 0xFFFFFFFF)), "mid")
        top = _bin("+", _bin("*", a_hi, b_hi), _bin(">>", cross1, 32))
        return _bin("+", _bin("+", top, _bin(">>", cross2, 32)), _bin(">>", middle, 32))

    def _funnel_shift(self, name: str, lo: Expr, hi: Expr, shift: Expr) -> Expr:
        """``hi:lo`` as 64 bits shifted left (``_l``: the high word) or right (``_r``: the low
        word) by ``shift & 31``, or by ``min(shift, 32)`` in the clamping ``c`` forms."""
        if name.endswith("c"):
            amount = Select(_bin("<", shift, 32), shift, Const(32, U32), U32)
        else:
            amount = _bin("&", shift, 31)
        both = _bin("|", _bin("<<", ct.convert(hi, U64), 32), ct.convert(lo, U64))
        amount = ct.convert(amount, U64)
        if name.startswith("__funnelshift_l"):
            return ct.convert(_bin(">>", _bin("<<", both, amount), 32), U32)
        return ct.convert(_bin(">>", both, amount), U32)


__all__ = ["BYTE_DOTS", "INT_AVERAGES", "INT_INTRINSICS", "IntIntrinsicsMixin"]
