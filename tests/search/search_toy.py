"""Toy rules, a toy kernel and a toy timing function for the search and tuning-DB tests.

The kernel has three loops L0..L2, each storing a constant. Rules:

* ``unroll-loop{loop=Lk,factor=2|4|8}``: marks a serial loop unrolled (the "speed" rule: the
  toy evaluator divides the time by the factor);
* ``set-const{loop=Lk,value=0..3}``: changes the stored constant (costs 0.01 ms per unit);
* ``break-loop{loop=Lk}``: empties a loop body: the PLANTED BROKEN rule. The evaluator
  reports it "invalid" although it would be the fastest kernel of all.

Also importable from a subprocess (the kill test) by putting this folder on ``sys.path``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Mapping

from kir.ir import Binary, Block, Const, For, Kernel, Launch, Param, Store, Var, transform
from kir.ir.types import BOOL, F32, I32, PointerType
from kir.rules import BaseRule, LoopRule, NotApplicable, RuleContext, choice
from kir.search import Evaluation


def toy_kernel() -> Kernel:
    loops = []
    for k in range(3):
        i = Var(f"i{k}", I32)
        body = Block((Store("y", i, Const(float(k), F32)),))
        loops.append(For(f"L{k}", i.name, I32, Const(0, I32),
                         Binary("<", i, Const(8, I32), BOOL),
                         Binary("+", i, Const(1, I32), I32), body))
    return Kernel("toy", (Param("y", PointerType(F32)),), Block(tuple(loops)),
                  Launch(("1", "1", "1"), (32, 1, 1)))


def loops_of(kernel: Kernel) -> list[For]:
    return [n for n in kernel.walk() if isinstance(n, For)]


def _replace_loop(kernel: Kernel, label: str, fn) -> Kernel:
    return transform(kernel, lambda n: fn(n) if isinstance(n, For) and n.label == label
                     else None)


class UnrollLoop(LoopRule):
    """Unroll a serial loop (toy)."""

    name = "unroll-loop"

    @dataclasses.dataclass(frozen=True)
    class Params:
        factor: int = choice(2, 4, 8)

    def plan_loop(self, kernel, loop):
        return loop if loop.kind == "serial" else NotApplicable("already unrolled")

    def apply(self, kernel, match, params, ctx):
        return _replace_loop(kernel, match.site, lambda f: dataclasses.replace(
            f, kind="unroll", unroll=params.factor))


class SetConst(LoopRule):
    """Change the constant a loop stores (toy)."""

    name = "set-const"

    @dataclasses.dataclass(frozen=True)
    class Params:
        value: int = choice(0, 1, 2, 3)

    def plan_loop(self, kernel, loop):
        return loop.body.stmts[0] if loop.body.stmts else NotApplicable("empty loop")

    def apply(self, kernel, match, params, ctx):
        store = match.plan
        value = float(params.value)
        if store.value == Const(value, F32):
            return NotApplicable("the loop stores that value already")
        new_body = Block((dataclasses.replace(store, value=Const(value, F32)),))
        return _replace_loop(kernel, match.site, lambda f: dataclasses.replace(f, body=new_body))


class BreakLoop(LoopRule):
    """Empty a loop body: wrong, and fast (the planted broken rule)."""

    name = "break-loop"

    def plan_loop(self, kernel, loop):
        return None if loop.body.stmts else NotApplicable("empty loop")

    def apply(self, kernel, match, params, ctx):
        return _replace_loop(kernel, match.site,
                             lambda f: dataclasses.replace(f, body=Block(())))


class Explode(BaseRule):
    """A rule with a bug: apply raises."""

    name = "explode"

    def candidates(self, kernel: Kernel) -> list[str]:
        return ["L0"]

    def apply(self, kernel, match, params, ctx):
        raise RuntimeError("boom")


def toy_registry(*extra) -> dict:
    rules = [UnrollLoop(), SetConst(), BreakLoop(), *extra]
    return {rule.name: rule for rule in rules}


def toy_time(kernel: Kernel) -> float:
    """The modelled time: unrolling divides it, constants add to it."""
    ms = 10.0
    for loop in loops_of(kernel):
        if loop.kind == "unroll":
            ms /= loop.unroll or 1
        if loop.body.stmts:
            ms += 0.01 * loop.body.stmts[0].value.value
    return ms


def toy_evaluate(kernel: Kernel) -> Evaluation:
    """Valid unless a loop was emptied; an emptied kernel would be by far the fastest."""
    if any(not loop.body.stmts for loop in loops_of(kernel)):
        return Evaluation.rejected("invalid", "output mismatch: y differs",
                                   would_be_ms=0.0001)
    return Evaluation.timed(toy_time(kernel))


def slow_evaluate(kernel: Kernel, delay_s: float = 0.02) -> Evaluation:
    time.sleep(delay_s)
    return toy_evaluate(kernel)


CTX = RuleContext(sizes={"N": 8})
Sizes = Mapping[str, int]
