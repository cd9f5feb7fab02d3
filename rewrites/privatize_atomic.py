"""privatize-atomic: sum a loop's atomic adds to one address in a register, add it once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    buffers_written,
    fresh_name,
    replace_loop,
    used_vars,
)
from kir.ir import (
    Assign,
    Atomic,
    Binary,
    Block,
    Const,
    Declare,
    For,
    If,
    Kernel,
    Load,
    Return,
    Store,
    Var,
    transform,
)
from kir.ir.printer import print_expr
from kir.ir.types import BOOL, ScalarType
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


@dataclass(frozen=True)
class Privatization:
    """A loop and the buffer of its first atomic add, with every atomic on that buffer in
    the loop. ``refusal``: why the adds cannot be summed privately, for a loop still listed
    so that the search sees the sites it saw before; a later change stops listing it."""

    loop: For
    buffer: str
    atomics: tuple[Atomic, ...]
    refusal: str = ""


class PrivatizeAtomic(LoopRule):
    """Accumulate a loop's atomic adds to one address in a private register; add it once.

    CUDA practice: privatization / atomic aggregation (Kirk & Hwu, "Programming Massively
    Parallel Processors", 4th ed., ch. 9.4-9.5 "Privatization", "Coarsening"; NVIDIA blog
    "CUDA Pro Tip: Optimized Filtering with Warp-Aggregated Atomics"): contended atomics to
    one address serialize, so a thread that would add to ``out[0]`` in every iteration of a
    loop (a reduction kernel coarsened with ``coarsen-threads``: one block partial per former
    block) keeps the running sum in a register and adds it once after the loop. The loop

        for (...) { ... if (tid == 0) atomicAdd(&out[k], p); ... }

    becomes ``acc = 0; hit = false; for (...) { ... if (tid == 0) { acc += p; hit = true; }
    ... } if (hit) atomicAdd(&out[k], acc);`` — the flag keeps threads that never added from
    adding at all.

    Legality checked: every atomic in the loop on that buffer is an ``add`` whose old value
    is not used, all at one index that the loop does not change (no variable it assigns, no
    buffer it writes); the buffer is accessed nowhere else in the kernel, so no thread can
    observe the partial sums it no longer sees; the loop holds no ``return`` (which would
    skip the final add). Floating-point sums are reassociated — the order of atomic adds
    from different threads is unspecified already, so a spec's tolerance for such a kernel
    covers it.
    """

    name = "privatize-atomic"

    def plan_loop(self, kernel: Kernel, loop: For) -> Privatization | NotApplicable:
        atomics = [n for n in loop.body.walk() if isinstance(n, Atomic)]
        adds = [a for a in atomics if a.op == "add"]
        if not adds:
            return NotApplicable(f"loop {loop.label} has no atomic add")
        buffer = adds[0].buffer
        mine = [a for a in atomics if a.buffer == buffer]
        return Privatization(loop, buffer, tuple(mine),
                             _refusal(kernel, loop, buffer, mine) or "")

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan: Privatization = match.plan
        if plan.refusal:
            return NotApplicable(plan.refusal)
        loop, buffer, mine = plan.loop, plan.buffer, plan.atomics
        index, vtype = mine[0].index, mine[0].value.type
        acc = fresh_name(kernel, f"{buffer}_acc")
        hit = fresh_name(kernel, f"{buffer}_hit", {acc})

        def accumulate(n):
            # In every block, each atomic add on the buffer becomes two statements.
            if not isinstance(n, Block) or not any(
                    isinstance(st, Atomic) and st.buffer == buffer for st in n.stmts):
                return None
            stmts = []
            for st in n.stmts:
                if isinstance(st, Atomic) and st.buffer == buffer:
                    total = Binary("+", Var(acc, vtype), st.value, vtype)
                    stmts += [Assign(acc, total, loc=st.loc),
                              Assign(hit, Const(True, BOOL), loc=st.loc)]
                else:
                    stmts.append(st)
            return dataclasses.replace(n, stmts=tuple(stmts))

        body = transform(loop.body, accumulate)
        new_loop = dataclasses.replace(loop, body=body)
        loc = loop.loc
        before = [Declare(acc, vtype, Const(_zero(vtype), vtype), loc=loc),
                  Declare(hit, BOOL, Const(False, BOOL), loc=loc)]
        after = If(Var(hit, BOOL), Block((Atomic("add", buffer, index, Var(acc, vtype),
                                                 loc=loc),), loc=loc), loc=loc)
        return replace_loop(kernel, match.site, [*before, new_loop, after])


def _refusal(kernel: Kernel, loop: For, buffer: str, mine: list[Atomic]) -> str | None:
    for a in mine:
        if a.op != "add":
            return f"an atomic {a.op} on {buffer} in the loop (only adds can be summed first)"
        if a.result is not None:
            return f"the old value of an atomic add on {buffer} is used"
        if print_expr(a.index) != print_expr(mine[0].index):
            return f"the atomic adds on {buffer} go to different indices"
        if a.value.type != mine[0].value.type or not isinstance(a.value.type, ScalarType):
            return f"the atomic adds on {buffer} add values of different types"
    index = mine[0].index
    changed = assigned_vars(loop.body) | {loop.var}
    if used_vars(index) & changed:
        return f"the index {print_expr(index)} changes inside the loop"
    read = {n.buffer for n in index.walk() if isinstance(n, Load)}
    if read & buffers_written(loop):
        return f"the index {print_expr(index)} reads memory the loop writes"
    inside = {id(a) for a in mine}
    for n in kernel.body.walk():
        if isinstance(n, (Load, Store)) and n.buffer == buffer:
            return f"{buffer} is also read or written directly: partial sums would show"
        if isinstance(n, Atomic) and n.buffer == buffer and id(n) not in inside:
            return f"{buffer} is also updated atomically outside loop {loop.label}"
    if any(isinstance(n, Return) for n in loop.body.walk()):
        return f"a return inside loop {loop.label} would skip the final atomic add"
    return None


def _zero(t: ScalarType) -> int | float:
    return 0.0 if t.is_float else 0


RULES = [PrivatizeAtomic()]

