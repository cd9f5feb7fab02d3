"""Which variables a loop only accumulates into: the partial results a rule may give each
lane (or thread) of its own and combine after the loop."""

from __future__ import annotations

from kir import analysis
from kir.analysis import strip_casts
from kir.ir import Assign, Binary, Call, Expr, For, If, Var
from kir.ir.types import ScalarType

# ``if (t > acc) acc = t`` and its mirror images: which way round keeps the max.
_KEEPS = {(">", "term"): "max", ("<", "acc"): "max", ("<", "term"): "min",
          (">", "acc"): "min"}


def accumulators(loop: For) -> dict[str, str] | str:
    """``{acc: op}`` (op ``sum``, ``max`` or ``min``) for every variable declared outside
    ``loop`` that its body assigns, when each is only accumulated into — ``acc = acc + t``,
    ``acc = max(acc, t)`` (or min), or the running max written out, ``if (t > acc) acc = t``
    (``t`` read nowhere in ``acc``'s update but as itself) — and read nowhere else in the
    body; else why not. Each iteration's contribution then does not depend on the order of
    the others, so the iterations may be dealt to different lanes, each keeping a partial
    that starts at the op's identity. Sums are reassociated by that; max and min are exact
    (the written-out form equals ``max`` unless ``acc`` is NaN, which it never becomes from
    a non-NaN start)."""
    declared = analysis.declared_names(loop.body) | {loop.var}
    ops: dict[str, str] = {}
    allowed: set[int] = set()  # the accumulator reads that are part of an accumulation
    accounted: set[int] = set()  # Assigns inside a written-out max/min
    for n in loop.body.walk():
        if isinstance(n, If):
            found = _kept_extreme(n)
            if found is not None and found[0] not in declared:
                acc, op, read = found
                accounted.add(id(n.then.stmts[0]))
                allowed.add(id(read))
                if ops.setdefault(acc, op) != op:
                    return f"{acc!r} is accumulated with two operators"
    for n in loop.body.walk():
        if not isinstance(n, Assign) or n.name in declared or id(n) in accounted:
            continue
        if not isinstance(n.value.type, ScalarType):
            return f"{loop.label} carries {n.name!r} from one iteration to the next"
        acc = Var(n.name, n.value.type)
        found = analysis.accumulation(n.value, acc)
        if found is None or n.name in analysis.used_vars(found[1]):
            return f"{loop.label} carries {n.name!r} from one iteration to the next"
        op = "sum" if found[0] == "+" else found[0]
        if ops.setdefault(n.name, op) != op:
            return f"{n.name!r} is accumulated with two operators"
        allowed.update(id(c) for c in n.value.children() if c == acc)
    for n in loop.body.walk():
        if isinstance(n, Var) and n.name in ops and id(n) not in allowed:
            return f"{loop.label} reads the partial {n.name!r} other than to accumulate it"
    return ops


def _kept_extreme(stmt: If) -> tuple[str, str, Var] | None:
    """``(acc, op, the Var read in the test)`` for ``if (t > acc) acc = t`` (max) and its
    mirror images and min forms, with no else."""
    cond = stmt.cond
    if stmt.orelse is not None or len(stmt.then.stmts) != 1 \
            or not isinstance(stmt.then.stmts[0], Assign) or not isinstance(cond, Binary):
        return None
    assign = stmt.then.stmts[0]
    for side, acc, term in (("acc", cond.left, cond.right), ("term", cond.right, cond.left)):
        if isinstance(acc, Var) and acc.name == assign.name and cond.op in (">", "<", ">=", "<=") \
                and strip_casts(term) == strip_casts(assign.value) \
                and assign.name not in analysis.used_vars(term):
            return assign.name, _KEEPS[(cond.op[0], side)], acc
    return None


def combine(op: str, left: Expr, right: Expr) -> Expr:
    """``left op right`` for a reduction operator (sum, max, min)."""
    t = left.type
    return Binary("+", left, right, t) if op == "sum" else Call(op, (left, right), t)
