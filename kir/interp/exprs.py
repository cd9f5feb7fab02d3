"""Compile kir expressions to Python closures ``f(state, mask) -> value``.

Compiling once per run turns the per-node ``isinstance`` dispatch into plain calls, which
is what makes the interpreter fast enough to validate search candidates. Every closure
computes its value for all lanes of the chunk; ``mask`` only says which lanes are live
there, for the checks that must not fire on dead lanes (out-of-bounds loads) and for warp
operations. ``?:``, ``&&`` and ``||`` narrow the mask for the arm they guard, since C code
relies on ``i < n && x[i]`` not touching ``x[n]``.

Compilation and the closures recurse over expression depth; :func:`deep_recursion` raises
Python's limit for the duration of a run (the frontend can emit trees a few hundred deep).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from kir import ir
from kir.errors import KirError, Loc
from kir.interp.state import VECTOR_ALIGNED, Memory, State
from kir.ir import cops
from kir.ir.nodes import INTRINSIC_ARITY
from kir.ir.types import BOOL, ScalarType, VectorType

ExprFn = Callable[[State, np.ndarray], cops.Value]

RECURSION_LIMIT = 20000


@contextmanager
def deep_recursion(limit: int = RECURSION_LIMIT) -> Iterator[None]:
    """Temporarily allow ``limit`` Python frames (restored afterwards)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


class Hoist:
    """Finds subexpressions whose value is fixed for a whole chunk (built from constants,
    hardware indices and never-assigned scalar parameters) so they are computed once per
    chunk, not once per loop iteration: ``threadIdx.x * D + blockIdx.x * N`` in an index."""

    _PURE = (ir.Const, ir.Special, ir.Unary, ir.Binary, ir.Select, ir.Cast, ir.Call,
             ir.MakeVector, ir.Component)

    def __init__(self, fixed_vars: set[str]) -> None:
        self.fixed_vars = fixed_vars
        self.race_free: frozenset[int] = frozenset()  # see StmtCompiler
        self.memo: dict[int, bool] = {}
        self.slots = 0

    def invariant(self, expr: ir.Expr) -> bool:
        if id(expr) not in self.memo:
            # Post-order without recursion: a node is invariant when all children are.
            stack: list[tuple[ir.Node, bool]] = [(expr, False)]
            while stack:
                current, done = stack.pop()
                if id(current) in self.memo:
                    continue
                kids = current.children()
                if not done:
                    stack.append((current, True))
                    stack.extend((k, False) for k in kids)
                    continue
                if isinstance(current, ir.Var):
                    self.memo[id(current)] = current.name in self.fixed_vars
                else:
                    self.memo[id(current)] = isinstance(current, self._PURE) and all(
                        self.memo[id(k)] for k in kids)
        return self.memo[id(expr)]


def compile_expr(expr: ir.Expr, loc: Loc | None, hoist: Hoist | None = None) -> ExprFn:
    """A closure evaluating ``expr``; ``loc`` is the enclosing statement's, for errors.
    With ``hoist``, chunk-invariant subexpressions are evaluated once per chunk."""
    handler = _HANDLERS.get(type(expr))
    if handler is None:
        raise KirError(f"the interpreter does not support {type(expr).__name__} expressions",
                       loc)
    counters = getattr(hoist, "counters", None)  # set only when a run is instrumented
    if counters is not None:
        from kir.interp.count_hooks import wrap_expr

        return wrap_expr(counters, expr, handler(expr, loc, hoist), loc)
    if hoist is None or isinstance(expr, (ir.Const, ir.Var, ir.Special)) \
            or not hoist.invariant(expr):
        return handler(expr, loc, hoist)
    inner = handler(expr, loc, None)
    slot = hoist.slots
    hoist.slots += 1

    def cached(st: State, mask: np.ndarray) -> cops.Value:
        value = st.cache.get(slot)
        if value is None:
            value = st.cache[slot] = inner(st, st.full)
        return value
    return cached


def _const(e: ir.Const, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    value = cops.const_value(e.value, e.type)
    return lambda st, mask: value


def _var(e: ir.Var, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    name = e.name

    def run(st: State, mask: np.ndarray) -> cops.Value:
        try:
            return st.env[name]
        except KeyError:
            raise KirError(f"variable {name!r} is used before it is declared", loc) from None
    return run


def _special(e: ir.Special, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    key = (e.kind, e.axis)
    if e.kind not in ir.SPECIAL_KINDS:
        raise KirError(f"unknown hardware index {e.kind}.{e.axis}", loc)
    if e.type.numpy == np.uint32:
        return lambda st, mask: st.specials[key]
    to_type = cops.caster(e.type)
    return lambda st, mask: to_type(st.specials[key])


IndexFn = Callable[[State, Memory, int, np.ndarray], cops.Value]


def compile_index(expr: ir.Expr, loc: Loc | None, hoist: Hoist | None,
                  action: str) -> IndexFn:
    """A closure giving checked flat addresses of ``memory[expr]`` (see State.address).

    Indices are usually a chunk-invariant part plus lane-uniform loop counters
    (``threadIdx.x * D + k``). Then the invariant part's range, cached per chunk, proves
    the access in bounds with two Python comparisons, and the address costs one add."""
    plain = compile_expr(expr, loc, hoist)

    def generic(st: State, mem: Memory, count: int, mask: np.ndarray) -> cops.Value:
        return st.address(mem, plain(st, mask), count, mask, action, loc)
    if hoist is None or not isinstance(expr.type, ScalarType) or not expr.type.is_int:
        return generic
    terms = _sum_terms(expr)
    fixed = [t for t in terms if hoist.invariant(t)]
    moving = [t for t in terms if not hoist.invariant(t)]
    if not fixed or not moving:
        return generic
    fixed_fn = compile_expr(_sum_of(fixed), loc, hoist)
    moving_fns = [compile_expr(t, loc, hoist) for t in moving]
    slot = hoist.slots
    hoist.slots += 1

    first = moving_fns[0]
    rest = moving_fns[1:]
    counter = moving[0].name if isinstance(moving[0], ir.Var) else None

    def affine(st: State, mem: Memory, count: int, mask: np.ndarray) -> cops.Value:
        offset = st.env.get(counter) if counter is not None else None  # the common case
        if offset is None:
            offset = first(st, mask)
        for fn in rest:
            offset = offset + fn(st, mask)
        if type(offset) is not np.ndarray:
            key = (slot, id(mem))
            entry = st.cache.get(key)
            if entry is None:
                base = fixed_fn(st, st.full)
                low, high = (int(base.min()), int(base.max())) if type(base) is np.ndarray \
                    else (int(base), int(base))
                based = base if mem.base is None else mem.base + base
                # A vector access is aligned when every lane's base is and the offset is.
                aligned = count not in VECTOR_ALIGNED or not np.any(np.asarray(based) % count)
                entry = st.cache[key] = (low, high, based, aligned)
            low, high, based, aligned = entry
            i = int(offset)
            if low + i >= 0 and high + i <= mem.size - count and (
                    count not in VECTOR_ALIGNED or aligned and i % count == 0):
                return based + offset if i else based
        return st.address(mem, fixed_fn(st, mask) + offset, count, mask, action, loc)
    return affine


def _sum_terms(expr: ir.Expr) -> list[ir.Expr]:
    """The operands of a tree of same-typed integer ``+`` (wrapping adds reassociate)."""
    terms, stack = [], [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Binary) and e.op == "+" and e.type == expr.type \
                and e.left.type == expr.type and e.right.type == expr.type:
            stack.extend((e.right, e.left))
        else:
            terms.append(e)
    return terms


def _sum_of(terms: list[ir.Expr]) -> ir.Expr:
    total = terms[0]
    for t in terms[1:]:
        total = ir.Binary("+", total, t, total.type)
    return total


def _load(e: ir.Load, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    name = e.buffer
    count = e.type.count if isinstance(e.type, VectorType) else 1
    address = compile_index(e.index, loc, hoist, "load from")
    dtype = cops.np_dtype(e.type)
    to_type = cops.caster(e.type)
    offsets = np.arange(count, dtype=np.int64)
    marked = id(e) not in getattr(hoist, "race_free", ())

    def run(st: State, mask: np.ndarray) -> cops.Value:
        mem = st.memories.get(name) or st.memory(name, loc)
        addr = address(st, mem, count, mask)
        if marked and mem.space != "local":  # the tracker keeps to what it tracks
            st.races.load(mem, addr, mask, count, loc)
        if count == 1:
            # Clipping keeps dead lanes' stray addresses inside the array (checked above
            # for live lanes); a uniform address gives a uniform numpy scalar.
            out = mem.data.take(addr, mode="clip") if type(addr) is np.ndarray \
                else mem.data[addr]
        else:
            # An unsigned 64-bit address (a size_t offset) plus int64 offsets would be float64
            # in numpy: the address as int64 (live lanes' addresses are checked in bounds).
            out = mem.data.take(np.asarray(addr).astype(np.int64)[..., None] + offsets,
                                mode="clip")
            if out.ndim == 1:
                out = np.broadcast_to(out, (st.n, count))
        return out if out.dtype == dtype else to_type(out)
    return run


def _unary(e: ir.Unary, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    operand = compile_expr(e.operand, loc, hoist)
    fn = cops.UNARY.get(e.op)
    if fn is None:
        raise KirError(f"unknown unary operator {e.op!r}", loc)
    return lambda st, mask: fn(operand(st, mask))


def _binary(e: ir.Binary, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    left = compile_expr(e.left, loc, hoist)
    right = compile_expr(e.right, loc, hoist)
    fn = cops.BINARY.get(e.op)
    if fn is None:
        raise KirError(f"unknown binary operator {e.op!r}", loc)
    if e.op in ("&&", "||"):
        return _logical(e.op == "&&", fn, left, right)
    if isinstance(e.type, VectorType) or isinstance(e.left.type, VectorType) \
            or isinstance(e.right.type, VectorType):
        bf16 = e.type.elem.name == "bf16" if isinstance(e.type, VectorType) else False

        def vector(st: State, mask: np.ndarray) -> cops.Value:
            out = fn(*cops.align(left(st, mask), right(st, mask)))
            return cops.round_bf16(out) if bf16 else out
        return vector
    if e.type.name == "bf16":
        return lambda st, mask: cops.round_bf16(fn(left(st, mask), right(st, mask)))
    return lambda st, mask: fn(left(st, mask), right(st, mask))


def _logical(want: bool, fn: Callable, left: ExprFn, right: ExprFn) -> ExprFn:
    to_bool = cops.caster(BOOL)

    def logical(st: State, mask: np.ndarray) -> cops.Value:
        a = to_bool(left(st, mask))
        if type(a) is not np.ndarray:
            return fn(a, right(st, mask)) if bool(a) == want else a
        # The right side only runs where the left one did not decide (C short-circuit);
        # where no live lane needs it, ``a`` alone is the answer for every live lane.
        inner = mask & (a if want else ~a)
        if not cops.any_lane(inner):
            return a
        return fn(a, right(st, inner))
    return logical


def _select(e: ir.Select, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    cond = compile_expr(e.cond, loc, hoist)
    if_true = compile_expr(e.if_true, loc, hoist)
    if_false = compile_expr(e.if_false, loc, hoist)
    vector = isinstance(e.type, VectorType)
    to_bool = cops.caster(BOOL)

    def run(st: State, mask: np.ndarray) -> cops.Value:
        c = to_bool(cond(st, mask))
        if type(c) is not np.ndarray:
            return if_true(st, mask) if c else if_false(st, mask)
        # Each arm runs only on its lanes, as C evaluates only the chosen one.
        true_mask = mask & c
        false_mask = mask & ~c
        if not cops.any_lane(false_mask):
            return if_true(st, mask)
        if not cops.any_lane(true_mask):
            return if_false(st, mask)
        a = if_true(st, true_mask)
        b = if_false(st, false_mask)
        return np.where(c[:, None] if vector else c, a, b)
    return run


def _cast(e: ir.Cast, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    value = compile_expr(e.value, loc, hoist)
    to_type = cops.caster(e.type)
    if isinstance(e.type, VectorType):
        count = e.type.count

        def to_vector(st: State, mask: np.ndarray) -> cops.Value:
            v = to_type(value(st, mask))
            if np.ndim(v) < 2:  # a scalar splat to every component
                v = np.broadcast_to(np.asarray(st.lanes(v))[:, None], (st.n, count))
            return v
        return to_vector
    return lambda st, mask: to_type(value(st, mask))


def _call(e: ir.Call, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    if e.fn not in cops.INTRINSIC_FUNCS:
        raise KirError(f"unknown intrinsic {e.fn!r}", loc)
    arity = INTRINSIC_ARITY.get(e.fn, 1)
    if len(e.args) != arity:
        raise KirError(f"intrinsic {e.fn} takes {arity} argument(s), got {len(e.args)}", loc)
    args = [compile_expr(a, loc, hoist) for a in e.args]
    # ``fast`` forms compute the precise value: the interpreter is the reference.
    apply = cops.make_intrinsic(e.fn, e.type)
    if arity == 1:
        only = args[0]
        return lambda st, mask: apply([only(st, mask)])
    return lambda st, mask: apply([a(st, mask) for a in args])


def _shuffle(e: ir.Shuffle, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    if e.mode not in ir.SHUFFLE_MODES:
        raise KirError(f"unknown shuffle mode {e.mode!r}", loc)
    if e.width < 1 or e.width > 32 or e.width & (e.width - 1):
        raise KirError(f"shuffle width {e.width} is not a power of two up to 32", loc)
    value = compile_expr(e.value, loc, hoist)
    lane = compile_expr(e.lane, loc, hoist)
    mode, width = e.mode, e.width
    return lambda st, mask: st.shuffle(mode, value(st, mask), lane(st, mask), width, mask)


def _warp_reduce(e: ir.WarpReduce, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    if e.op not in ("sum", "max", "min"):
        raise KirError(f"unknown warp reduction {e.op!r}", loc)
    value = compile_expr(e.value, loc, hoist)
    op = e.op
    return lambda st, mask: st.warp_reduce(op, value(st, mask), mask)


def _make_vector(e: ir.MakeVector, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    if len(e.elems) != e.type.count:
        raise KirError(f"{e.type} built from {len(e.elems)} elements", loc)
    elems = [compile_expr(x, loc, hoist) for x in e.elems]
    to_elem = cops.caster(e.type.elem)

    def run(st: State, mask: np.ndarray) -> cops.Value:
        parts = [st.lanes(to_elem(f(st, mask))) for f in elems]
        return np.stack(parts, axis=1)
    return run


def _component(e: ir.Component, loc: Loc | None, hoist: Hoist | None) -> ExprFn:
    vector = compile_expr(e.vector, loc, hoist)
    index = e.index
    return lambda st, mask: np.asarray(vector(st, mask))[..., index]


_HANDLERS: dict[type, Callable[..., ExprFn]] = {
    ir.Const: _const, ir.Var: _var, ir.Special: _special, ir.Load: _load,
    ir.Unary: _unary, ir.Binary: _binary, ir.Select: _select, ir.Cast: _cast,
    ir.Call: _call, ir.Shuffle: _shuffle, ir.WarpReduce: _warp_reduce,
    ir.MakeVector: _make_vector, ir.Component: _component,
}
