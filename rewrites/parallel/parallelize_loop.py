"""parallelize-loop: turn an independent serial loop into a grid dimension."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.rewrites.parallel.blocks import block_private_buffers, cross_iteration_conflicts

from kir import analysis
from kir.analysis import single_defs
from kir.analysis.deps import all_deps, dependence_graph, private_buffers
from kir.analysis.parallel import eval_int
from kir.errors import KirError
from kir.ir import (
    Alloc,
    Atomic,
    Barrier,
    Binary,
    Cast,
    Const,
    Declare,
    For,
    If,
    Kernel,
    Return,
    Special,
    Store,
    Var,
)
from kir.ir.fold import fold_expr
from kir.ir.types import PointerType
from kir.rules import LoopRule, Match, NotApplicable, RuleContext, choice
from kir.spec.sizeexpr import eval_size_expr


def _shared_names(kernel: Kernel) -> set[str]:
    names = {n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "shared"}
    return names | {p.name for p in kernel.params
                    if isinstance(p.type, PointerType) and p.type.space == "shared"}


def _trip_count(kernel: Kernel, canon: analysis.CanonicalLoop,
                ctx: RuleContext) -> tuple[str, int] | None:
    """The trip count as a grid string: a size name when the bound is a scalar parameter
    named like a size with that value, else the number under ``ctx``'s values."""
    values = dict(ctx.sizes)
    values.update({k: v for k, v in ctx.scalars.items()})
    defs = single_defs(kernel)
    start = eval_int(canon.start, values, defs)
    stop = eval_int(canon.stop, values, defs)
    if start is None or stop is None:
        return None
    stop += 1 if canon.inclusive else 0
    count = max(0, -(-(stop - start) // canon.step))
    bound = canon.stop
    while isinstance(bound, Cast):
        bound = bound.value
    if isinstance(canon.start, Const) and canon.start.value == 0 and canon.step == 1 \
            and not canon.inclusive and isinstance(bound, Var) \
            and kernel.param(bound.name) is not None:
        if ctx.sizes.get(bound.name) == stop:
            return bound.name, count
        # A scalar the spec computes from the sizes (Tr = ceil(N / T)): the grid takes the
        # same expression, so it grows with the sizes instead of keeping today's count.
        expr = ctx.scalar_exprs.get(bound.name)
        if expr is not None and _evaluates_to(expr, ctx.sizes, stop):
            return expr, count
    return str(count), count


def _evaluates_to(expr: str, sizes, value: int) -> bool:
    try:
        return int(eval_size_expr(expr, dict(sizes))) == value
    except KirError:
        return False


class ParallelizeLoop(LoopRule):
    """Turn an independent serial loop at the top of the kernel into a grid dimension.

    CUDA practice: FlashAttention-2 (Dao 2023, section 3.2, "parallelism over the sequence
    length") gives each block one query tile instead of looping over the tiles in one block
    per (batch, head): more blocks fill the GPU when batch * heads is small. In general, a
    loop whose iterations are independent becomes ``blockIdx.<dim>``.

    Legality checked: the loop is canonical with a trip count computable from the spec's
    values, a direct child of the kernel body, with only barriers after it and no global
    stores or atomics before it (each new block re-runs that prefix); its body has no return
    and no break/continue of its own; ``kir.analysis.deps`` finds no dependence carried by it (scalar
    reductions included); shared buffers it writes are private to each iteration, and global
    buffers are not shared between threads across barriers in it; the grid's <dim> was 1 and
    ``block.<dim>``/``grid_dim.<dim>`` are unused. When the bound is a runtime scalar the
    grid is the spec's expression for it (``Tr = "ceil(N / T)"`` gives grid ``ceil(N / T)``),
    so the kernel stays complete at every size; only a scalar with no such expression gives
    the number computed from the spec's values, and the kernel is then specialized to those
    sizes (a guard ``if (var < stop)`` keeps it safe, not complete, at others).
    """

    name = "parallelize-loop"

    @dataclass(frozen=True)
    class Params:
        dim: str = choice("z", "y")

    def candidates(self, kernel: Kernel) -> list[str]:
        # Only a loop at the top of the body can spread over blocks.
        return [s.label for s in kernel.body.stmts if isinstance(s, For)]

    def plan_loop(self, kernel: Kernel, loop: For) -> _Plan | NotApplicable:
        stmts = kernel.body.stmts
        index = next((i for i, s in enumerate(stmts) if s is loop), None)
        if index is None:
            return NotApplicable(f"{loop.label} is not a loop at the top of the kernel body")
        canon = analysis.canonical(loop)
        if canon is None:
            return NotApplicable(f"{loop.label} is not a counted loop")
        # The axes whose block index or grid size the kernel reads (the first such read).
        read: dict[str, str] = {}
        for n in kernel.body.walk():
            if isinstance(n, Special) and n.kind in ("block", "grid_dim"):
                read.setdefault(n.axis, n.kind)
        shared = _shared_names(kernel)
        return _Plan(index, canon, read, shared, _shape_problem(kernel, index, shared))

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan: _Plan = match.plan
        dim, site = params.dim, match.site
        axis = "xyz".index(dim)
        if kernel.launch.grid[axis].strip() != "1":
            return NotApplicable(f"the grid's {dim} is already {kernel.launch.grid[axis]!r}")
        if dim in plan.grid_reads:
            return NotApplicable(f"the kernel already uses {plan.grid_reads[dim]}.{dim}")
        if plan.refusal is not None:
            return plan.refusal
        stmts = kernel.body.stmts
        index, canon = plan.index, plan.canon
        loop = canon.loop
        # The trip count and the dependences are judged at the spec's values (the context).
        trip = _trip_count(kernel, canon, ctx)
        if trip is None:
            return NotApplicable(f"the trip count of {site} is not known from the spec")
        why = _dependence(kernel, loop, ctx, plan.shared)
        if why:
            return NotApplicable(why)
        t = loop.type
        idx = Cast(Special("block", dim), t)
        value = fold_expr(Binary("+", canon.start,
                                 Binary("*", idx, Const(canon.step, t), t), t))
        new = [Declare(loop.var, t, value, loc=loop.loc), If(loop.cond, loop.body, loc=loop.loc)]
        grid = list(kernel.launch.grid)
        grid[axis] = trip[0]
        body = dataclasses.replace(kernel.body, stmts=stmts[:index] + tuple(new)
                                   + stmts[index + 1:])
        # A count computed from runtime values at the spec's sizes holds at those sizes only.
        baked = trip[0].isdigit() and bool(analysis.used_vars(canon.start)
                                           | analysis.used_vars(canon.stop))
        launch = dataclasses.replace(kernel.launch, grid=tuple(grid),
                                     specialized=kernel.launch.specialized or baked)
        return dataclasses.replace(kernel, body=body, launch=launch)


@dataclass(frozen=True)
class _Plan:
    """A canonical loop at position ``index`` of the kernel body, what the kernel reads of
    the grid, its shared arrays, and why the loop's place forbids the rewrite (None: it does
    not). The refusal is kept in the plan rather than returned by the analysis so that the
    rule lists the same sites as before protocol v2 (issue 11 tightens that separately)."""

    index: int
    canon: analysis.CanonicalLoop
    grid_reads: dict[str, str]  # axis -> "block" or "grid_dim", the first read of either
    shared: set[str]
    refusal: NotApplicable | None


def _shape_problem(kernel: Kernel, index: int, shared: set[str]) -> NotApplicable | None:
    """Why the loop at top-level position ``index`` cannot spread over blocks, whatever the
    spec's values: code after it, global writes before it, exits from it."""
    stmts = kernel.body.stmts
    loop = stmts[index]
    assert isinstance(loop, For)
    site = loop.label
    if any(not isinstance(s, Barrier) for s in stmts[index + 1:]):
        return NotApplicable(f"code after {site} would run once per iteration")
    for s in stmts[:index]:
        for n in s.walk():
            if isinstance(n, (Store, Atomic)) and n.buffer not in shared:
                return NotApplicable(f"global writes before {site} would repeat per block")
    if any(isinstance(n, Return) for n in loop.body.walk()):
        return NotApplicable(f"{site} returns from the kernel")
    if analysis.has_own_exit(loop):
        return NotApplicable(f"{site} has a break or continue of its own")
    return None


def _dependence(kernel: Kernel, loop: For, ctx: RuleContext, shared: set[str]) -> str | None:
    """Why the iterations of ``loop`` may not run in separate blocks, or None."""
    assume = {k: int(v) for k, v in ctx.scalars.items() if float(v).is_integer()}
    try:
        # Shared tiles refilled by every iteration (with the kernel's own barriers) carry
        # nothing between iterations once each iteration has a block of its own.
        block_private = block_private_buffers(kernel, loop.label, assume)
        graph = dependence_graph(kernel, loop.label, assume=assume, cross_thread=False,
                                 ignore=block_private)
        private = private_buffers(kernel, loop.label, assume)
    except (ValueError, KeyError, NotImplementedError) as exc:  # analysis gave up
        return f"dependence analysis failed: {exc}"
    for dep in all_deps(graph):
        if dep.direction and dep.direction[0] != "=":
            return f"{loop.label} carries a dependence on {dep.what}"
    written = analysis.buffers_written(loop.body)
    barriers = any(isinstance(n, Barrier) for n in loop.body.walk())
    shared_global = set()
    for buf in written:
        if buf in shared and buf not in private and buf not in block_private:
            return f"shared {buf!r} may carry values between iterations of {loop.label}"
        if buf not in shared and barriers and buf in analysis.buffers_read(loop.body):
            shared_global.add(buf)
    if shared_global:
        # The barriers order threads of different iterations; separate blocks do not, so
        # no element may be touched by two iterations (whichever threads run them).
        conflicts = cross_iteration_conflicts(kernel, loop.label, assume,
                                              frozenset(shared_global))
        if conflicts:
            return (f"threads of different iterations of {loop.label} share global "
                    f"{sorted(conflicts)[0]!r} across barriers")
    return None


RULES = [ParallelizeLoop()]
