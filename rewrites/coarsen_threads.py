"""coarsen-threads: each block computes `factor` former blocks along a grid dimension."""

from __future__ import annotations

import dataclasses
from typing import Mapping

from kir import analysis
from kir.errors import KirError
from kir.ir import (Alloc, Barrier, Binary, Block, Const, Continue, Declare, For, If, Kernel,
                    Return, Special, Stmt, Var, While, transform)
from kir.rules import BaseRule, NotApplicable, ParamSpace, RuleContext
from kir.sizeexpr import eval_size_expr
from kir.types import BOOL, U32


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
    barriers, where the lanes that left would miss them). The old grid size is evaluated with
    the spec's sizes for the overrun guard, so the kernel is specialized to them.
    """

    name = "coarsen-threads"
    site_key = "dim"
    params = (ParamSpace("factor", (2, 4)),)

    def sites(self, kernel: Kernel) -> list[str]:
        return [d for i, d in enumerate("xy") if kernel.launch.grid[i].strip() != "1"]

    def apply(self, kernel: Kernel, site: str, params: Mapping[str, object],
              ctx: RuleContext) -> Kernel | NotApplicable:
        if site not in ("x", "y"):
            return NotApplicable(f"no grid dimension {site!r}")
        factor = int(params.get("factor", 2))  # type: ignore[arg-type]
        axis = "xyz".index(site)
        old = kernel.launch.grid[axis]
        try:
            count = int(eval_size_expr(old, dict(ctx.sizes)))
        except KirError as exc:
            return NotApplicable(f"grid.{site} = {old!r} is not known: {exc}")
        if count <= 1:
            return NotApplicable(f"grid.{site} has {count} block(s)")
        allocs = [s for s in kernel.body.stmts if isinstance(s, Alloc)]
        rest = [s for s in kernel.body.stmts if not isinstance(s, Alloc)]
        if any(isinstance(n, Alloc) for s in rest for n in s.walk()):
            return NotApplicable("a shared or local array is declared below the top level")
        barriers = any(isinstance(n, Barrier) for n in kernel.body.walk())
        has_return = any(isinstance(n, Return) for n in kernel.body.walk())
        if has_return and barriers:
            return NotApplicable("the kernel returns early and synchronizes")
        body = Block(tuple(rest))
        if has_return:
            converted = _returns_to_continue(body)
            if converted is None:
                return NotApplicable("a return inside a loop cannot become a continue")
            body = converted
        c = analysis.fresh_name(kernel, "coarse")
        b = analysis.fresh_name(kernel, f"block_{site}", {c})
        bvar = Var(b, U32)

        def subst(n):
            if isinstance(n, Special) and n.axis == site and n.kind == "block":
                return bvar
            if isinstance(n, Special) and n.axis == site and n.kind == "grid_dim":
                return Const(count, U32)
            return None

        body = transform(body, subst)
        loc = next((s.loc for s in rest if s.loc is not None), None)
        index = Binary("+", Binary("*", Special("block", site), Const(factor, U32), U32),
                       Var(c, U32), U32)
        inner: list[Stmt] = [Declare(b, U32, index, loc=loc),
                             If(Binary("<", bvar, Const(count, U32), BOOL), body, loc=loc)]
        if barriers and allocs:
            inner.append(Barrier("block", loc=loc))
        loop = For(analysis.next_loop_label(kernel), c, U32, Const(0, U32),
                   Binary("<", Var(c, U32), Const(factor, U32), BOOL),
                   Binary("+", Var(c, U32), Const(1, U32), U32), Block(tuple(inner)), loc=loc)
        grid = list(kernel.launch.grid)
        grid[axis] = f"ceil(({old}) / {factor})"
        return dataclasses.replace(
            kernel, body=Block(tuple(allocs) + (loop,), loc=kernel.body.loc),
            launch=dataclasses.replace(kernel.launch, grid=tuple(grid)))


RULES = [CoarsenThreads()]
