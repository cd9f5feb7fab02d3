"""Block reductions built from warp reductions: each warp reduces its lanes' values (a
warp reduction), its first lane parks the result in a shared slot, and after a barrier
every thread of the block combines the slots — the two-level reduction of fast row
kernels (Harris, "Optimizing Parallel Reduction in CUDA"; CUDA C++ Programming Guide,
"Warp Shuffle Functions"). :func:`block_reductions` turns every warp reduction of a block of
statements into one; ``widen-warps`` uses it when a block, not a warp, owns a row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.analysis import strip_casts
from kir.ir import (
    Alloc,
    Assign,
    Barrier,
    Binary,
    Block,
    Cast,
    Const,
    Declare,
    For,
    If,
    Kernel,
    Load,
    Special,
    Stmt,
    Store,
    Var,
    WarpReduce,
    While,
    transform,
)
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, I32, U32, ScalarType
from kir.rewrites.parallel.accumulators import combine


@dataclass
class Scratch:
    """What the block reductions add: their shared arrays, and the names and loop labels
    taken so far (each reduction needs fresh ones)."""

    allocs: list[Alloc] = dataclasses.field(default_factory=list)
    names: set[str] = dataclasses.field(default_factory=set)
    labels: set[str] = dataclasses.field(default_factory=set)

    def name(self, kernel: Kernel, base: str) -> str:
        fresh = analysis.fresh_name(kernel, base, self.names)
        self.names.add(fresh)
        return fresh

    def label(self, kernel: Kernel) -> str:
        fresh = analysis.next_loop_label(kernel, self.labels)
        self.labels.add(fresh)
        return fresh


def block_reductions(kernel: Kernel, block: Block, in_loop: bool, scratch: Scratch) -> Block:
    """``block`` with every warp reduction made a block reduction (statements inserted
    before the statement that holds it); the shared arrays it needs go to ``scratch``."""
    out: list[Stmt] = []
    for stmt in block.stmts:
        if isinstance(stmt, (For, While)):
            stmt = dataclasses.replace(stmt, body=block_reductions(kernel, stmt.body, True,
                                                                    scratch))
        elif isinstance(stmt, If):
            stmt = dataclasses.replace(
                stmt, then=block_reductions(kernel, stmt.then, in_loop, scratch),
                orelse=None if stmt.orelse is None
                else block_reductions(kernel, stmt.orelse, in_loop, scratch))
        elif isinstance(stmt, Block):
            stmt = block_reductions(kernel, stmt, in_loop, scratch)
        elif isinstance(stmt, (Declare, Assign, Store)):
            totals: dict[int, Var] = {}
            for red in [n for n in stmt.walk() if isinstance(n, WarpReduce)]:
                stmts, totals[id(red)] = _block_reduce(kernel, red, in_loop, scratch, stmt.loc)
                out += stmts
            if totals:
                stmt = transform(stmt, lambda n: totals.get(id(n)))
        out.append(stmt)
    return dataclasses.replace(block, stmts=tuple(out))


def _block_reduce(kernel: Kernel, red: WarpReduce, in_loop: bool, scratch: Scratch,
                  loc) -> tuple[list[Stmt], Var]:
    """The statements reducing ``red``'s operand over the block, and the variable holding
    the total in every thread: a warp reduction, each warp's result to a shared slot, then
    every thread combining the slots. Inside a loop a barrier closes it, so that the next
    round's writes wait for this round's reads."""
    t: ScalarType = red.type
    total = scratch.name(kernel, f"{_name_of(red)}_block")
    buf = scratch.name(kernel, f"{_name_of(red)}_warps")
    slot = scratch.name(kernel, "w")
    scratch.allocs.append(Alloc(buf, t, WARP, "shared", loc=loc))
    tid = Special("thread", "x", U32)
    lane0 = Binary("==", Binary("%", tid, Const(WARP, U32), U32), Const(0, U32), BOOL)
    warp = Binary("/", tid, Const(WARP, U32), U32)
    sv, tv = Var(slot, I32), Var(total, t)
    warps = Cast(Binary("/", Special("block_dim", "x", U32), Const(WARP, U32), U32), I32)
    stmts: list[Stmt] = [
        Declare(total, t, WarpReduce(red.op, red.value, t), loc),
        If(lane0, Block((Store(buf, warp, tv, loc),), loc), None, loc),
        Barrier("block", loc),
        Assign(total, Load(buf, Const(0, I32), t), loc),
        For(scratch.label(kernel), slot, I32, Const(1, I32), Binary("<", sv, warps, BOOL),
            Binary("+", sv, Const(1, I32), I32),
            Block((Assign(total, combine(red.op, tv, Load(buf, sv, t)), loc),), loc),
            loc=loc),
    ]
    if in_loop:
        stmts.append(Barrier("block", loc))
    return stmts, tv


def _name_of(red: WarpReduce) -> str:
    value = strip_casts(red.value)
    return value.name if isinstance(value, Var) else "partial"
