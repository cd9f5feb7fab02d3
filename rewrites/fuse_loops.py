"""fuse-loops: merge two adjacent loops with the same bounds into one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    canonical,
    declared_names,
    loops,
    rename_var,
    replace_stmt,
    used_vars,
)
from kir.analysis.deps import all_deps, dependence_graph
from kir.analysis.loop_edits import has_barrier, has_exit, int_assume, parent_block
from kir.ir import Block, For, Kernel
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


@dataclass(frozen=True)
class Pair:
    """Two adjacent loops to fuse. ``refusal``: why their shapes forbid it, for a site still
    listed so that the search sees the sites it saw before; a later change stops listing
    such pairs."""

    first: For
    second: For
    refusal: str = ""


class FuseLoops(LoopRule):
    """Fuse loop ``loop`` with the loop right after it when their bounds are the same.

    CUDA practice: loop fusion — one pass over the data instead of two, keeping values in
    registers between the producer and the consumer (Best Practices Guide, "Minimize data
    transfer" / kernel fusion; the fused softmax/layernorm kernels of Milakov & Gimelshein
    2018 and Apex). Legality (via :mod:`kir.analysis.deps`, the spec's integer scalars as
    facts): both loops canonical with equal start, bound and step; no barrier, break,
    continue or return in either; no scalar written by one and used by the other; in the
    fused loop, no dependence may run from a second-loop statement of an earlier iteration
    to a first-loop statement of a later one (iteration i of the second loop reads only what
    iterations <= i of the first wrote), and threads must not share the data the two loops
    touch (that would need a barrier between them). Non-affine indices count as conflicts.
    """

    name = "fuse-loops"

    def candidates(self, kernel: Kernel) -> list[str]:
        """Every loop directly followed by a loop, block by block."""
        out = []
        for n in kernel.body.walk():
            if isinstance(n, Block):
                for a, b in zip(n.stmts, n.stmts[1:]):
                    if isinstance(a, For) and isinstance(b, For):
                        out.append(a.label)
        return out

    def plan_loop(self, kernel: Kernel, first: For) -> Pair | NotApplicable:
        """The pair and its shape checks; the dependence test needs the spec's scalars
        (``ctx``), so it runs in ``apply``."""
        block = parent_block(kernel, first)
        if block is None:
            return NotApplicable(f"no loop {first.label}")
        at = next(k for k, s in enumerate(block.stmts) if s is first)
        second = block.stmts[at + 1] if at + 1 < len(block.stmts) else None
        if not isinstance(second, For):
            return NotApplicable(f"{first.label} is not followed by a loop")
        return Pair(first, second, _shape_refusal(first, second))

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        pair, site = match.plan, match.site
        if pair.refusal:
            return NotApplicable(pair.refusal)
        first, second = pair.first, pair.second
        body2 = rename_var(second.body, second.var, first.var)
        fused = dataclasses.replace(first, body=Block(first.body.stmts + body2.stmts,
                                                      first.body.loc))
        result = replace_stmt(kernel, second, [])
        result = replace_stmt(result, next(f for f in loops(result) if f.label == site), fused)
        second_ids = {id(n) for s in body2.stmts for n in s.walk()}
        graph = dependence_graph(result, site, assume=int_assume(ctx.scalars))
        nodes = graph.graph["region"].nodes
        for dep in all_deps(graph):
            src_second = id(nodes[dep.source]) in second_ids
            dst_second = id(nodes[dep.sink]) in second_ids
            if src_second == dst_second:
                continue
            if dep.cross_thread:
                return NotApplicable(f"threads share {dep.what} between the two loops")
            if src_second and not dst_second and dep.direction[:1] == ("<",):
                return NotApplicable(f"{dep.what}: {second.label} iteration i would run "
                                     f"before {first.label} iteration > i it depends on")
            if not dep.exact:
                return NotApplicable(f"cannot analyse the indices of {dep.what}")
        return result


def _shape_refusal(first: For, second: For) -> str:
    """Why the two loops' shapes forbid fusing them ("" when they do not)."""
    c1, c2 = canonical(first), canonical(second)
    if c1 is None or c2 is None:
        return "both loops must be counted loops"
    if (c1.start, c1.stop, c1.step, c1.inclusive, first.type) != \
            (c2.start, c2.stop, c2.step, c2.inclusive, second.type):
        return f"{first.label} and {second.label} have different bounds"
    for loop in (first, second):
        if has_barrier(loop.body) or has_exit(loop.body):
            return f"{loop.label} has a barrier or fence, break, continue or return"
    w1 = assigned_vars(first.body) - declared_names(first.body)
    w2 = assigned_vars(second.body) - declared_names(second.body)
    bounds = used_vars(c1.start) | used_vars(c1.stop)
    if w1 & (used_vars(second.body) | w2 | bounds) or w2 & (used_vars(first.body) | bounds):
        return "a variable carries a value between the loops"
    return ""


RULES = [FuseLoops()]
