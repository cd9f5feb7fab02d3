"""Analyses the parallel-mapping rules share: where a statement sits, what varies between the
lanes of a warp, and small integer evaluation of loop bounds.

``lane_varying_vars`` is a finer taint than :func:`kir.analysis.thread_dependent_vars`: it asks
whether a value may differ between the 32 lanes of one warp (not between any two threads of a
block), so ``thread.x / 32`` (with a block width that is a multiple of 32), ``warp`` and a
warp reduction's result are uniform, and a load is uniform when its index is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

from kir.analysis.walk import strip_casts
from kir.ir import (
    Assign,
    Atomic,
    Binary,
    Block,
    Break,
    Cast,
    Const,
    Continue,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Node,
    Return,
    Shuffle,
    Special,
    Stmt,
    Var,
    WarpReduce,
    While,
)
from kir.ir.types import I32 as _I32

# ------------------------------------------------------------------------------ position


@dataclass(frozen=True)
class Position:
    """Where a statement sits: its enclosing block, its index there, and the chain of
    enclosing statements (outermost first, each a For/While/If/Block)."""

    block: Block
    index: int
    ancestors: tuple[Stmt, ...]


def position_of(kernel: Kernel, target: Stmt) -> Position | None:
    """The position of ``target`` (matched by identity) in ``kernel``'s body, or None."""
    stack: list[tuple[Stmt, tuple[Stmt, ...]]] = [(kernel.body, ())]
    while stack:
        stmt, ancestors = stack.pop()
        if isinstance(stmt, Block):
            for i, s in enumerate(stmt.stmts):
                if s is target:
                    return Position(stmt, i, ancestors)
            stack.extend((s, ancestors + (stmt,)) for s in stmt.stmts)
        elif isinstance(stmt, (For, While)):
            stack.append((stmt.body, ancestors + (stmt,)))
        elif isinstance(stmt, If):
            stack.append((stmt.then, ancestors + (stmt,)))
            if stmt.orelse is not None:
                stack.append((stmt.orelse, ancestors + (stmt,)))
    return None


def stmts_in_order(body: Block) -> Iterator[Stmt]:
    """Every statement under ``body`` in pre-order (source order)."""
    return (n for n in body.walk() if isinstance(n, Stmt))


# ---------------------------------------------------------------------- lane uniformity


def is_thread_x(e: Expr) -> bool:
    """``thread.x``, possibly under integer casts."""
    e = strip_casts(e)
    return isinstance(e, Special) and e.kind == "thread" and e.axis == "x"


def _warp_index_form(e: Node, block: tuple[int, int, int]) -> bool:
    """``thread.x / (32k)``: the same for all lanes of a warp when the block width is a
    multiple of 32 (warps then never straddle rows of the block)."""
    return (isinstance(e, Binary) and e.op == "/" and is_thread_x(e.left)
            and isinstance(e.right, Const) and isinstance(e.right.value, int)
            and e.right.value > 0 and e.right.value % 32 == 0 and block[0] % 32 == 0)


def is_lane_varying(expr: Expr, tainted: set[str], block: tuple[int, int, int]) -> bool:
    """Whether ``expr`` may differ between the lanes of one warp."""
    stack: list[Node] = [expr]
    while stack:
        e = stack.pop()
        if _warp_index_form(e, block) or isinstance(e, WarpReduce):
            continue  # every lane of the warp gets the same result
        if isinstance(e, Special):
            if e.kind in ("lane",) or (e.kind == "thread" and e.axis == "x"):
                return True
            if e.kind == "thread" and block[0] % 32 != 0:
                return True
        elif isinstance(e, Shuffle):
            return True
        elif isinstance(e, Var) and e.name in tainted:
            return True
        stack.extend(e.children())
    return False


def _with_context(body: Block, varying) -> Iterator[tuple[Stmt, bool]]:
    """Statements with whether they sit under lane-varying control flow. A lane-varying
    ``return`` makes everything after it varying (some lanes have left)."""
    returned = False
    stack: list[tuple[Stmt, bool]] = [(body, False)]
    while stack:
        stmt, ctx = stack.pop()
        ctx = ctx or returned
        yield stmt, ctx
        if isinstance(stmt, Block):
            stack.extend((s, ctx) for s in reversed(stmt.stmts))
        elif isinstance(stmt, If):
            inner = ctx or varying(stmt.cond)
            stack.append((stmt.then, inner))
            if stmt.orelse is not None:
                stack.append((stmt.orelse, inner))
        elif isinstance(stmt, For):
            inner = ctx or varying(stmt.cond) or varying(stmt.init) or varying(stmt.update) \
                or _exits_varying(stmt.body, varying)
            stack.append((stmt.body, inner))
        elif isinstance(stmt, While):
            inner = ctx or varying(stmt.cond) or _exits_varying(stmt.body, varying)
            stack.append((stmt.body, inner))
        elif isinstance(stmt, Return) and ctx:
            returned = True


def _exits_varying(body: Block, varying) -> bool:
    """Whether a loop body has a break/continue/return under a condition (conservative:
    any conditional exit makes the loop's lanes diverge). One pass, tracking whether a node
    sits under an ``if`` (the loop nests of attention ask this thousands of times)."""
    stack: list[tuple[Node, bool]] = [(body, False)]
    while stack:
        node, under_if = stack.pop()
        if under_if and isinstance(node, (Break, Continue, Return)):
            return True
        inner = under_if or isinstance(node, If)
        stack.extend((child, inner) for child in node.children())
    return False


# lane_varying_vars of the last kernels asked about, by identity (a rule's analysis asks it
# of the same kernel once per site and per candidate statement): id -> (kernel, result).
_VARYING_CACHE: dict[int, tuple[Kernel, frozenset[str]]] = {}
_VARYING_CACHE_SIZE = 8


def lane_varying_vars(kernel: Kernel) -> set[str]:
    """Variables that may differ between lanes of a warp (a conservative taint)."""
    hit = _VARYING_CACHE.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return set(hit[1])
    tainted = _lane_varying_vars(kernel)
    if len(_VARYING_CACHE) >= _VARYING_CACHE_SIZE:
        _VARYING_CACHE.pop(next(iter(_VARYING_CACHE)))
    _VARYING_CACHE[id(kernel)] = (kernel, frozenset(tainted))
    return tainted


def _lane_varying_vars(kernel: Kernel) -> set[str]:
    block = kernel.launch.block
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False

        def varying(e: Expr) -> bool:
            return is_lane_varying(e, tainted, block)

        for stmt, ctx in _with_context(kernel.body, varying):
            targets: list[tuple[str, Expr | None]] = []
            if isinstance(stmt, Declare):
                targets.append((stmt.name, stmt.init if stmt.init is not None else Const(0, _I32)))
            elif isinstance(stmt, Assign):
                targets.append((stmt.name, stmt.value))
            elif isinstance(stmt, For):
                targets += [(stmt.var, stmt.init), (stmt.var, stmt.update)]
            elif isinstance(stmt, Atomic) and stmt.result:
                targets.append((stmt.result, None))
            for name, value in targets:
                if name not in tainted and (ctx or value is None or varying(value)):
                    tainted.add(name)
                    changed = True
    return tainted


def lane_varying_context(kernel: Kernel, target: Stmt) -> bool:
    """Whether ``target`` runs under lane-varying control flow (or after a lane-varying
    return), so that not all lanes of a warp execute it together."""
    tainted = lane_varying_vars(kernel)
    block = kernel.launch.block
    for stmt, ctx in _with_context(kernel.body, lambda e: is_lane_varying(e, tainted, block)):
        if stmt is target:
            return ctx
    return True


# --------------------------------------------------------------------- integer values


def eval_int(expr: Expr, values: Mapping[str, int | float],
             defs: Mapping[str, Expr] | None = None, depth: int = 0) -> int | None:
    """Evaluate an integer expression over constants, scalar values and (optionally) single
    definitions of locals, with C semantics (division truncates); None when unknown."""
    if depth > 50:
        return None
    e = expr
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Cast):
        return eval_int(e.value, values, defs, depth + 1)
    if isinstance(e, Var):
        if e.name in values and float(values[e.name]).is_integer():
            return int(values[e.name])
        if defs and e.name in defs:
            return eval_int(defs[e.name], values, defs, depth + 1)
        return None
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "/", "%"):
        a = eval_int(e.left, values, defs, depth + 1)
        b = eval_int(e.right, values, defs, depth + 1)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if e.op == "/" else a - q * b
    return None


