"""Lowering of calls: CUDA builtins (barriers, shuffles, atomics, math, cache-hinted loads
and stores, vector constructors) and inlining of ``__device__`` functions (a Lowerer mixin).
"""

from __future__ import annotations

import math
import re

import numpy as np

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda import ptx_reads
from kir.frontends.cuda.cas_loops import cas_loop
from kir.frontends.cuda.sign_split_atomics import sign_split
from kir.frontends.cuda.lower_cub_ops import OPERATOR_KINDS
from kir.frontends.cuda.parser import normalize_name
from kir.frontends.cuda.warp_masks import mask_check
from kir.frontends.cuda.lower_half2 import HALF2_CALLS
from kir.frontends.cuda.lower_lambda import LambdaVal
from kir.frontends.cuda.lower_methods import MethodRef
from kir.frontends.cuda.lower_bits import MEMCPY, bitcast
from kir.frontends.cuda.lower_int_intrinsics import BYTE_DOTS, INT_AVERAGES, INT_INTRINSICS
from kir.frontends.cuda.lower_warp_sync import WARP_MATCHES, WARP_REDUCES
from kir.frontends.cuda.lower_math import COMPOSED, ROUNDING_TO_INT
from kir.frontends.cuda.values import (
    BufferInfo,
    CgVal,
    FunctionName,
    FunctorVal,
    MemRef,
    RefSym,
    StructType,
    StructVal,
)

from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import (
    Alloc,
    Assert,
    Atomic,
    Barrier,
    Fence,
    Binary,
    Block,
    Call,
    Const,
    Declare,
    Expr,
    If,
    Load,
    MakeVector,
    Select,
    Shuffle,
    Special,
    Store,
    Var,
    WarpReduce,
)
from kir.ir.nodes import BITWISE_ATOMICS, INTRINSIC_ARITY, WARP
from kir.ir.types import (
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    ScalarType,
    VectorType,
)

# name -> (intrinsic, fast, fixed type or None for C++ overload on the argument types)
MATH: dict[str, tuple[str, bool, ScalarType | None]] = {}
for _fn in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "pow", "erf", "sin", "cos",
            "floor", "ceil", "fma", "round", "rint", "trunc", "tan", "asin", "acos", "atan",
            "atan2", "log10", "fmod", "copysign", "exp10", "sinpi", "cospi", "asinh", "acosh",
            "atanh", "hypot", "cbrt", "erfc"):
    MATH[_fn + "f"] = (_fn, False, F32)
    MATH[_fn] = (_fn, False, None)
MATH.update({
    "fmaxf": ("max", False, F32), "fminf": ("min", False, F32), "fabsf": ("abs", False, F32),
    "fmax": ("max", False, None), "fmin": ("min", False, None), "fabs": ("abs", False, None),
    "max": ("max", False, None), "min": ("min", False, None), "abs": ("abs", False, None),
    # CUDA's integer min and max of a width and signedness
    "umin": ("min", False, U32), "umax": ("max", False, U32), "llmin": ("min", False, I64),
    "llmax": ("max", False, I64), "ullmin": ("min", False, U64), "ullmax": ("max", False, U64),
    "__expf": ("exp", True, F32), "__exp2f": ("exp2", True, F32), "__logf": ("log", True, F32),
    "__log2f": ("log2", True, F32), "__powf": ("pow", True, F32), "__sinf": ("sin", True, F32),
    "__cosf": ("cos", True, F32), "__tanhf": ("tanh", True, F32),
    "__frsqrt_rn": ("rsqrt", False, F32), "__fsqrt_rn": ("sqrt", False, F32),
    "__fmaf_rn": ("fma", False, F32), "hexp": ("exp", False, F16), "hsqrt": ("sqrt", False, F16),
    # cuda_fp16.h's half math (each computed in f16, as CUDA's are)
    "hrsqrt": ("rsqrt", False, F16), "hlog": ("log", False, F16), "hlog2": ("log2", False, F16),
    "hlog10": ("log10", False, F16), "hexp2": ("exp2", False, F16),
    "hexp10": ("exp10", False, F16), "hsin": ("sin", False, F16), "hcos": ("cos", False, F16),
    "hfloor": ("floor", False, F16), "hceil": ("ceil", False, F16),
    "htrunc": ("trunc", False, F16), "hrint": ("rint", False, F16),
    "nearbyintf": ("rint", False, F32), "nearbyint": ("rint", False, None),
    "__exp10f": ("exp10", True, F32), "__tanf": ("tan", True, F32),
    "__log10f": ("log10", True, F32),
})
ARITY = INTRINSIC_ARITY
# isnan(x), isinf(x): a bool about a float (C's macros and CUDA's overloads)
FLOAT_TESTS = ("isnan", "isinf")
# an integer's bits: name -> (intrinsic, width in bytes); CUDA's results are int
BIT_CALLS = {"__popc": ("popcount", 4), "__popcll": ("popcount", 8), "__clz": ("clz", 4),
             "__clzll": ("clz", 8), "__ffs": ("ffs", 4), "__ffsll": ("ffs", 8)}
HYPERBOLIC = ("coshf", "sinhf", "cosh", "sinh")
# sincosf(x, &s, &c): name -> (type, fast)
SINCOS = {"sincosf": (F32, False), "__sincosf": (F32, True), "sincos": (F64, False)}
CONVERSIONS = {
    "__float2half": F16, "__float2half_rn": F16, "__half2float": F32, "__int2float_rn": F32,
    "__float2int_rz": I32, "__uint2float_rn": F32, "__float2bfloat16": BF16,
    "__bfloat162float": F32, "__double2float_rn": F32, "__float2uint_rz": U32,
    # round-to-nearest and truncating forms of the same conversions (kir's own rounding)
    "__float2bfloat16_rn": BF16, "__int2half_rn": F16, "__half2int_rz": I32,
    "__ll2float_rn": F32,
}
# float to integer with a rounding mode: name -> (the rounding, the integer type)
ROUNDED = {f"__float2{kind}_{mode}": (fn, t) for kind, t in (("int", I32), ("uint", U32),
                                                              ("ll", I64), ("ull", U64))
           for mode, fn in (("rn", "rint"), ("rd", "floor"), ("ru", "ceil"))}
# the average of two integers without overflow (__hadd of two halves is an addition)
# a barrier that also counts a predicate over the block
# Memory fences by scope; the system's is the device's here (no host reads during a launch).
FENCES = {"__threadfence": "device", "__threadfence_system": "device",
          "__threadfence_block": "block"}
BLOCK_VOTES = ("__syncthreads_count", "__syncthreads_or", "__syncthreads_and")
# one 32-bit value's bits read as another type: name -> (from, to)
BIT_VIEWS = {"__int_as_float": (I32, F32), "__uint_as_float": (U32, F32),
             "__float_as_int": (F32, I32), "__float_as_uint": (F32, U32),
             "__double_as_longlong": (F64, I64), "__longlong_as_double": (I64, F64),
             "__half_as_ushort": (F16, U16), "__ushort_as_half": (U16, F16),
             "__half_as_short": (F16, I16), "__short_as_half": (I16, F16),
             "__bfloat16_as_ushort": (BF16, U16), "__ushort_as_bfloat16": (U16, BF16)}
# f32 arithmetic named with its rounding (round-to-nearest: the operators' own) or as fast
# division (computed as the plain division)
IEEE_OPS = {"__fadd_rn": "+", "__fsub_rn": "-", "__fmul_rn": "*", "__fdiv_rn": "/",
            "__fdividef": "/", "fdividef": "/"}
SHUFFLES = {"__shfl_sync": "idx", "__shfl_xor_sync": "xor", "__shfl_down_sync": "down",
            "__shfl_up_sync": "up"}
VOTES = ("__any_sync", "__all_sync", "__ballot_sync")
FULL_MASK = 0xFFFFFFFF
ATOMICS = {"atomicAdd": "add", "atomicMax": "max", "atomicMin": "min", "atomicExch": "exch",
           "atomicAnd": "and", "atomicOr": "or", "atomicXor": "xor", "atomicInc": "inc"}
VECTORS = {"make_float2": VectorType(F32, 2), "make_float3": VectorType(F32, 3),
           "make_float4": VectorType(F32, 4), "make_int2": VectorType(I32, 2),
           "make_int4": VectorType(I32, 4), "make_uint2": VectorType(U32, 2),
           "make_uint4": VectorType(U32, 4), "make_double2": VectorType(F64, 2),
           "make_uchar2": VectorType(U8, 2), "make_uchar3": VectorType(U8, 3),
           "make_uchar4": VectorType(U8, 4), "make_char2": VectorType(I8, 2),
           "make_char4": VectorType(I8, 4), "make_short2": VectorType(I16, 2),
           "make_short4": VectorType(I16, 4), "make_ushort2": VectorType(U16, 2),
           "make_ushort4": VectorType(U16, 4)}
LOADS = ("__ldg", "__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv")
STORES = ("__stcs", "__stcg", "__stwb", "__stwt")
UNSUPPORTED_CALLS = {
    "malloc": "device malloc", "free": "device free",
    "__activemask": "__activemask",
    "tex1Dfetch": "texture fetches", "tex1D": "texture fetches", "tex2D": "texture fetches",
    "tex3D": "texture fetches", "surf2Dwrite": "surface writes", "clock": "clock()",
    "clock64": "clock64()", "cudaMalloc": "host API calls in device code",
    "cudaMemcpy": "host API calls in device code", "__trap": "__trap",
    "atomicCAS": "atomicCAS", "atomicDec": "atomicDec",
    "__nanosleep": "__nanosleep", "__shfl": "__shfl without _sync (deprecated)",
}

UNSUPPORTED_HINTS = {
    "atomicDec": "atomicInc, atomicAdd and atomicSub are supported: a counter of the blocks done "
                 "can count up",
}


_LIMITS = re.compile(r"numeric_limits\s*<\s*([\w:]+)\s*>::(\w+)")


class CallMixin:
    """Calls to builtins and to ``__device__`` functions."""

    def lower_call(self, name: str, arg_trees: list, tree, discard: bool, targs=None):
        sym = self.lookup(name)
        if isinstance(sym, FunctorVal) and targs is None:  # op(a, b): a function object
            return self.call_functor(sym, arg_trees, tree, discard)
        if isinstance(sym, FunctionName) and targs is None:  # a function template parameter
            return self.inline_call(sym.name, arg_trees, tree, discard, sym.given or None)
        if isinstance(sym, LambdaVal) and targs is None:
            return self.call_lambda(sym, arg_trees, tree, discard)
        if isinstance(sym, CgVal) and sym.type.kind in OPERATOR_KINDS and targs is None:
            return self.cub_apply(sym.type, arg_trees, tree)  # arg_max(a, b)
        if isinstance(sym, MethodRef) and targs is None:  # a sibling member function
            return self.call_method(sym.this, sym.struct, sym.name, arg_trees, tree, discard)
        if isinstance(sym, StructVal) and targs is None:  # s(...): its operator()
            return self.call_method(sym, sym.type, "operator()", arg_trees, tree, discard)
        if sym is not None:
            raise self.error(f"'{name}' is not a function", tree)
        if targs is None:
            made = self.static_method_call(name, arg_trees, tree, discard)
            if made is not None:
                return made
        name = self.function_name(name)
        if name in self.functions:
            made = self._cas_loop_atomic(name, arg_trees, tree, discard)
            if made is not None:
                return made
            if not (name in VECTORS or name in MATH):
                return self.inline_call(name, arg_trees, tree, discard, targs)
            # a file's overloads of a builtin (helper_math.h's make_float3(float4),
            # fminf(float3, float3)): theirs when one takes these arguments, else CUDA's
            emitted, args = self.capture(lambda: [self.operand(a) for a in arg_trees])
            if self.overload_fits(name, args):
                self.out.extend(emitted)
                return self.inline_call(name, arg_trees, tree, discard, targs, args=args)
        if name.startswith("cg::"):
            value = self.cg_call(name[4:], arg_trees, tree, targs)
            if value is None:
                raise self.error(f"cooperative groups function '{name}' not supported", tree,
                                 UnsupportedError)
            return value
        if self.program.using_cg and "::" not in name:  # after `using namespace cg`
            value = self.cg_call(name, arg_trees, tree, targs)
            if value is not None:
                return value
        if "numeric_limits" in name:
            self._arity(name, arg_trees, 0, 0, tree)
            return self.limits_constant(name, tree)
        if name == "assert":
            self._arity(name, arg_trees, 1, 1, tree)
            return self._assert(arg_trees[0], tree)
        if name == "clamp":  # std::clamp (C++17): lo when x < lo, hi when hi < x, else x
            self._arity(name, arg_trees, 3, 3, tree)
            x, lo, hi = (self.rvalue(a) for a in arg_trees)
            t = ct.pick_math_type([x, lo, hi])
            x, lo, hi = (self._named(ct.convert(v, t), "clamp") for v in (x, lo, hi))
            return Select(ct.binary("<", x, lo), lo,
                          Select(ct.binary("<", hi, x), hi, x, t), t)
        if name == "atomicSub":
            return self._atomic_sub(arg_trees, tree, discard)
        if name in BLOCK_VOTES:
            return self._block_vote(name, arg_trees, tree)
        if name == "__syncthreads":
            return self._statement_call(Barrier("block", loc=self.cur_loc), arg_trees, 0, tree)
        if name == "__syncwarp":
            return self._statement_call(Barrier("warp", loc=self.cur_loc), arg_trees, 1, tree)
        if name in FENCES:
            return self._statement_call(Fence(FENCES[name], loc=self.cur_loc), arg_trees, 0, tree)
        if name in MATH:
            return self._math(name, arg_trees, tree)
        if name in FLOAT_TESTS:
            self._arity(name, arg_trees, 1, 1, tree)
            value = self.rvalue(arg_trees[0])
            if not (isinstance(value.type, ScalarType) and value.type.is_float):
                raise self.error(f"{name} of a {value.type} value", arg_trees[0],
                                 UnsupportedError)
            return Call(name, (value,), BOOL)
        if name in BIT_CALLS:
            return self._bit_call(name, arg_trees, tree)
        if name in SINCOS:
            return self._sincos(name, arg_trees, tree)
        if name in HYPERBOLIC:
            return self._hyperbolic(name, arg_trees, tree)
        if name in ("log1pf", "log1p", "expm1f", "expm1"):
            return self._near_one(name, arg_trees, tree)
        if name.startswith(ptx_reads.BUILTIN_PREFIX):  # a special register's asm read
            value = ptx_reads.register_value(name)
            if value is not None:
                return value
        if name == "printf":  # debugging output: dropped, as GPU builds drop asserts
            return Const(0, I32)  # (its arguments are not evaluated)
        if name in SHUFFLES:
            return self._shuffle(name, SHUFFLES[name], arg_trees, tree)
        if name in VOTES:
            return self._vote(name, arg_trees, tree)
        if name in ATOMICS:
            return self._atomic(ATOMICS[name], arg_trees, tree, discard)
        if name in ROUNDING_TO_INT or name in COMPOSED:
            return self.composed_math(name, arg_trees, tree)
        if name in WARP_REDUCES or name in WARP_MATCHES:
            return self.warp_sync_call(name, arg_trees, tree)
        if name in INT_INTRINSICS:
            return self.int_intrinsic(name, arg_trees, tree)
        if name in BYTE_DOTS:
            return self.byte_dot(name, arg_trees, tree)
        if name in INT_AVERAGES:
            made = self.integer_average(name, arg_trees, tree)
            if made is not None:
                return made
        if name in HALF2_CALLS:
            return self.half2_call(name, arg_trees, tree)
        if name in VECTORS:
            t = VECTORS[name]
            self._arity(name, arg_trees, t.count, t.count, tree)
            elems = tuple(self.coerce(self.rvalue(a), t.elem, a) for a in arg_trees)
            return MakeVector(elems, t)
        if name in LOADS:  # __ldcs(p): *p (a cache hint kir does not keep)
            self._arity(name, arg_trees, 1, 1, tree)
            p = self.pointer(arg_trees[0])
            if isinstance(p.view, StructType):
                return self.struct_in_memory(p.root, p.offset, p.view)
            return Load(p.root, p.offset, p.view)
        if name in STORES:
            self._arity(name, arg_trees, 2, 2, tree)
            p = self.pointer(arg_trees[0])
            if isinstance(p.view, StructType):
                self.assign_struct(self.struct_in_memory(p.root, p.offset, p.view),
                                   self.struct_value(p.view, arg_trees[1]), tree)
            else:
                self.write(MemRef(p.root, p.offset, p.view), self.rvalue(arg_trees[1]), tree)
            return Const(0, I32)
        if name in MEMCPY:
            return self.lower_memcpy(arg_trees, tree)
        if name in CONVERSIONS and CONVERSIONS[name] is not None:
            self._arity(name, arg_trees, 1, 1, tree)
            return ct.convert(self.rvalue(arg_trees[0]), CONVERSIONS[name])
        if name in BIT_VIEWS:
            return self._bit_view(name, arg_trees, tree)
        if name in ROUNDED:  # __float2int_rn: rounded as named, then converted
            self._arity(name, arg_trees, 1, 1, tree)
            fn, t = ROUNDED[name]
            x = ct.convert(self.rvalue(arg_trees[0]), F32)
            return ct.convert(Call(fn, (x,), F32), t)
        if name in IEEE_OPS:  # __fmul_rn(a, b): the operation at the default rounding
            self._arity(name, arg_trees, 2, 2, tree)
            a, b = (ct.convert(self.rvalue(t), F32) for t in arg_trees)
            return ct.binary(IEEE_OPS[name], a, b)
        if name in ("__frcp_rn", "__saturatef"):
            self._arity(name, arg_trees, 1, 1, tree)
            x = ct.convert(self.rvalue(arg_trees[0]), F32)
            if name == "__frcp_rn":
                return ct.binary("/", Const(1.0, F32), x)
            clamped = Call("min", (Call("max", (x, Const(0.0, F32)), F32), Const(1.0, F32)), F32)
            return clamped  # (fmaxf drops a NaN: __saturatef(NaN) is 0, as CUDA's)
        if name == "__pragma_unroll__":
            raise self.error("'#pragma unroll' must be followed by a for loop", tree)
        if name in UNSUPPORTED_CALLS or name in CONVERSIONS:
            what = UNSUPPORTED_CALLS.get(name, name)
            error = self.error(f"{what} not supported", tree, UnsupportedError)
            error.hint = UNSUPPORTED_HINTS.get(name, error.hint)
            raise error
        raise self.error(f"unknown function '{name}'", tree)

    def _arity(self, name: str, args: list, low: int, high: int, tree) -> None:
        if not low <= len(args) <= high:
            want = str(low) if low == high else f"{low} to {high}"
            raise self.error(f"{name} takes {want} arguments, not {len(args)}", tree)

    def _statement_call(self, stmt, args: list, max_args: int, tree):
        self._arity(tree.children[0].children[0], args, 0, max_args, tree)
        for a in args:
            self._pure(a, "the mask")
        self.emit(stmt)
        return Const(0, I32)

    def _pure(self, tree, what: str) -> Expr:
        stmts, value = self.capture(lambda: self.rvalue(tree))
        if stmts:
            raise self.error(f"{what} must be an expression without side effects", tree,
                             UnsupportedError)
        return value

    def _hyperbolic(self, name: str, arg_trees: list, tree) -> Expr:
        """``coshf``/``sinhf`` (and double forms) as ``(exp(x) ± exp(-x)) / 2``: kir's
        intrinsics have no hyperbolic functions but tanh."""
        self._arity(name, arg_trees, 1, 1, tree)
        x = self.rvalue(arg_trees[0])
        t = F32 if name.endswith("f") else ct.pick_math_type([x])
        if not isinstance(t, ScalarType) or not t.is_float:
            t = F64
        x = ct.convert(x, t)
        if not isinstance(x, (Var, Const)):
            tmp = self.fresh("hyp")
            self.emit(Declare(tmp, t, x, loc=self.cur_loc))
            x = Var(tmp, t)
        pos, neg = Call("exp", (x,), t), Call("exp", (ct.unary("-", x),), t)
        both = ct.binary("+" if name.startswith("cosh") else "-", pos, neg)
        return ct.binary("*", both, ct.convert(Const(0.5, F64), t))

    def _near_one(self, name: str, arg_trees: list, tree) -> Expr:
        """``log1p``/``expm1`` from ``log``/``exp`` with the classic corrections that keep
        them accurate near zero (Goldberg's ``log(u) * x / (u - 1)`` with ``u = 1 + x``;
        Kahan's ``(u - 1) * x / log(u)`` with ``u = exp(x)``)."""
        self._arity(name, arg_trees, 1, 1, tree)
        x = self.rvalue(arg_trees[0])
        t = F32 if name.endswith("f") else ct.pick_math_type([x])
        if not isinstance(t, ScalarType) or not t.is_float:
            t = F64
        x = self._named(ct.convert(x, t), "x")
        one = ct.convert(Const(1, I32), t)
        if name.startswith("log1p"):
            u = self._named(ct.binary("+", one, x), "u")
            exact = ct.binary("/", ct.binary("*", Call("log", (u,), t), x),
                              ct.binary("-", u, one))
        else:
            u = self._named(Call("exp", (x,), t), "u")
            um1 = ct.binary("-", u, one)
            exact = Select(ct.binary("==", um1, ct.unary("-", one)), ct.unary("-", one),
                           ct.binary("/", ct.binary("*", um1, x), Call("log", (u,), t)), t)
        return Select(ct.binary("==", u, one), x, exact, t)

    def _named(self, value: Expr, base: str) -> Expr:
        if isinstance(value, (Var, Const)):
            return value
        name = self.fresh(base)
        self.emit(Declare(name, value.type, value, loc=self.cur_loc))
        return Var(name, value.type)

    def _math(self, name: str, arg_trees: list, tree) -> Expr:
        fn, fast, fixed = MATH[name]
        arity = ARITY.get(fn, 1)
        self._arity(name, arg_trees, arity, arity, tree)
        args = [self.rvalue(a) for a in arg_trees]
        for a, t in zip(args, arg_trees):
            if not isinstance(a.type, ScalarType):
                raise self.error(f"{name} of a {a.type} value", t, UnsupportedError)
        if fixed is not None:
            t = fixed
        else:
            t = ct.pick_math_type(args)
            if t == BOOL:
                t = I32
            if not t.is_float and fn not in ("max", "min", "abs"):
                t = F64  # an integer argument selects the double overload
        return Call(fn, tuple(ct.convert(a, t) for a in args), t, fast)

    def _block_vote(self, name: str, arg_trees: list, tree) -> Expr:
        """``__syncthreads_count(p)`` (``_or``, ``_and``): a barrier after which every thread
        knows how many of the block's threads had ``p`` true — one shared counter, zeroed
        by the first thread, each true ``p`` atomically added, read after a barrier."""
        self._arity(name, arg_trees, 1, 1, tree)
        loc = self.cur_loc
        vote = self.fresh("vote")
        self.emit(Declare(vote, I32, Select(ct.to_bool(self.rvalue(arg_trees[0])),
                                            Const(1, I32), Const(0, I32), I32), loc=loc))
        slot = self.fresh("block_vote")
        self.prologue.append(Alloc(slot, I32, 1, "shared", False, loc=loc))
        self.buffers[slot] = BufferInfo(I32, "shared")
        first = ct.binary("&&", ct.binary("==", Special("thread", "x"), Const(0, U32)),
                          ct.binary("&&", ct.binary("==", Special("thread", "y"), Const(0, U32)),
                                    ct.binary("==", Special("thread", "z"), Const(0, U32))))
        count = self.fresh("vote_count")
        self.out.extend([
            Barrier("block", loc=loc),  # earlier reads of the counter are done
            If(first, Block((Store(slot, Const(0, I32), Const(0, I32), loc=loc),))),
            Barrier("block", loc=loc),
            Atomic("add", slot, Const(0, I32), Var(vote, I32), loc=loc),
            Barrier("block", loc=loc),
            Declare(count, I32, Load(slot, Const(0, I32), I32), loc=loc)])
        total = Var(count, I32)
        if name == "__syncthreads_or":
            return ct.convert(ct.binary("!=", total, Const(0, I32)), I32)
        if name == "__syncthreads_and":
            size = ct.binary("*", ct.binary("*", Special("block_dim", "x"),
                                            Special("block_dim", "y")), Special("block_dim", "z"))
            return ct.convert(ct.binary("==", ct.convert(total, U32), size), I32)
        return total

    def _bit_view(self, name: str, arg_trees: list, tree) -> Expr:
        """``__int_as_float(x)``: ``x``'s bits read as the other type (a constant's at
        compile time: ``__int_as_float(0xff800000)`` is -inf)."""
        self._arity(name, arg_trees, 1, 1, tree)
        source, target = BIT_VIEWS[name]
        return bitcast(ct.convert(self.rvalue(arg_trees[0]), source), target)

    def _bit_call(self, name: str, arg_trees: list, tree) -> Expr:
        """``__popc``, ``__clz``, ``__ffs`` (and their ``ll`` forms) on an integer's unsigned
        bits; ``__ffs(x)`` is ``x ? ctz(x) + 1 : 0``. The result is an int, as CUDA's."""
        self._arity(name, arg_trees, 1, 1, tree)
        fn, width = BIT_CALLS[name]
        value = self.rvalue(arg_trees[0])
        if not (isinstance(value.type, ScalarType) and value.type.is_int):
            raise self.error(f"{name} of a {value.type} value", arg_trees[0], UnsupportedError)
        bits = ct.convert(value, U32 if width == 4 else U64)
        if fn != "ffs":
            return ct.convert(Call(fn, (bits,), bits.type), I32)
        bits = self._named(bits, "bits")  # read twice below
        first = ct.binary("+", ct.convert(Call("ctz", (bits,), bits.type), I32), Const(1, I32))
        return Select(ct.binary("==", bits, Const(0, bits.type)), Const(0, I32), first, I32)

    def _sincos(self, name: str, arg_trees: list, tree) -> Expr:
        """``sincosf(x, &s, &c)``: ``s = sinf(x); c = cosf(x);`` with ``x`` read once
        first (it may be one of the outputs); each output a local, a reference or an
        element of a buffer or array."""
        self._arity(name, arg_trees, 3, 3, tree)
        t, fast = SINCOS[name]
        x = self.fresh("sincos_x")
        self.emit(Declare(x, t, ct.convert(self.rvalue(arg_trees[0]), t), loc=self.cur_loc))
        for out_tree, fn in ((arg_trees[1], "sin"), (arg_trees[2], "cos")):
            self.write(self._pointee(out_tree), Call(fn, (Var(x, t),), t, fast), out_tree)
        return Const(0, I32)

    def _pointee(self, tree):
        """What an output pointer argument points to: ``&v`` (a local, a reference, an
        element) or a pointer into a buffer or array."""
        if isinstance(tree, Tree) and tree.data == "addr":
            target = self.operand(tree.children[-1])
            return target.target if isinstance(target, RefSym) else target
        p = self.as_pointer(self.operand(tree), tree)
        if p is None:
            raise self.error("expected the address of a variable or an element", tree)
        return MemRef(p.root, p.offset, p.view)

    def _shuffle(self, name: str, mode: str, arg_trees: list, tree) -> Expr:
        """``__shfl*_sync``: kir's shuffles read the source lane whatever the mask says, so
        a mask other than the full one is checked as the kernel runs on the interpreter
        (:func:`kir.frontends.cuda.warp_masks.mask_check`)."""
        self._arity("shuffle", arg_trees, 3, 4, tree)
        mask = self._pure(arg_trees[0], "the shuffle mask")
        value = self.rvalue(arg_trees[1])
        lane = self.rvalue(arg_trees[2])
        if not ct.index_type_ok(lane.type):
            raise self.error("shuffle lane must be an integer", arg_trees[2])
        width: int | Expr = 32
        if len(arg_trees) == 4:
            w = self.rvalue(arg_trees[3])
            if not isinstance(w, Const):  # (shfl_scan's `width` argument)
                if mode == "xor":
                    raise self.error("an xor shuffle of a width known only as the kernel runs "
                                     "not supported", arg_trees[3], UnsupportedError)
                width = self._named(ct.convert(w, I32), "width")
                self.emit(Assert(ct.binary("==", ct.binary("&", width, ct.binary(
                    "-", width, Const(1, I32))), Const(0, I32)),
                    "a shuffle's width must be a power of two", loc=self.cur_loc))
            elif w.value not in (1, 2, 4, 8, 16, 32):
                raise self.error(f"shuffle width {w.value} (must be a power of two up to 32)",
                                 arg_trees[3])
            else:
                width = int(w.value)
        if not (isinstance(mask, Const) and mask.value == FULL_MASK):
            self._integer_mask(mask, "shuffle", arg_trees[0])
            self.emit(mask_check(name, mask, self.cur_loc))
        return self.warp_shuffle(mode, value, lane, width)

    def warp_shuffle(self, mode: str, value: Expr, lane: Expr, width: int | Expr) -> Expr:
        """A shuffle within groups of ``width`` lanes, as whole-warp shuffles where the width
        is less (Metal's only span, and a width known only as the kernel runs): idx reads
        its group's lane ``lane mod width``; up and down keep the lane's own value where the
        source lies outside its group. xor keeps its width (every target has it)."""
        if isinstance(width, int) and (width == WARP or mode == "xor"):
            return Shuffle(mode, value, lane, value.type, width)
        w = Const(width, I32) if isinstance(width, int) else width
        me = ct.convert(Special("lane"), I32)
        rank = self._named(ct.binary("&", me, ct.binary("-", w, Const(1, I32))), "rank")
        if mode == "idx":
            src = ct.binary("+", ct.binary("-", me, rank),
                            ct.binary("&", ct.convert(lane, I32),
                                      ct.binary("-", w, Const(1, I32))))
            return Shuffle("idx", value, src, value.type, WARP)
        # every lane shuffles (outside the select, whose arms may run on their lanes only)
        other = self._named(Shuffle(mode, value, lane, value.type, WARP), "shfl")
        step = ct.convert(lane, I32)
        inside = ct.binary("<", ct.binary("+", rank, step), w) if mode == "down" else \
            ct.binary(">=", rank, step)
        return Select(inside, other, value, value.type)

    def function_name(self, name: str) -> str:
        """A called name as the lowering knows it: ``std::min`` is ``min``, a function in a
        user's namespace (``ops::relu``) is found by its own name."""
        plain = normalize_name(name)
        if "::" in plain and not plain.startswith("cg::") and "numeric_limits" not in plain:
            last = plain.rsplit("::", 1)[-1]
            if last in self.functions or last in MATH or not self.functions.get(plain):
                return last
        return plain

    def _assert(self, cond_tree, tree) -> Expr:
        """``assert(cond)``: an Assert statement the interpreter checks (one that a pointer
        test proves true is dropped)."""
        stmts, (cond, _decided) = self.capture(lambda: self.truth_of(cond_tree))
        if stmts:
            raise self.error("assert whose condition has side effects not supported (GPU "
                             "builds may drop it)", cond_tree, UnsupportedError)
        if not (isinstance(cond, Const) and cond.value):
            self.emit(Assert(cond, loc=self.cur_loc))
        return Const(0, I32)

    def _atomic_sub(self, arg_trees: list, tree, discard: bool) -> Expr:
        """``atomicSub(p, v)`` is ``atomicAdd(p, -v)`` (integers wrap alike)."""
        self._arity("atomicSub", arg_trees, 2, 2, tree)
        p = self.pointer(arg_trees[0])
        value = self.coerce(self.rvalue(arg_trees[1]), p.view, arg_trees[1])
        if not isinstance(value.type, ScalarType) or not value.type.is_int:
            raise self.error("atomicSub on a non-integer buffer", tree)
        negated = ct.binary("-", ct.convert(Const(0, I32), value.type), value)
        return self._emit_atomic("add", p, negated, tree, discard)

    def _vote(self, name: str, arg_trees: list, tree) -> Expr:
        """Warp votes as warp reductions over the whole warp: ``__any_sync`` / ``__all_sync``
        are the max / min of the 0-or-1 predicate, ``__ballot_sync`` the sum of each voting
        lane's own bit (distinct bits: the sum is their OR). kir's warp operations cover the
        whole warp, so the mask must name every lane that votes, as CUDA requires of it
        (PTX ``vote.sync``: undefined for a lane outside the mask): a constant mask must be
        the full one; a mask computed as the kernel runs (the CUDA samples' reductions shift
        ``0xffffffff`` by a count worked out from the block size) is checked lane by lane
        on the interpreter (:func:`kir.frontends.cuda.warp_masks.mask_check`)."""
        self._arity(name, arg_trees, 2, 2, tree)
        mask = self._pure(arg_trees[0], "the vote mask")
        if isinstance(mask, Const) and mask.value != FULL_MASK:
            raise self.error(f"{name} over a partial mask ({mask.value:#x}) not supported: kir's "
                             "warp operations cover the whole warp (use 0xffffffff)",
                             arg_trees[0], UnsupportedError)
        if not isinstance(mask, Const):
            self._integer_mask(mask, "vote", arg_trees[0])
            self.emit(mask_check(name, mask, self.cur_loc))
        return self._vote_value(name, arg_trees[1])

    def _integer_mask(self, mask: Expr, what: str, tree) -> None:
        if not (isinstance(mask.type, ScalarType) and mask.type.is_int):
            raise self.error(f"the {what} mask is a {mask.type}, not an integer", tree)

    def _vote_value(self, name: str, pred_tree) -> Expr:
        pred = ct.to_bool(self.rvalue(pred_tree))
        if name == "__ballot_sync":
            bit = Binary("<<", Const(1, U32), Special("lane"), U32)
            return WarpReduce("sum", Select(pred, bit, Const(0, U32), U32), U32)
        flag = Select(pred, Const(1, I32), Const(0, I32), I32)
        return WarpReduce("max" if name == "__any_sync" else "min", flag, I32)

    def _atomic(self, op: str, arg_trees: list, tree, discard: bool) -> Expr:
        self._arity(op, arg_trees, 2, 2, tree)
        self.atomic_operand, views = [], None
        try:
            p = self.pointer(arg_trees[0])
        finally:
            self.atomic_operand, views = None, self.atomic_operand
        if op in BITWISE_ATOMICS and not (isinstance(p.view, ScalarType) and p.view.is_int):
            raise self.error(f"atomic {op} on a {p.view} buffer (C: integers only)", tree,
                             UnsupportedError)
        view = views[-1] if views else None  # the integer type the pointer was cast to
        if op == "inc" and getattr(view or p.view, "name", None) != "u32":
            raise self.error(f"atomicInc on a {view or p.view} buffer (CUDA: unsigned int only)",
                             tree, UnsupportedError)
        if view is not None and op in ("max", "min"):
            raise self.error(f"atomic {op} through a {view} pointer into a {p.view} buffer (the "
                             "comparison depends on the signedness)", arg_trees[0],
                             UnsupportedError)
        value = self.coerce(self.rvalue(arg_trees[1]), view or p.view, arg_trees[1])
        old = self._emit_atomic(op, p, ct.convert(value, p.view), tree, discard)
        return ct.convert(old, view) if view is not None and not discard else old

    def _cas_loop_atomic(self, name: str, arg_trees: list, tree, discard: bool) -> Expr | None:
        """A call of a helper that builds a float atomic from integer ones — an ``atomicCAS``
        retry loop (frontends/cuda/cas_loops.py), or atomic max and min on the value's bits
        split by its sign (sign_split_atomics.py) — as that atomic; None when ``name`` is no
        such helper. A helper calling ``atomicCAS`` in a way kir does not read is refused
        here, at the call."""
        fns = self.functions[name]
        loops = [cas_loop(fn.text) or sign_split(fn.text) for fn in fns]
        if not any(loops):
            if any("atomicCAS" in fn.text for fn in fns):
                refused = self.error(
                    f"'{name}' builds an atomic from an atomicCAS loop kir does not read",
                    tree, UnsupportedError)
                refused.hint = ("kir reads a retry loop whose new value is the max, min or sum "
                                "of the old value and the argument, or the argument itself "
                                "(written as the CUDA guide's atomicAdd for doubles); or call "
                                "atomicAdd / atomicMax / atomicMin / atomicExch on the float "
                                "buffer directly")
                raise refused
            return None
        if not all(loops) or len({(c.address, c.value) for c in loops}) != 1 \
                or len(arg_trees) != 2:
            return None
        address, value = loops[0].address, loops[0].value
        p = self.pointer(arg_trees[address])
        op = next((c.op for c in loops if c.element == str(p.view)), None)
        if op is None:
            raise self.error(f"'{name}' is an atomic on {loops[0].element} values, called on a "
                             f"{p.view} buffer", arg_trees[address], UnsupportedError)
        new = self.coerce(self.rvalue(arg_trees[value]), p.view, arg_trees[value])
        return self._emit_atomic(op, p, new, tree, discard)

    def _emit_atomic(self, op: str, p, value: Expr, tree, discard: bool) -> Expr:
        info = self.buffers[p.root]
        if info.const:
            raise self.error(f"atomic on const buffer '{p.root}'", tree)
        result = None
        if not discard:
            result = self.fresh("old")
            self.emit(Declare(result, p.view, loc=self.cur_loc))
        self.emit(Atomic(op, p.root, p.offset, value, result, loc=self.cur_loc))
        return Var(result, p.view) if result else Const(0, I32)

    # -------------------------------------------------------------- constants

    def limits_constant(self, name: str, tree) -> Expr:
        """``std::numeric_limits<T>::max()`` (and ``min``, ``lowest``, ``infinity``,
        ``epsilon``, ``quiet_NaN``) as a constant of type T."""
        found = _LIMITS.search(name)
        if found is None:
            raise self.error(f"'{name}' not supported", tree, UnsupportedError)
        t = self.named_type(found.group(1), tree) if found.group(1) not in ct.KEYWORD_TYPES \
            else ct.combine_type_words([found.group(1)])
        member = found.group(2)
        if not isinstance(t, ScalarType) or t == BOOL:
            raise self.error(f"numeric_limits of {t} not supported", tree, UnsupportedError)
        if t.is_float:
            info = np.finfo(np.float32 if t.name in ("f32", "bf16") else t.numpy)
            if t.name == "bf16":
                info = None
            values = {"infinity": math.inf, "quiet_NaN": math.nan}
            if info is not None:
                values.update({"max": float(info.max), "lowest": -float(info.max),
                               "min": float(info.tiny), "epsilon": float(info.eps)})
        else:
            info = np.iinfo(t.numpy)
            values = {"max": int(info.max), "min": int(info.min), "lowest": int(info.min)}
        if member not in values:
            raise self.error(f"numeric_limits<{t}>::{member} not supported", tree,
                             UnsupportedError)
        return Const(values[member], t)
