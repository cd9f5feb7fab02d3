"""How counting hooks into the interpreter: compiled closures wrapped to report to a
:class:`~kir.interp.counters.Counters` (only when a run is counted), what one execution of an
expression costs, and the static register estimate taken at the start of a counted run."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from kir import ir
from kir.errors import KirError
from kir.interp.counters import Counters
from kir.interp.exprs import ExprFn, Hoist, compile_expr
from kir.interp.state import WARP, State
from kir.ir.types import VectorType

# Special-function ops by intrinsic, in units of one basic SFU op (exp2/log2/rsqrt class).
# Composite functions cost several (pow = log2 + mul + exp2; tanh and erf are exp-based
# polynomials): an estimate, matching how Metal's standard library expands them.
SFU_WEIGHT = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "sin": 1,
              "cos": 1, "pow": 2, "tanh": 2, "erf": 3, "tan": 2, "asin": 3, "acos": 3,
              "atan": 3, "atan2": 3, "log10": 1, "fmod": 2, "exp10": 1, "sinpi": 1, "cospi": 1,
              "asinh": 3, "acosh": 3, "atanh": 3, "hypot": 2, "cbrt": 3, "erfc": 3}
CHEAP_CALLS = {"max": 1, "min": 1, "abs": 1, "floor": 1, "ceil": 1, "fma": 2, "round": 1,
               "rint": 1, "trunc": 1, "copysign": 1, "isnan": 1, "isinf": 1, "popcount": 1,
               "clz": 1, "ctz": 1, "bitcast": 0}

BASE_REGISTERS = 8
"""Registers every thread holds besides its variables (ids, buffer addresses): estimate."""


def estimate_registers(kernel: ir.Kernel) -> int:
    """32-bit registers one thread needs, estimated from the kernel text: every declared
    variable (vector lanes and 64-bit values count twice or more), per-thread arrays, and a
    thread's share of each SIMD-group fragment (rows x cols / 32), plus
    :data:`BASE_REGISTERS`. Scoped: the variables of a block count with those of the
    blocks around it, and of sibling blocks (an ``if``'s arms, loops one after another,
    iterations written out one after another) only the largest counts, since their lives
    do not overlap. Still an upper bound within a scope; what matters is that more live
    state reads as more."""
    return BASE_REGISTERS + _scope_words(kernel.body, set())


def _scope_words(block: ir.Block, outer: set[str]) -> int:
    """Words the variables declared in ``block`` (not in ``outer``, the enclosing scopes'
    names) hold, plus the largest of its nested blocks'."""
    own: dict[str, int] = {}
    nested: list[ir.Block] = []
    for stmt in block.stmts:
        if isinstance(stmt, ir.Block):
            nested.append(stmt)
            continue
        words = _declared_words(stmt)
        if words and stmt.name not in outer:  # type: ignore[attr-defined]
            own[stmt.name] = max(own.get(stmt.name, 0), words)  # type: ignore[attr-defined]
        nested += [c for c in stmt.children() if isinstance(c, ir.Block)]
    names = outer | set(own)
    return sum(own.values()) + max((_scope_words(b, names) for b in nested), default=0)


def _declared_words(stmt: ir.Node) -> int:
    """Words of the variable, array or fragment ``stmt`` declares (0: none)."""
    if isinstance(stmt, ir.Declare):
        t = stmt.type
        width = t.count if isinstance(t, VectorType) else 1
        elem = t.elem if isinstance(t, VectorType) else t
        return width * -(-elem.nbytes // 4)
    if isinstance(stmt, ir.Alloc) and stmt.space == "local":
        width = stmt.elem.count if isinstance(stmt.elem, VectorType) else 1
        elem = stmt.elem.elem if isinstance(stmt.elem, VectorType) else stmt.elem
        return stmt.size * width * -(-elem.nbytes // 4)
    if isinstance(stmt, (ir.MatrixFill, ir.MatrixLoad)):
        t = stmt.type
        return -(-t.rows * t.cols * -(-t.elem.nbytes // 4) // WARP)
    return 0


class CountingHoist(Hoist):
    """A :class:`Hoist` that hoists nothing (every operation runs, and counts, where the
    kernel executes it) and carries the :class:`Counters` compiled closures report to."""

    def __init__(self, counters: Counters) -> None:
        super().__init__(set())
        self.counters = counters

    def invariant(self, expr: ir.Expr) -> bool:
        return False


def _arith_kind(expr: ir.Expr) -> tuple[str, int] | None:
    """(counter, weight) of one execution of ``expr``'s own operation, or None if free."""
    t = expr.type
    width = t.count if isinstance(t, VectorType) else 1
    elem = t.elem if isinstance(t, VectorType) else t
    if isinstance(expr, ir.Binary):
        operand = expr.left.type
        operand = operand.elem if isinstance(operand, VectorType) else operand
        if getattr(operand, "is_float", False):
            return ("fdiv" if expr.op == "/" else "flops", width)
        return ("int_ops", width)
    if isinstance(expr, ir.Unary):
        return ("flops" if getattr(elem, "is_float", False) else "int_ops", width)
    if isinstance(expr, ir.Select):
        return ("int_ops", width)
    if isinstance(expr, ir.Cast):
        source = expr.value.type
        source = source.elem if isinstance(source, VectorType) else source
        if getattr(source, "is_float", False) != getattr(elem, "is_float", False) \
                or getattr(source, "bits", 0) != getattr(elem, "bits", 0):
            return ("int_ops", width)
        return None
    if isinstance(expr, ir.Call):
        if expr.fn in SFU_WEIGHT:
            return ("sfu_fast" if expr.fast else "sfu", SFU_WEIGHT[expr.fn] * width)
        is_float = getattr(elem, "is_float", False)
        return ("flops" if is_float else "int_ops", CHEAP_CALLS.get(expr.fn, 1) * width)
    return None


def wrap_expr(counters: Counters, expr: ir.Expr, fn: ExprFn, loc: Any) -> ExprFn:
    """``fn`` (the compiled closure of ``expr``) reporting its operation to ``counters``."""
    if isinstance(expr, ir.Load):
        index = compile_expr(expr.index, loc, None)  # uncounted: the real load counts it
        count = expr.type.count if isinstance(expr.type, VectorType) else 1
        name = expr.buffer
        site = counters.new_site()

        def load(st: State, mask: np.ndarray) -> Any:
            value = fn(st, mask)  # raises first for out-of-bounds lanes
            counters.access(st, mask, st.memories[name], index(st, mask), count, "load",
                            site)
            return value
        return load
    if isinstance(expr, (ir.Shuffle, ir.WarpReduce)):
        reduction = isinstance(expr, ir.WarpReduce)

        def warp(st: State, mask: np.ndarray) -> Any:
            counters.warp_op(st, mask, reduction)
            return fn(st, mask)
        return warp
    kind = _arith_kind(expr)
    if kind is None:
        return fn
    counter, weight = kind
    fused = _fused(expr)

    def arith(st: State, mask: np.ndarray) -> Any:
        counters.alu(st, mask, counter, weight, fused)
        return fn(st, mask)
    return arith


def _fused(expr: ir.Expr) -> int:
    """Multiply-adds ``expr`` completes per lane: a float ``+``/``-`` with a float ``*``
    operand (Metal contracts it into one FMA, fast math being its default), or ``fma()``."""
    t = expr.type
    width = t.count if isinstance(t, VectorType) else 1
    if isinstance(expr, ir.Call) and expr.fn == "fma":
        return width
    if not (isinstance(expr, ir.Binary) and expr.op in ("+", "-")):
        return 0
    operand = expr.left.type
    operand = operand.elem if isinstance(operand, VectorType) else operand
    if not getattr(operand, "is_float", False):
        return 0
    products = (isinstance(side, ir.Binary) and side.op == "*"
                for side in (expr.left, expr.right))
    return width if any(products) else 0


def wrap_memory_stmt(counters: Counters, stmt: ir.Store | ir.Atomic,
                     fn: Callable[[State, np.ndarray], None]
                     ) -> Callable[[State, np.ndarray], None]:
    """A store or atomic statement's closure reporting its memory access."""
    index = compile_expr(stmt.index, stmt.loc, None)
    value_type = stmt.value.type
    count = value_type.count if isinstance(value_type, VectorType) else 1
    kind = "store" if isinstance(stmt, ir.Store) else "atomic"
    name = stmt.buffer
    site = counters.new_site()

    def run(st: State, mask: np.ndarray) -> None:
        try:  # before the statement: it may change what the index reads
            where = index(st, mask)
        except KirError:
            where = None
        fn(st, mask)
        if where is not None:
            counters.access(st, mask, st.memories[name], where, count, kind, site)
    return run
