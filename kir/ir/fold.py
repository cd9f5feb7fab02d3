"""Constant folding over kir IR, with the target's C semantics.

``fold_expr`` evaluates every subexpression whose operands are all constants, the way the GPU
(and :mod:`kir.interp`) would: i32/u32 wrap, integer division truncates toward zero, f32
arithmetic is rounded to f32 (numpy ``float32``), comparisons give ``bool``. It shares the
interpreter's scalar operations (:mod:`kir.ir.cops`), so a folded kernel computes exactly
what the unfolded one computes on the interpreter.

What is deliberately *not* folded: integer division or remainder by zero and shifts by a count
outside ``[0, bits)`` (C leaves them undefined; the hardware result is kept for run time),
bf16 and vector arithmetic, and transcendental calls (exp, log, ... may differ by an ulp
between numpy and the GPU's libm). ``min``/``max``/``abs`` fold.

A few identities that hold for every value also simplify: integer ``x + 0``, ``x - 0``,
``x * 1``, ``x * 0``, ``x / 1``; float ``x * 1`` and ``x / 1`` (exact in IEEE arithmetic);
``true && x``, ``false || x``; ``select`` with a constant condition. ``fold`` also removes
``if`` statements with constant conditions and ``for`` loops whose condition is false on
entry (statements only; kir expressions have no side effects, so dropping one is safe).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from kir.ir.nodes import (
    Binary,
    Block,
    Call,
    Cast,
    Const,
    Expr,
    For,
    If,
    Node,
    Select,
    Stmt,
    Unary,
    transform,
)
from kir.ir.types import ScalarType

_FOLDABLE_CALLS = ("min", "max", "abs")


def _scalar(expr: Expr) -> bool:
    return isinstance(expr.type, ScalarType) and expr.type.name != "bf16"


def _np(c: Const):
    from kir.ir.cops import const_value

    return const_value(c.value, c.type)


def _const_of(value, type_: ScalarType) -> Const | None:
    """A Const from a numpy scalar result, or None when it cannot be written as a literal."""
    value = np.asarray(value).astype(type_.numpy)[()]
    if type_.name == "bool":
        return Const(bool(value), type_)
    if type_.is_int:
        return Const(int(value), type_)
    return Const(float(value), type_)


def _fold_binary(node: Binary) -> Expr | None:
    from kir.ir.cops import BINARY

    left, right, op, t = node.left, node.right, node.op, node.type
    if not (_scalar(node) and _scalar(left) and _scalar(right)):
        return None
    if isinstance(left, Const) and isinstance(right, Const):
        if op in ("/", "%") and left.type.is_int and right.value == 0:
            return None
        if op in ("<<", ">>") and not (0 <= int(right.value) < left.type.bits):
            return None
        with np.errstate(all="ignore"):
            return _const_of(BINARY[op](_np(left), _np(right)), t)
    return _identity(node)


def _is(c: Expr, value) -> bool:
    return isinstance(c, Const) and not isinstance(c.value, bool) and c.value == value \
        and not (isinstance(c.value, float) and math.copysign(1.0, c.value) < 0 and value == 0)


def _identity(node: Binary) -> Expr | None:
    left, right, op, t = node.left, node.right, node.op, node.type
    if op == "&&" and isinstance(left, Const) and left.type.name == "bool":
        return right if left.value else left
    if op == "||" and isinstance(left, Const) and left.type.name == "bool":
        return left if left.value else right
    if not isinstance(t, ScalarType) or left.type != t or right.type != t:
        return None
    if t.is_int:
        if op == "+" and _is(right, 0) or op == "-" and _is(right, 0):
            return left
        if op == "+" and _is(left, 0):
            return right
        if op == "*" and (_is(right, 0) or _is(left, 0)):
            return Const(0, t)
        if op == "*" and _is(right, 1) or op == "/" and _is(right, 1):
            return left
        if op == "*" and _is(left, 1):
            return right
    elif t.is_float:
        if op in ("*", "/") and _is(right, 1.0):
            return left
        if op == "*" and _is(left, 1.0):
            return right
    return None


def _fold_node(node: Node) -> Node | None:
    from kir.ir.cops import INTRINSIC_FUNCS, UNARY, c_cast

    if isinstance(node, Binary):
        return _fold_binary(node)
    if isinstance(node, Unary) and isinstance(node.operand, Const) and _scalar(node) \
            and _scalar(node.operand):
        with np.errstate(all="ignore"):
            return _const_of(UNARY[node.op](_np(node.operand)), node.type)
    if isinstance(node, Cast) and isinstance(node.value, Const) and _scalar(node) \
            and _scalar(node.value):
        with np.errstate(all="ignore"):
            return _const_of(c_cast(_np(node.value), node.type), node.type)
    if isinstance(node, Select) and isinstance(node.cond, Const):
        return node.if_true if node.cond.value else node.if_false
    if isinstance(node, Call) and node.fn in _FOLDABLE_CALLS and _scalar(node) \
            and all(isinstance(a, Const) and _scalar(a) for a in node.args):
        with np.errstate(all="ignore"):
            return _const_of(INTRINSIC_FUNCS[node.fn](*[_np(a) for a in node.args]), node.type)
    return None


def fold_expr(expr: Expr) -> Expr:
    """``expr`` with every constant subexpression evaluated (C semantics; see module doc)."""
    return transform(expr, _fold_node)  # type: ignore[return-value]


def _fold_stmts(node: Node) -> Node | None:
    if not isinstance(node, Block):
        return _fold_node(node)
    out: list[Stmt] = []
    changed = False
    for stmt in node.stmts:
        if isinstance(stmt, If) and isinstance(stmt.cond, Const):
            branch = stmt.then if stmt.cond.value else stmt.orelse
            out.extend(branch.stmts if branch is not None else ())
            changed = True
        elif isinstance(stmt, For) and _false_on_entry(stmt):
            changed = True
        elif isinstance(stmt, Block):
            out.extend(stmt.stmts)
            changed = True
        else:
            out.append(stmt)
    return dataclasses.replace(node, stmts=tuple(out)) if changed else None


def _false_on_entry(loop: For) -> bool:
    from kir.ir.edit import substitute

    first = fold_expr(substitute(loop.cond, loop.var, loop.init))  # type: ignore[arg-type]
    return isinstance(first, Const) and not first.value


def fold(node: Node) -> Node:
    """Fold every expression under ``node`` (a kernel, statement or expression), and drop
    ``if``s with constant conditions (keeping the taken branch) and loops that never run.
    Nested blocks are spliced into their parent: local names are unique per kernel, so
    scopes can merge."""
    return transform(node, _fold_stmts)
