"""split-reduction: spread a redundant serial reduction over the 32 lanes of a warp."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from kir import analysis
from kir.analysis import CanonicalLoop
from kir.analysis.parallel import is_lane_varying, lane_varying_context, lane_varying_vars
from kir.ir import (
    Assign,
    Binary,
    Call,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Special,
    Var,
    WarpReduce,
)
from kir.ir.fold import fold_expr
from kir.ir.types import ScalarType
from kir.rules import LoopRule, Match, NotApplicable, RuleContext, choice


def reduction_of(loop: For) -> tuple[str, str, Expr] | None:
    """(accumulator, op, term) when the loop body is some lets then ``acc = acc + term`` /
    ``acc = max(acc, term)`` / ``min`` with ``acc`` read nowhere else in the body."""
    stmts = loop.body.stmts
    if not stmts or not isinstance(stmts[-1], Assign):
        return None
    if not all(isinstance(s, Declare) for s in stmts[:-1]):
        return None
    last = stmts[-1]
    if not isinstance(last.value.type, ScalarType):
        return None
    found = analysis.accumulation(last.value, Var(last.name, last.value.type))
    if found is None:
        return None
    op, term = ("sum" if found[0] == "+" else found[0]), found[1]
    if last.name in analysis.used_vars(term) or any(
            last.name in analysis.used_vars(s) for s in stmts[:-1]):
        return None
    return last.name, op, term


def _identity(op: str, t: ScalarType) -> Const | None:
    if op == "sum":
        return Const(0.0 if t.is_float else 0, t)
    if t.is_float:
        return Const(-math.inf if op == "max" else math.inf, t)
    if t.name == "i32":
        return Const(-(2 ** 31) if op == "max" else 2 ** 31 - 1, t)
    if t.name == "u32" and op == "max":
        return Const(0, t)
    return None


@dataclass(frozen=True)
class Reduction:
    """A counted loop reducing ``acc`` with ``op`` over ``term``, and its identity value.
    ``refusal``: why its lanes cannot share the work, for a loop still listed so that the
    search sees the sites it saw before; a later change stops listing such loops."""

    canon: CanonicalLoop
    acc: str
    op: str
    term: Expr
    identity: Const | None
    refusal: str = ""


class SplitReduction(LoopRule):
    """Spread a serial reduction that every lane computes redundantly across the warp's lanes.

    CUDA practice: a reduction over a short, uniform range (e.g. the per-warp partials in
    shared memory after a block reduction) is often written as a serial loop that every
    thread runs; giving lane ``l`` the elements ``start + l*step, ... step*32`` and combining
    the partials with a warp reduction turns 32 redundant serial loops into one parallel one
    (CUDA C++ Programming Guide, "Warp Shuffle Functions"; the standard "warp-per-row"
    reduction, e.g. Apex/PyTorch's softmax and layer norm kernels).

    Legality checked: the loop body is lets plus one ``acc = acc (+|max|min) term``; the loop
    runs in warp-uniform control flow (no lane-dependent branch or earlier lane-dependent
    return around it) with warp-uniform bounds; ``acc`` and ``term`` are the same for all
    lanes of a warp (they depend on no lane-varying value, loads count as uniform when their
    index is); blocks hold whole warps. Sums are reassociated (float rounding may differ, as
    with any parallel reduction). Not checked: that a load at a uniform index sees the same
    data in every lane (true unless the kernel races).
    """

    name = "split-reduction"

    @dataclass(frozen=True)
    class Params:
        ways: int = choice(32)

    def plan_loop(self, kernel: Kernel, loop: For) -> Reduction | NotApplicable:
        canon = analysis.canonical(loop)
        red = reduction_of(loop)
        if canon is None or red is None:
            return NotApplicable(f"{loop.label} is not a counted reduction loop")
        acc, op, term = red
        acc_type = loop.body.stmts[-1].value.type
        ident = _identity(op, acc_type)
        refusal = _lane_refusal(kernel, canon, acc, term)
        if not refusal and ident is None:
            refusal = f"no identity for {op} over {acc_type}"
        return Reduction(canon, acc, op, term, ident, refusal)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        red: Reduction = match.plan
        if red.refusal:
            return NotApplicable(red.refusal)
        canon, acc, op, term, ident = red.canon, red.acc, red.op, red.term, red.identity
        loop, ways = canon.loop, params.ways
        acc_type = loop.body.stmts[-1].value.type
        part = analysis.fresh_name(kernel, f"{acc}_part")
        t = loop.type
        lane = Cast(Special("lane"), t)
        start = fold_expr(Binary("+", canon.start, Binary("*", lane, Const(canon.step, t), t), t))
        last = loop.body.stmts[-1]
        accumulate = dataclasses.replace(last, name=part, value=_combine(op, Var(part, acc_type),
                                                                         term))
        new_loop = dataclasses.replace(
            loop, init=start,
            update=Binary("+", Var(loop.var, t), Const(canon.step * ways, t), t),
            body=dataclasses.replace(loop.body, stmts=loop.body.stmts[:-1] + (accumulate,)),
            kind="serial", unroll=None)
        total = WarpReduce(op, Var(part, acc_type), acc_type)
        return analysis.replace_stmt(kernel, loop, [
            Declare(part, acc_type, ident, loc=loop.loc),
            new_loop,
            Assign(acc, _combine(op, Var(acc, acc_type), total), loc=loop.loc),
        ])


def _lane_refusal(kernel: Kernel, canon: CanonicalLoop, acc: str, term: Expr) -> str:
    """Why the lanes of a warp cannot share the reduction ("" when they can)."""
    loop, site = canon.loop, canon.loop.label
    if kernel.launch.threads_per_block % 32:
        return "the block holds a partial warp"
    tainted = lane_varying_vars(kernel)
    block = kernel.launch.block
    if lane_varying_context(kernel, loop):
        return f"{site} runs under lane-dependent control flow"
    for part in (canon.start, canon.stop):
        if is_lane_varying(part, tainted, block):
            return f"the bounds of {site} differ between lanes"
    body_vars = {s.name for s in loop.body.stmts[:-1]}
    if acc in tainted:
        return f"{acc!r} differs between lanes: each lane reduces its own"
    for s in loop.body.stmts[:-1]:
        if is_lane_varying(s.init, tainted - body_vars, block):  # type: ignore[attr-defined]
            return f"the terms of {site} differ between lanes"
    if is_lane_varying(term, tainted - body_vars, block):
        return f"the terms of {site} differ between lanes"
    return ""


def _combine(op: str, a: Expr, b: Expr) -> Expr:
    if op == "sum":
        return Binary("+", a, b, a.type)
    return Call(op, (a, b), a.type)


RULES = [SplitReduction()]
