"""The constant a few lowered statements compute, when they compute one.

A ``constexpr`` function called with constants (``constexpr int V = div_up(D, 4);``, the
size of a register array) is inlined like any ``__device__`` function: a return variable
declared, the parameters bound, the result assigned. C++ evaluates such a call at compile
time, so kir must too where it needs a constant (an array's size, a template argument, a
``const`` local used as one). :func:`constant_of` runs the statements on constants only
(:func:`kir.ir.fold.fold_expr`, the interpreter's C semantics) and gives the value, or None
as soon as anything is not a constant or not a plain assignment to a variable the statements
declare themselves: a loop, a branch, memory, a caller's local.
"""

from __future__ import annotations

from kir.ir import Assign, Const, Declare, Expr, Stmt
from kir.ir.edit import substitute
from kir.ir.fold import fold_expr


def constant_of(stmts: list[Stmt], value: Expr) -> Const | None:
    """``value`` after ``stmts`` when both are straight-line arithmetic on constants."""
    known: dict[str, Const] = {}
    declared = {stmt.name for stmt in stmts if isinstance(stmt, Declare)}

    def evaluate(expr: Expr) -> Const | None:
        for name, const in known.items():
            expr = substitute(expr, name, const)
        folded = fold_expr(expr)
        return folded if isinstance(folded, Const) else None

    for stmt in stmts:
        if isinstance(stmt, Declare) and stmt.init is None:
            continue  # (a return variable: assigned below)
        if isinstance(stmt, Declare):
            target, expr = stmt.name, stmt.init
        elif isinstance(stmt, Assign) and stmt.name in declared:  # (not a caller's local)
            target, expr = stmt.name, stmt.value
        else:
            return None
        result = evaluate(expr)
        if result is None:
            return None
        known[target] = result
    return evaluate(value)
