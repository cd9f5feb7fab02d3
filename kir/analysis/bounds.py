"""Integer intervals of index expressions, for rules that must prove an access stays inside
an array (split-shared, stage-in-shared).

:func:`loop_env` walks a kernel and gives, for each statement, the ranges of the canonical
loop variables around it (from the loop's start and stop intervals); :func:`interval` bounds
an integer expression over those ranges, the thread indices (from the launch), the spec's
scalar values and single-definition locals. Conditions are ignored (a guarded access is
bounded as if unguarded, which is conservative). None means "not bounded".
"""

from __future__ import annotations

from typing import Iterator, Mapping

from kir.analysis.walk import canonical, single_defs
from kir.ir import Binary, Block, Cast, Const, Expr, For, If, Kernel, Special, Stmt, Var, While

Interval = tuple[int, int]


def interval(expr: Expr, kernel: Kernel, ranges: Mapping[str, Interval],
             values: Mapping[str, int | float], defs: Mapping[str, Expr] | None = None,
             depth: int = 0) -> Interval | None:
    """Inclusive bounds of integer ``expr`` (C semantics, no overflow) or None."""
    if depth > 60:
        return None
    defs = single_defs(kernel) if defs is None else defs

    def rec(e: Expr) -> Interval | None:
        return interval(e, kernel, ranges, values, defs, depth + 1)
    if isinstance(expr, Const) and isinstance(expr.value, int) and not isinstance(expr.value,
                                                                                  bool):
        return expr.value, expr.value
    if isinstance(expr, Cast):
        return rec(expr.value)
    if isinstance(expr, Var):
        if expr.name in ranges:
            return ranges[expr.name]
        if expr.name in values and float(values[expr.name]).is_integer():
            v = int(values[expr.name])
            return v, v
        if expr.name in defs:
            return rec(defs[expr.name])
        return None
    if isinstance(expr, Special):
        block = kernel.launch.block
        axis = "xyz".index(expr.axis) if expr.axis else 0
        if expr.kind == "thread":
            return 0, block[axis] - 1
        if expr.kind == "block_dim":
            return block[axis], block[axis]
        if expr.kind == "lane":
            return 0, 31
        if expr.kind == "warp_size":
            return 32, 32
        if expr.kind == "warp":
            return 0, max(0, (kernel.launch.threads_per_block - 1) // 32)
        return None
    if isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/", "%", ">>"):
        a, b = rec(expr.left), rec(expr.right)
        if a is None or b is None:
            return None
        if expr.op == "+":
            return a[0] + b[0], a[1] + b[1]
        if expr.op == "-":
            return a[0] - b[1], a[1] - b[0]
        if expr.op == "*":
            products = [x * y for x in a for y in b]
            return min(products), max(products)
        if b[0] != b[1] or b[0] <= 0 or a[0] < 0:
            return None  # only non-negative values by a positive constant
        c = b[0]
        if expr.op == "/":
            return a[0] // c, a[1] // c
        if expr.op == ">>":
            return a[0] >> c, a[1] >> c
        return (a[0], a[1]) if a[1] < c else (0, c - 1)
    return None


def loop_env(kernel: Kernel, values: Mapping[str, int | float]
             ) -> Iterator[tuple[Stmt, dict[str, Interval]]]:
    """Every statement with the ranges of the canonical loop variables enclosing it (a loop
    whose bounds are not known leaves its variable unbounded)."""
    defs = single_defs(kernel)
    stack: list[tuple[Stmt, dict[str, Interval]]] = [(kernel.body, {})]
    while stack:
        stmt, env = stack.pop()
        yield stmt, env
        if isinstance(stmt, Block):
            stack.extend((s, env) for s in reversed(stmt.stmts))
        elif isinstance(stmt, For):
            inner = dict(env)
            c = canonical(stmt)
            if c is not None:
                lo = interval(c.start, kernel, env, values, defs)
                hi = interval(c.stop, kernel, env, values, defs)
                if lo is not None and hi is not None:
                    inner[stmt.var] = (lo[0], hi[1] - (0 if c.inclusive else 1))
            stack.append((stmt.body, inner))
        elif isinstance(stmt, While):
            stack.append((stmt.body, env))
        elif isinstance(stmt, If):
            stack.append((stmt.then, env))
            if stmt.orelse is not None:
                stack.append((stmt.orelse, env))
