"""``__half2`` and ``__nv_bfloat162`` and the ``cuda_fp16.h`` / ``cuda_bf16.h`` intrinsics on
them (a mixin of the Lowerer).

Inference kernels move half-precision data two at a time: ``__half2`` is kir's ``f16x2``
vector (a ``const __half2*`` parameter is a buffer of f16 read two elements at a time, as a
``float4*`` is one of f32), and the paired intrinsics (``__hadd2``, ``__hfma2``,
``__half22float2``, ``__floats2half2_rn`` ...) are lowered lane by lane into f16 scalar
arithmetic and conversions, which every back end already prints (Metal's ``half2``, CUDA's
``half2``/``make_half2``). The scalar forms (``__hadd``, ``__hmul`` ...) are the same
operations on one lane, and ``a * b`` on two ``__half2`` is ``__hmul2`` (cuda_fp16.h's
operators). ``__nv_bfloat162`` is ``bf16x2`` the same way: cuda_bf16.h overloads the same
arithmetic names for it and names its conversions after bfloat16
(``__floats2bfloat162_rn``, ``__bfloat1622float2`` ...), read here as their half forms on
bf16 lanes.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct

from kir.errors import UnsupportedError
from kir.ir import Call, Component, Expr, MakeVector, Select
from kir.ir.types import BF16, BOOL, F16, F32, ScalarType, VectorType

HALF2 = VectorType(F16, 2)
BFLOAT162 = VectorType(BF16, 2)
FLOAT2 = VectorType(F32, 2)

# name -> (lanes the operation works on: 2 paired, 1 scalar; the C operator or function)
_ARITHMETIC = {
    "__hadd2": (2, "+"), "__hsub2": (2, "-"), "__hmul2": (2, "*"), "__h2div": (2, "/"),
    "__hfma2": (2, "fma"), "__hneg2": (2, "neg"), "__hmax2": (2, "max"), "__hmin2": (2, "min"),
    "__hadd": (1, "+"), "__hsub": (1, "-"), "__hmul": (1, "*"), "__hdiv": (1, "/"),
    "__hfma": (1, "fma"), "__hneg": (1, "neg"), "__hmax": (1, "max"), "__hmin": (1, "min"),
    # comparisons (a bool): NaN makes the ordered ones false, the unordered (-u) ones true
    "__heq": (1, "=="), "__hne": (1, "ne"), "__hlt": (1, "<"), "__hle": (1, "<="),
    "__hgt": (1, ">"), "__hge": (1, ">="), "__hequ": (1, "equ"), "__hneu": (1, "!="),
    "__hltu": (1, "ltu"), "__hleu": (1, "leu"), "__hgtu": (1, "gtu"), "__hgeu": (1, "geu"),
}
# an unordered comparison: the negation of the ordered one that is its complement
_UNORDERED = {"equ": "ne", "ltu": ">=", "leu": ">", "gtu": "<=", "geu": "<"}
_ARITY = {"fma": 3, "neg": 1}
# name -> (argument count, what is built)
_PACKING = {
    "__halves2half2": 2, "make_half2": 2, "__floats2half2_rn": 2, "__float2half2_rn": 1,
    "__half2half2": 1, "__float22half2_rn": 1, "__half22float2": 1, "__low2float": 1,
    "__high2float": 1, "__low2half": 1, "__high2half": 1, "__lowhigh2highlow": 1,
}
# cuda_bf16.h's conversions: the half form each is, on bf16 lanes
_BF16_NAMES = {
    "__floats2bfloat162_rn": "__floats2half2_rn", "__float2bfloat162_rn": "__float2half2_rn",
    "__bfloat162bfloat162": "__half2half2", "__float22bfloat162_rn": "__float22half2_rn",
    "__bfloat1622float2": "__half22float2", "__low2bfloat16": "__low2half",
    "__high2bfloat16": "__high2half", "__halves2bfloat162": "__halves2half2",
    "make_bfloat162": "make_half2",
}
# names both headers overload: the lanes are those of the first argument
_OVERLOADED = frozenset(_ARITHMETIC) | {"__low2float", "__high2float", "__lowhigh2highlow"}
HALF2_CALLS = frozenset(_ARITHMETIC) | frozenset(_PACKING) | frozenset(_BF16_NAMES)


class Half2Mixin:
    """``cuda_fp16.h`` paired intrinsics; relies on the Lowerer."""

    def half2_call(self, name: str, arg_trees: list, tree) -> Expr:
        """The value of intrinsic ``name`` (one of :data:`HALF2_CALLS`)."""
        elem = F16
        if name in _BF16_NAMES:
            elem, name = BF16, _BF16_NAMES[name]
        lanes, op = _ARITHMETIC.get(name, (0, ""))
        count = _ARITY.get(op, 2) if lanes else _PACKING[name]
        self._arity(name, arg_trees, count, count, tree)
        values = [self.rvalue(a) for a in arg_trees]
        if name in _OVERLOADED and _lane_type(values[0].type) == BF16:
            elem = BF16  # (cuda_bf16.h's overload: the first argument's lanes decide)
        pair_t = VectorType(elem, 2)

        def operand(k: int, want) -> Expr:
            return self._half_operand(values[k], arg_trees[k], want, name)

        if lanes:
            want = pair_t if lanes == 2 else elem
            args = [operand(k, want) for k in range(count)]
            if lanes == 1:
                return _lane_op(op, args)
            return MakeVector(tuple(_lane_op(op, [Component(a, k, elem) for a in args])
                                    for k in range(2)), pair_t)
        if name in ("__halves2half2", "make_half2", "__floats2half2_rn"):
            return MakeVector(tuple(ct.convert(v, elem) for v in values), pair_t)
        if name in ("__float2half2_rn", "__half2half2"):
            lane = ct.convert(operand(0, elem if name == "__half2half2" else F32), elem)
            return MakeVector((lane, lane), pair_t)
        if name == "__float22half2_rn":
            pair = operand(0, FLOAT2)
            return MakeVector(tuple(ct.convert(Component(pair, k, F32), elem)
                                    for k in range(2)), pair_t)
        pair = operand(0, pair_t)
        if name == "__half22float2":
            return MakeVector(tuple(ct.convert(Component(pair, k, elem), F32)
                                    for k in range(2)), FLOAT2)
        if name == "__lowhigh2highlow":
            return MakeVector((Component(pair, 1, elem), Component(pair, 0, elem)), pair_t)
        lane = Component(pair, 0 if "low" in name else 1, elem)
        return ct.convert(lane, F32) if name.endswith("float") else lane

    def half2_operator(self, op: str, values: list[Expr]) -> Expr | None:
        """``a * b``, ``a + b``, ``-a`` ... on ``__half2`` values (cuda_fp16.h defines
        these operators lane-wise), else None."""
        pair_t = values[0].type if values and isinstance(values[0], Expr) else None
        if op not in ("+", "-", "*", "/") or pair_t not in (HALF2, BFLOAT162) or not all(
                isinstance(v, Expr) and v.type == pair_t for v in values):
            return None
        held = [self._named(v, "h2") for v in values]  # each lane read on its own
        lane_op = "neg" if len(held) == 1 else op
        return MakeVector(tuple(_lane_op(lane_op, [Component(v, k, pair_t.elem) for v in held])
                                for k in range(2)), pair_t)

    def _half_operand(self, value: Expr, arg_tree, want, name: str) -> Expr:
        """An intrinsic's argument (lowered from ``arg_tree``) as a ``want``, held in a local
        when it is a vector computed here (its lanes are read one by one)."""
        if isinstance(want, VectorType):
            if value.type != want:
                raise self.error(f"'{name}' takes a {_c_name(want)}, not {value.type}",
                                 arg_tree, UnsupportedError)
            return self._named(value, "h2")  # its lanes are read one by one
        return ct.convert(value, want)


def _lane_type(t):
    return t.elem if isinstance(t, VectorType) else t


def _lane_op(op: str, args: list[Expr]) -> Expr:
    if op == "neg":
        return ct.unary("-", args[0])
    if op in _UNORDERED:
        return ct.unary("!", _lane_op(_UNORDERED[op], args))
    if op == "ne":  # ordered: false when either is NaN (C's != is true)
        return ct.binary("||", ct.binary("<", args[0], args[1]),
                         ct.binary(">", args[0], args[1]))
    if op == "fma":  # fused: one rounding to the half type, as __hfma
        lane_t = args[0].type
        return Call("fma", tuple(ct.convert(a, lane_t) for a in args), lane_t)
    if op in ("max", "min"):
        pick = ct.binary(">" if op == "max" else "<", args[0], args[1])
        lane: ScalarType = args[0].type  # type: ignore[assignment]
        return Select(ct.convert(pick, BOOL), args[0], args[1], lane)
    return ct.binary(op, args[0], args[1])


def _c_name(t) -> str:
    return {HALF2: "__half2", BFLOAT162: "__nv_bfloat162", FLOAT2: "float2"}.get(t, str(t))


__all__ = ["HALF2", "HALF2_CALLS", "Half2Mixin"]
