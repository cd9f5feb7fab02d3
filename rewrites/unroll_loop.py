"""unroll-loop: repeat a counted loop's body k times per iteration (or fully)."""

from __future__ import annotations

from dataclasses import dataclass

from kir import limits
from kir.analysis import (
    CanonicalLoop,
    canonical,
    constant_trip_count,
    has_own_exit,
    loops,
    replace_loop,
)
from kir.analysis.loop_edits import Namer, copy_body
from kir.ir import Assign, Binary, Block, Const, Declare, Expr, For, Kernel, Var
from kir.ir.fold import fold, fold_expr
from kir.ir.types import BOOL
from kir.rules import LoopRule, Match, NotApplicable, RuleContext, choice
from kir.rules.guard import count_nodes

MAX_FULL = 64


@dataclass(frozen=True)
class UnrollPlan:
    """A counted loop to unroll. ``refusal``: why no factor applies (a loop with its own
    break/continue), for a site still listed so that the search sees the sites it saw
    before; a later change stops listing such loops."""

    canon: CanonicalLoop
    refusal: str = ""


class UnrollLoop(LoopRule):
    """Unroll a counted loop by 2, 4 or 8 (with a remainder loop), or fully.

    CUDA practice: loop unrolling, ``#pragma unroll`` (CUDA C++ Programming Guide,
    "#pragma unroll"; Best Practices Guide, "Loop unrolling"): fewer branches and index
    updates, more independent instructions in flight. Factor k turns
    ``for (v = a; v < b; v += s)`` into a main loop running k copies of the body
    (``v``, ``v + s``, ...) while ``v < b - (k-1)s``, and a remainder loop for the rest, so
    every trip count is handled; ``full`` needs a constant trip count of at most 64
    (sites marked ``#pragma unroll`` come first). Copies get fresh local names and fresh
    labels for nested loops. Legality: only canonical loops (constant positive step, bound
    not written in the body) without their own ``break``/``continue``; unrolling keeps each
    thread's order of operations, so no dependence test is needed. Not checked: overflow of
    ``b - (k-1)s`` near the type's minimum (unsigned loops with a non-constant bound are
    refused for that reason).
    """

    name = "unroll-loop"

    @dataclass(frozen=True)
    class Params:
        factor: int | str = choice(4, 2, 8, "full")

    def candidates(self, kernel: Kernel) -> list[str]:
        found = loops(kernel)
        found.sort(key=lambda f: f.unroll is None)  # #pragma unroll hints first
        return [f.label for f in found]

    def plan_loop(self, kernel: Kernel, loop: For) -> UnrollPlan | NotApplicable:
        c = canonical(loop)
        if c is None:
            return NotApplicable(f"{loop.label} is not a counted loop (v = a; v < b; v += const)")
        return UnrollPlan(c, f"{loop.label} has break/continue" if has_own_exit(loop) else "")

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan, site, factor = match.plan, match.site, params.factor
        if plan.refusal:
            return NotApplicable(plan.refusal)
        c = plan.canon
        loop = c.loop
        trips = constant_trip_count(loop)
        copies = (trips or 0) if factor == "full" else int(factor) + 1  # + the remainder
        too_big = _size_refusal(kernel, loop, copies)
        if too_big is not None:  # a refusal is falsy
            return too_big
        namer = Namer(kernel)
        t = loop.type
        if factor == "full":
            if trips is None or trips > MAX_FULL:
                return NotApplicable(f"full unroll needs a constant trip count <= {MAX_FULL}")
            stmts = []
            for k in range(trips):
                value = Const(int(c.start.value) + k * c.step, t)  # type: ignore[union-attr]
                stmts.extend(fold(copy_body(loop.body, namer, {loop.var: value})).stmts)
            return replace_loop(kernel, site, stmts)
        k = int(factor)
        if trips is not None and trips % k == 0:
            main = _main_loop(loop, c.step, k, namer, None, loop.cond)
            return replace_loop(kernel, site, main)
        if not t.is_signed and trips is None:
            return NotApplicable(f"unsigned loop {site} with a non-constant bound")
        if not t.is_signed and (not isinstance(c.stop, Const)
                                or int(c.stop.value) < (k - 1) * c.step):
            # stop - (k-1)*step would wrap around to a huge bound (found by the soundness
            # fuzzer: a 2-trip u32 loop unrolled by 4 ran ~2^30 iterations).
            return NotApplicable(f"unsigned loop {site}: its bound is below {(k - 1) * c.step}, "
                                 "the main loop's bound would wrap")
        var = Var(loop.var, t)
        stop_minus = fold_expr(Binary("-", c.stop, Const((k - 1) * c.step, t), t))
        main_cond = Binary(loop.cond.op, var, stop_minus, BOOL)  # type: ignore[attr-defined]
        rest = namer.name(f"{loop.var}_rest")
        main = _main_loop(loop, c.step, k, namer, rest, main_cond)
        rvar = namer.name(f"{loop.var}_r")
        remainder = For(namer.label(), rvar, t, Var(rest, t),
                        Binary(loop.cond.op, Var(rvar, t), c.stop, BOOL),  # type: ignore
                        Binary("+", Var(rvar, t), Const(c.step, t), t),
                        copy_body(loop.body, namer, {loop.var: Var(rvar, t)}),
                        loc=loop.loc)
        return replace_loop(kernel, site, [Declare(rest, t, c.start, loc=loop.loc), main,
                                           remainder])


def _size_refusal(kernel: Kernel, loop: For, copies: int) -> NotApplicable | None:
    """A refusal when ``copies`` copies of the loop's body would take the kernel past the IR
    size cap per step (``--limit ir_nodes``), found before any copy is made: the cap is
    checked on every rule's result, but building an 8x unroll of an already huge loop only
    to throw it away is what made a replayed trace of repeated unrolls take minutes."""
    cap = limits.current().ir_nodes
    size = count_nodes(kernel, cap)  # counting stops past the cap
    body = count_nodes(loop.body, cap)
    if size + body * max(copies - 1, 0) > cap:
        return NotApplicable(f"the result would have more than {cap} IR nodes (the limit per "
                             f"step; --limit ir_nodes=N raises it)")
    return None


def _main_loop(loop: For, step: int, k: int, namer: Namer, rest: str | None,
               cond: Expr) -> For:
    t = loop.type
    var = Var(loop.var, t)
    stmts = list(loop.body.stmts)  # copy 0 keeps the original names
    for j in range(1, k):
        advanced = Binary("+", var, Const(j * step, t), t)
        stmts.extend(copy_body(loop.body, namer, {loop.var: advanced}).stmts)
    next_value = Binary("+", var, Const(k * step, t), t)
    if rest is not None:
        stmts.append(Assign(rest, next_value, loc=loop.loc))
    return For(loop.label, loop.var, t, loop.init, cond, next_value,
               Block(tuple(stmts), loop.body.loc), loop.kind, None, loop.loc)


RULES = [UnrollLoop()]
