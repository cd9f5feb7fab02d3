"""hoist-invariant: move loop-invariant declarations out of a loop."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    buffers_written,
    constant_trip_count,
    replace_loop,
    substitute,
)
from kir.ir import (
    Assign,
    Binary,
    Block,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Shuffle,
    Stmt,
    Var,
    WarpReduce,
)
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


@dataclass(frozen=True)
class Hoisting:
    """A loop's top-level statements split into the invariant declarations to move out
    (``hoisted``, in order) and the rest (``kept``). ``hoisted`` may be empty: the loop is
    still listed as a site (refused when applied) so that the search sees the sites it saw
    before; a later change stops listing it."""

    loop: For
    hoisted: tuple[Declare, ...]
    kept: tuple[Stmt, ...]


class HoistInvariant(LoopRule):
    """Move loop-invariant declarations (and invariant loads) out of a loop.

    CUDA practice: loop-invariant code motion — compute once what every iteration computes
    the same way (Best Practices Guide, "Instruction optimization"; the classic compiler
    transformation nvcc applies only when it can prove no aliasing, which ``__restrict__``
    and ``const`` help with). Hoisted: ``let`` statements at the top level of the loop body
    whose value reads only variables not written in the loop (or already hoisted), and loads
    only from buffers no statement in the loop writes. Warp operations are never moved.
    A load (or integer division) may fault when the loop would not have run, so unless the
    loop provably runs, those declarations are guarded with the loop's entry condition.
    """

    name = "hoist-invariant"

    def plan_loop(self, kernel: Kernel, loop: For) -> Hoisting | NotApplicable:
        if not any(isinstance(s, Declare) and s.init is not None for s in loop.body.stmts):
            return NotApplicable(f"{loop.label} declares nothing at the top of its body")
        written = assigned_vars(loop.body) | {loop.var}
        written_buffers = buffers_written(loop)
        counts: dict[str, int] = {}
        for n in loop.body.walk():
            if isinstance(n, (Declare, Assign)):
                counts[n.name] = counts.get(n.name, 0) + 1
        hoisted: list[Declare] = []
        kept: list[Stmt] = []
        invariant: set[str] = set()
        for stmt in loop.body.stmts:
            if isinstance(stmt, Declare) and stmt.init is not None \
                    and counts.get(stmt.name) == 1 \
                    and _invariant(stmt.init, written - invariant, written_buffers):
                hoisted.append(stmt)
                invariant.add(stmt.name)
            else:
                kept.append(stmt)
        return Hoisting(loop, tuple(hoisted), tuple(kept))

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        loop, hoisted, kept = match.plan.loop, match.plan.hoisted, match.plan.kept
        if not hoisted:
            return NotApplicable(f"nothing invariant to hoist from {match.site}")
        runs = constant_trip_count(loop)
        guard = None if runs is not None and runs > 0 else \
            substitute(loop.cond, loop.var, loop.init)
        before = []
        for d in hoisted:
            if guard is not None and _may_fault(d.init):
                before.append(Declare(d.name, d.type, None, loc=d.loc))
                before.append(If(guard, Block((Assign(d.name, d.init, loc=d.loc),)),
                                 loc=d.loc))
            else:
                before.append(d)
        new_loop = dataclasses.replace(loop, body=dataclasses.replace(loop.body,
                                                                      stmts=tuple(kept)))
        return replace_loop(kernel, match.site, before + [new_loop])


def _invariant(expr: Expr, written: set[str], written_buffers: set[str]) -> bool:
    for n in expr.walk():
        if isinstance(n, (Shuffle, WarpReduce)):
            return False
        if isinstance(n, Var) and n.name in written:
            return False
        if isinstance(n, Load) and n.buffer in written_buffers:
            return False
    return True


def _may_fault(expr: Expr) -> bool:
    for n in expr.walk():
        if isinstance(n, Load):
            return True
        if isinstance(n, Binary) and n.op in ("/", "%") and getattr(n.type, "is_int", False):
            return True
    return False


RULES = [HoistInvariant()]
