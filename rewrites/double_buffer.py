"""double-buffer: ping-pong two shared tiles so loading tile k+1 overlaps computing on tile k."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.analysis.memory import find_alloc
from kir.ir import (
    Alloc,
    Barrier,
    Binary,
    Block,
    Cast,
    Const,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Node,
    Return,
    Stmt,
    Store,
    Var,
    transform,
)
from kir.ir.fold import fold
from kir.ir.types import BOOL, ScalarType
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


@dataclass(frozen=True)
class Pipeline:
    """A loop's body split at its first barrier: the load part (``prefix``), the compute
    part, and the shared tiles the load part fills (by name, in name order)."""

    loop: For
    prefix: Block
    compute: Block
    tiles: dict[str, Alloc]


class DoubleBuffer(LoopRule):
    """Double-buffer the shared tiles a loop loads each iteration (software pipelining).

    CUDA practice: a tiled main loop ``load tile; barrier; compute; barrier`` leaves the
    memory system idle while computing. With two copies of each tile, iteration k issues the
    loads of tile k+1 into one copy while computing on tile k from the other, and one barrier
    per iteration suffices (CUDA C++ Programming Guide, "Asynchronous Data Copies" /
    pipelining; CUTLASS's multistage mainloop; the "prefetching" variant of the tiled matrix
    multiply in Kirk & Hwu, Programming Massively Parallel Processors, ch. 5).

    Shape required of loop ``L`` (``for t = 0; t < n; t = t + 1``, uniform): its body is
    ``P; barrier; C; barrier`` where the prefix P stores into static shared arrays W (and
    does nothing else visible: no other stores, no writes of outer locals), C reads W and
    writes none of it, C uses no local P declares, C writes no buffer P reads, and W is not
    touched outside L. The result: W doubled; ``if 0 < n { P[t:=0] }; barrier`` before the
    loop; the body ``if t + 1 < n { P[t:=t+1] into copy (t+1)&1 }; C on copy t&1; barrier``.
    The single barrier is enough: the copy written in iteration k was last read in
    iteration k-1, before the barrier that ended it. The doubled size must fit the target's
    shared memory (the verifier checks). Not checked: whether the loads really overlap the
    compute on the target (the timing decides).
    """

    name = "double-buffer"

    def plan_loop(self, kernel: Kernel, loop: For) -> Pipeline | NotApplicable:
        return _check(kernel, loop)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan: Pipeline = match.plan
        return _rewrite(kernel, plan.loop, plan.prefix, plan.compute, plan.tiles)


def _check(kernel: Kernel, loop: For) -> Pipeline | NotApplicable:
    c = analysis.canonical(loop)
    if c is None or c.step != 1 or c.inclusive or c.start != Const(0, loop.type):
        return NotApplicable(f"{loop.label} is not `for t = 0; t < n; t = t + 1`")
    stmts = list(loop.body.stmts)
    barriers = [i for i, s in enumerate(stmts) if isinstance(s, Barrier)]
    if len(barriers) != 2 or barriers[1] != len(stmts) - 1 or \
            any(s.scope != "block" for s in (stmts[i] for i in barriers)):
        return NotApplicable(f"{loop.label} body is not `load; barrier; compute; barrier`")
    prefix, compute = Block(tuple(stmts[:barriers[0]])), Block(tuple(stmts[barriers[0] + 1:-1]))
    if any(isinstance(n, (Barrier, Return)) for part in (prefix, compute) for n in part.walk()):
        return NotApplicable(f"{loop.label} has more barriers or a return")
    if analysis.is_thread_dependent(loop.cond, analysis.thread_dependent_vars(kernel)):
        return NotApplicable(f"{loop.label} is not uniform")
    if analysis.has_matrix_stmts(loop.body):
        return NotApplicable(f"{loop.label} reads tiles as matrices (indices would not move)")
    tiles = analysis.buffers_written(prefix)
    allocs = {t: find_alloc(kernel, t) for t in tiles}
    if not tiles or any(a is None or a.space != "shared" or a.dynamic for a in allocs.values()):
        return NotApplicable("the load part must store only into static shared arrays")
    if analysis.buffers_read(prefix) & tiles or analysis.buffers_written(compute) & tiles:
        return NotApplicable("the load part reads a tile, or the compute part writes one")
    if analysis.buffers_written(compute) & analysis.buffers_read(prefix):
        return NotApplicable("the compute part writes a buffer the load part reads")
    declared = analysis.declared_names(prefix)
    if analysis.assigned_vars(prefix) - declared:
        return NotApplicable("the load part writes locals declared outside it")
    if analysis.used_vars(compute) & declared:
        return NotApplicable("the compute part uses locals the load part declares")
    for t in tiles:
        inside = sum(1 for n in loop.walk() if isinstance(n, (Load, Store)) and n.buffer == t)
        total = sum(1 for n in kernel.body.walk()
                    if isinstance(n, (Load, Store)) and n.buffer == t)
        vector = any(not isinstance((n.type if isinstance(n, Load) else n.value.type),
                                    ScalarType)
                     for n in loop.walk() if isinstance(n, (Load, Store)) and n.buffer == t)
        if inside != total or vector:
            return NotApplicable(f"{t} is used outside {loop.label} or moved as vectors")
    return Pipeline(loop, prefix, compute, {t: allocs[t] for t in sorted(tiles)})


def _offset(kernel: Kernel, tiles: dict[str, Alloc], node: Node, parity: Expr) -> Node:
    """Offset every access of the tiles under ``node`` into copy ``parity`` (0 or 1)."""
    def visit(n: Node) -> Node | None:
        if isinstance(n, (Load, Store)) and n.buffer in tiles:
            size = tiles[n.buffer].size
            offset: Expr = Binary("*", parity, Const(size, parity.type), parity.type)
            if offset.type != n.index.type:
                offset = Cast(offset, n.index.type)
            return dataclasses.replace(n, index=Binary("+", n.index, offset, n.index.type))
        return None
    return transform(node, visit)


def _copy_fresh(kernel: Kernel, block: Block, taken: set[str], labels: set[str]) -> Block:
    """``block`` with the locals it declares and its loop labels renamed to fresh ones."""
    for name in sorted(analysis.declared_names(block)):
        new = analysis.fresh_name(kernel, name, taken)
        taken.add(new)
        block = analysis.rename_var(block, name, new)  # type: ignore[assignment]

    def relabel(n: Node) -> Node | None:
        if isinstance(n, For):
            label = analysis.next_loop_label(kernel, labels)
            labels.add(label)
            return dataclasses.replace(n, label=label)
        return None
    return transform(block, relabel)  # type: ignore[return-value]


def _rewrite(kernel: Kernel, loop: For, prefix: Block, compute: Block,
             tiles: dict[str, Alloc]) -> Kernel:
    t = Var(loop.var, loop.type)
    one = Const(1, loop.type)
    stop = loop.cond.right  # type: ignore[attr-defined]
    nxt = Binary("+", t, one, loop.type)
    loc = loop.loc
    first = _copy_fresh(kernel, analysis.substitute(prefix, loop.var, loop.init),  # type: ignore
                        set(), set())
    first = fold(_offset(kernel, tiles, first, Const(0, loop.type)))  # type: ignore[assignment]
    ahead = _offset(kernel, tiles, analysis.substitute(prefix, loop.var, nxt),
                    Binary("&", nxt, one, loop.type))
    now = _offset(kernel, tiles, compute, Binary("&", t, one, loop.type))
    body: list[Stmt] = [If(Binary("<", nxt, stop, BOOL), ahead, loc=loc)]  # type: ignore[arg-type]
    body += list(now.stmts) + [loop.body.stmts[-1]]  # type: ignore[attr-defined]
    new_loop = dataclasses.replace(loop, body=Block(tuple(body), loc=loop.body.loc))
    entry = fold(Binary("<", loop.init, stop, BOOL))
    barrier = next(s for s in loop.body.stmts if isinstance(s, Barrier))
    before: list[Stmt] = []
    if entry != Const(True, BOOL):
        before.append(If(entry, first, loc=loc))  # type: ignore[arg-type]
    else:
        before.extend(first.stmts)
    kernel = analysis.replace_stmt(kernel, loop, before + [barrier, new_loop])

    def grow(n: Node) -> Node | None:
        if isinstance(n, Alloc) and n.name in tiles:
            return dataclasses.replace(n, size=2 * n.size)
        return None
    return dataclasses.replace(kernel, body=transform(kernel.body, grow))


RULES = [DoubleBuffer()]
