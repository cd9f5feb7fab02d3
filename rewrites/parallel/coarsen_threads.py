"""coarsen-threads: each block computes `factor` former blocks along a grid dimension."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.errors import KirError
from kir.ir import (
    Alloc,
    Barrier,
    Binary,
    Block,
    Const,
    Continue,
    Declare,
    For,
    If,
    Kernel,
    Return,
    Special,
    Stmt,
    Var,
    While,
    transform,
)
from kir.ir.types import BOOL, U32
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice
from kir.rewrites.parallel.old_grid import old_grid
from kir.spec.sizeexpr import eval_size_expr


def _returns_to_continue(body: Block) -> Block | None:
    """``return`` -> ``continue`` (of the coarsening loop); None when a return sits inside a
    loop of the body, where ``continue`` would bind to that loop instead."""
    for n in body.walk():
        if isinstance(n, (For, While)) and any(isinstance(m, Return) for m in n.walk()):
            return None
    return transform(body, lambda n: Continue(loc=n.loc) if isinstance(n, Return) else None)


class CoarsenThreads(BaseRule):
    """Block coarsening: each thread block does the work of `factor` consecutive blocks.

    CUDA practice: thread/block coarsening (Kirk & Hwu, "Programming Massively Parallel
    Processors", 4th ed., ch. 6.3 "Thread coarsening"): fewer, fatter blocks amortize per-block
    setup (index math, shared-memory staging) and help when the grid far exceeds what the GPU
    runs at once. The body becomes ``for (c = 0; c < factor; ++c) { b = block.<d> * factor +
    c; if (b < old grid) body[block.<d> := b] }`` and ``grid.<d> = ceil(old / factor)``.

    Legality checked: blocks are independent in kir's model (they communicate only through
    atomics); shared arrays are hoisted out of the loop and a barrier ends each coarsened
    iteration so the next one cannot overwrite shared data still being read; a ``return`` in
    the body becomes ``continue`` (not allowed inside inner loops, nor together with
    barriers, where the lanes that left would miss them).

    The overrun guard (and any ``gridDim.<d>`` read) needs the old grid size at run time.
    When the old grid is a number, or is written over sizes that scalar parameters of the
    kernel carry (the spec says ``n_rows = { value = "rows" }``, so grid ``ceil(rows / 4)``
    is computed as ``(u32(n_rows) + 3) / 4``; see :mod:`kir.spec.size_to_ir`), the guard computes
    it from those parameters, and the kernel is right at every size. Only when it cannot be
    (softmax's grid ``rows`` has no ``rows`` parameter) is the old grid evaluated at the
    spec's sizes and baked in: the kernel is then SPECIALIZED to those sizes (its launch says
    ``specialized``, so validation does not try it at others, where it would skip blocks
    (larger grids) or run blocks past the old grid (smaller ones)).
    """

    name = "coarsen-threads"
    site_key = "dim"

    @dataclass(frozen=True)
    class Params:
        factor: int = choice(2, 4)

    def candidates(self, kernel: Kernel) -> list[str]:
        return [d for i, d in enumerate("xy") if kernel.launch.grid[i].strip() != "1"]

    def plan(self, kernel: Kernel, site: str) -> _Plan:
        return _plan(kernel)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        site, factor, plan = match.site, params.factor, match.plan
        axis = "xyz".index(site)
        old = kernel.launch.grid[axis]
        # The number of blocks is known at the spec's sizes only (the context).
        try:
            count = int(eval_size_expr(old, dict(ctx.sizes)))
        except KirError as exc:
            return NotApplicable(f"grid.{site} = {old!r} is not known: {exc}")
        if count <= 1:
            return NotApplicable(f"grid.{site} has {count} block(s)")
        if plan.refusal is not None:
            return plan.refusal
        allocs, rest, barriers, body = plan.allocs, plan.rest, plan.barriers, plan.body
        c = analysis.fresh_name(kernel, "coarse")
        b = analysis.fresh_name(kernel, f"block_{site}", {c})
        bvar = Var(b, U32)
        loc = next((s.loc for s in rest if s.loc is not None), None)
        # The old grid size at run time from the kernel's scalar parameters; else the number
        # at the spec's sizes (the kernel is then specialized to them).
        before = old_grid(kernel, site, count, ctx, {c, b}, loc)
        prelude, grid_size = list(before.prelude), before.value

        def subst(n):
            if isinstance(n, Special) and n.axis == site and n.kind == "block":
                return bvar
            if isinstance(n, Special) and n.axis == site and n.kind == "grid_dim":
                return grid_size
            return None

        body = transform(body, subst)
        index = Binary("+", Binary("*", Special("block", site), Const(factor, U32), U32),
                       Var(c, U32), U32)
        inner: list[Stmt] = [Declare(b, U32, index, loc=loc),
                             If(Binary("<", bvar, grid_size, BOOL), body, loc=loc)]
        if barriers and allocs:
            inner.append(Barrier("block", loc=loc))
        loop = For(analysis.next_loop_label(kernel), c, U32, Const(0, U32),
                   Binary("<", Var(c, U32), Const(factor, U32), BOOL),
                   Binary("+", Var(c, U32), Const(1, U32), U32), Block(tuple(inner)), loc=loc)
        grid = list(kernel.launch.grid)
        grid[axis] = f"ceil(({old}) / {factor})"
        specialized = kernel.launch.specialized or before.specialized
        return dataclasses.replace(
            kernel, body=Block(tuple(allocs) + tuple(prelude) + (loop,), loc=kernel.body.loc),
            launch=dataclasses.replace(kernel.launch, grid=tuple(grid),
                                       specialized=specialized))


@dataclass(frozen=True)
class _Plan:
    """The kernel's top-level arrays, its other statements and their body as the coarsening
    loop will run it (returns turned into continues), whether it synchronizes, and why it
    cannot be coarsened (None: it can). The refusal is kept in the plan rather than returned
    by the analysis so that the rule lists the same sites as before protocol v2 (issue 11
    tightens that separately)."""

    allocs: list[Alloc]
    rest: list[Stmt]
    barriers: bool
    body: Block
    refusal: NotApplicable | None = None


def _plan(kernel: Kernel) -> _Plan:
    """The body split for coarsening (the same along every grid dimension)."""
    allocs = [s for s in kernel.body.stmts if isinstance(s, Alloc)]
    rest = [s for s in kernel.body.stmts if not isinstance(s, Alloc)]
    barriers = any(isinstance(n, Barrier) for n in kernel.body.walk())
    body = Block(tuple(rest))

    def refused(reason: str) -> _Plan:
        return _Plan(allocs, rest, barriers, body, NotApplicable(reason))
    if any(isinstance(n, Alloc) for s in rest for n in s.walk()):
        return refused("a shared or local array is declared below the top level")
    has_return = any(isinstance(n, Return) for n in kernel.body.walk())
    if has_return and barriers:
        return refused("the kernel returns early and synchronizes")
    if has_return:
        converted = _returns_to_continue(body)
        if converted is None:
            return refused("a return inside a loop cannot become a continue")
        body = converted
    return _Plan(allocs, rest, barriers, body)


RULES = [CoarsenThreads()]
