"""hoist-invariant: move loop-invariant declarations out of a loop."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    buffers_written,
    constant_trip_count,
    fresh_name,
    replace_loop,
    substitute,
)
from kir.ir import (
    Alloc,
    Assign,
    Binary,
    Block,
    Call,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Select,
    Shuffle,
    Stmt,
    Store,
    Unary,
    Var,
    WarpReduce,
)
from kir.ir.types import ScalarType
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
        written = assigned_vars(loop.body) | {loop.var}
        written_buffers = buffers_written(loop)
        loop = _named_invariant_loads(kernel, loop, written, written_buffers)
        if not any(isinstance(s, Declare) and s.init is not None for s in loop.body.stmts):
            return NotApplicable(f"{loop.label} declares nothing at the top of its body")
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
        arrays = {n.name: n.size for n in kernel.body.walk()
                  if isinstance(n, Alloc) and not n.dynamic and isinstance(n.size, int)}
        before = []
        for d in hoisted:
            if guard is not None and _may_fault(d.init, arrays):
                before.append(Declare(d.name, d.type, None, loc=d.loc))
                before.append(If(guard, Block((Assign(d.name, d.init, loc=d.loc),)),
                                 loc=d.loc))
            else:
                before.append(d)
        new_loop = dataclasses.replace(loop, body=dataclasses.replace(loop.body,
                                                                      stmts=tuple(kept)))
        return replace_loop(kernel, match.site, before + [new_loop])


def _named_invariant_loads(kernel: Kernel, loop: For, written: set[str],
                           written_buffers: set[str]) -> For:
    """``loop`` with each invariant load that a top-level statement of its body reads
    unconditionally (``y[i] = x[i] * scale[0]``: not under an ``if`` or a ``select`` arm,
    where hoisting would read what the original might not) given a ``let`` of its own just
    before that statement, so the declarations' hoisting moves it out as well. A load is
    invariant when its index reads nothing the loop writes and no statement in the loop
    writes its buffer (a write by another thread in the loop is one of those statements)."""
    taken: set[str] = set()
    stmts: list[Stmt] = []
    for stmt in loop.body.stmts:
        if isinstance(stmt, Declare) and stmt.init is not None \
                and _invariant(stmt.init, written, written_buffers):
            stmts.append(stmt)  # hoisted whole
            continue
        named: dict[Load, str] = {}

        def name_load(e: Expr) -> Expr | None:
            if isinstance(e, Load) and isinstance(e.type, ScalarType) \
                    and _invariant(e, written, written_buffers):
                if e not in named:
                    named[e] = fresh_name(kernel, f"{e.buffer}_inv", taken)
                    taken.add(named[e])
                return Var(named[e], e.type)
            return None

        if isinstance(stmt, Declare) and stmt.init is not None:
            stmt = dataclasses.replace(stmt, init=_rewrite_unconditional(stmt.init, name_load))
        elif isinstance(stmt, Assign):
            stmt = dataclasses.replace(stmt, value=_rewrite_unconditional(stmt.value, name_load))
        elif isinstance(stmt, Store):
            stmt = dataclasses.replace(stmt, index=_rewrite_unconditional(stmt.index, name_load),
                                       value=_rewrite_unconditional(stmt.value, name_load))
        stmts += [Declare(name, load.type, load, loc=stmt.loc) for load, name in named.items()]
        stmts.append(stmt)
    return dataclasses.replace(loop, body=dataclasses.replace(loop.body, stmts=tuple(stmts)))


def _rewrite_unconditional(expr: Expr, visit) -> Expr:
    """``expr`` with ``visit`` applied to the subexpressions every evaluation of ``expr``
    evaluates (not inside a ``select``'s arms or a short-circuit operator's right side)."""
    replaced = visit(expr)
    if replaced is not None:
        return replaced
    if isinstance(expr, Select):
        return dataclasses.replace(expr, cond=_rewrite_unconditional(expr.cond, visit))
    if isinstance(expr, Binary):
        right = expr.right if expr.op in ("&&", "||") else \
            _rewrite_unconditional(expr.right, visit)
        return dataclasses.replace(expr, left=_rewrite_unconditional(expr.left, visit),
                                   right=right)
    if isinstance(expr, Unary):
        return dataclasses.replace(expr, operand=_rewrite_unconditional(expr.operand, visit))
    if isinstance(expr, Cast):
        return dataclasses.replace(expr, value=_rewrite_unconditional(expr.value, visit))
    if isinstance(expr, Call):
        return dataclasses.replace(expr, args=tuple(_rewrite_unconditional(a, visit)
                                                    for a in expr.args))
    return expr  # loads are visited above; leaves and other nodes stay as they are


def _invariant(expr: Expr, written: set[str], written_buffers: set[str]) -> bool:
    for n in expr.walk():
        if isinstance(n, (Shuffle, WarpReduce)):
            return False
        if isinstance(n, Var) and n.name in written:
            return False
        if isinstance(n, Load) and n.buffer in written_buffers:
            return False
    return True


def _may_fault(expr: Expr, arrays: dict[str, int]) -> bool:
    """Whether evaluating ``expr`` could fault where the loop would not have run: a load
    (except a constant index inside an array the kernel declares: ``arrays``, name -> size)
    or an integer division."""
    for n in expr.walk():
        if isinstance(n, Load) and not (
                n.buffer in arrays and isinstance(n.index, Const)
                and isinstance(n.index.value, int) and 0 <= n.index.value < arrays[n.buffer]):
            return True
        if isinstance(n, Binary) and n.op in ("/", "%") and getattr(n.type, "is_int", False):
            return True
    return False


RULES = [HoistInvariant()]
