"""split-keys-grid: deal the iterations of a block's serial online-softmax loop to ``ways``
blocks along a grid axis the kernel does not use, and let the last of them to finish combine
their partial results (flash-decoding's split of the keys, across blocks)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis.loop_edits import Namer
from kir.ir import (
    Alloc,
    Atomic,
    Barrier,
    Binary,
    Block,
    Cast,
    Component,
    Const,
    Declare,
    Expr,
    Fence,
    For,
    If,
    Kernel,
    Load,
    Param,
    Return,
    Special,
    Stmt,
    Store,
    Var,
)
from kir.ir.types import BOOL, I32, U32, PointerType, ScalarType, VectorType
from kir.rewrites.parallel.split_keys import Plan, SplitKeys, as_type, combine_splits
from kir.rules import Match, NotApplicable, RuleContext, choice
from kir.spec.sizeexpr import eval_size_expr

_AXES = ("x", "y", "z")


@dataclass(frozen=True)
class GridPlan:
    """The loop's plan (:class:`~kir.rewrites.parallel.split_keys.Plan`), the grid axis the
    splits take, and the scalar type every carried value is made of."""

    loop: Plan
    axis: int
    elem: ScalarType


class SplitKeysGrid(SplitKeys):
    """Deal a serial loop carrying an online softmax over ``ways`` blocks.

    CUDA practice: Flash-Decoding (Dao et al., 2023) splits a decode step's keys over
    several blocks when one block a head leaves most of the GPU idle (32 heads on a GPU of
    132 SMs), and combines the splits' ``(m, s, o)`` with ``exp(m_split - M)`` weights. Here
    the splits are ``ways`` blocks along a grid axis of extent 1 that the kernel does not
    read (y, else z): block ``j`` of a former block takes iterations ``a + j, a + j + ways,
    ...``. After the loop every thread writes its running values to a workspace buffer
    (``Launch.scratch``: MLX allocates it with the outputs), fences, and the block takes a
    ticket from a per-former-block counter (also scratch, zero at launch); the block that
    takes the last ticket combines, thread by thread, the ``ways`` partials of its own
    position, and alone runs the code after the loop (its stores). The others return.

    Shape required: what ``split-keys`` requires of the loop and the values it carries (a
    one-dimensional block, the loop at the kernel's top level with lets before it, uniform
    bounds, a running max, sum and rescaled accumulators, no atomics, no buffer both read
    and written), and a grid axis of extent "1" whose block index and grid size the kernel
    does not read. The carried values must share one scalar type (f32 in practice). The
    combine is the last-block-done pattern: a device fence between the partials and the
    ticket, and a flag in shared memory every thread branches on after a barrier.

    ``ways`` goes to 128: a thread walks its split's keys one after another (a load, a
    reduction, exponentials that wait on the last key's maximum), and on the H200 a decode
    kernel at 4096 keys read 0.18 ms with 32 splits and 0.135 ms with 128 (BENCHMARKS.md,
    round 20).
    """

    name = "split-keys-grid"

    @dataclass(frozen=True)
    class Params:
        ways: int = choice(4, 8, 16, 2, 32, 64, 128)

    def plan_loop(self, kernel: Kernel, loop: For) -> GridPlan | NotApplicable:
        plan = super().plan_loop(kernel, loop)
        if isinstance(plan, NotApplicable):
            return plan
        read = {(n.kind, n.axis) for n in kernel.body.walk() if isinstance(n, Special)}
        axis = next((i for i in (1, 2) if str(kernel.launch.grid[i]).strip() == "1"
                     and ("block", _AXES[i]) not in read and ("grid_dim", _AXES[i]) not in read),
                    None)
        if axis is None:
            return NotApplicable("no grid axis of extent 1 that the kernel does not read is "
                                 "left for the splits")
        types = {_elem(_declared(kernel, plan)[n]) for n in (plan.m, plan.s, *plan.accumulators)}
        if len(types) != 1:
            return NotApplicable("the running values are not all of one scalar type")
        return GridPlan(plan, axis, types.pop())

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        result = _rewrite(kernel, match.plan, params.ways)
        if ctx.sizes:  # the workspace is indexed with 32-bit integers
            part, count = result.launch.scratch[-2]
            if eval_size_expr(count, dict(ctx.sizes)) >= 2**31:
                return NotApplicable(f"{part} would hold 2^31 elements or more at these sizes")
        return result


def _declared(kernel: Kernel, plan: Plan) -> dict:
    return {s.name: s.type for s in kernel.body.stmts[:plan.at] if isinstance(s, Declare)}


def _elem(t) -> ScalarType:
    return t.elem if isinstance(t, VectorType) else t


def _rewrite(kernel: Kernel, grid_plan: GridPlan, ways: int) -> Kernel:
    plan, axis, elem = grid_plan.loop, grid_plan.axis, grid_plan.elem
    namer = Namer(kernel)
    declared = _declared(kernel, plan)
    names = [plan.m, plan.s, *plan.accumulators]
    lanes = {n: (declared[n].count if isinstance(declared[n], VectorType) else 1)
             for n in names}
    width = sum(lanes.values())  # values a thread saves
    threads = plan.threads
    part, tickets = namer.name("split_partials"), namer.name("split_tickets")
    split = Var(namer.name("split"), I32)
    former = Var(namer.name("former_block"), I32)
    t = Cast(Special("thread", "x"), I32)

    def i32(e: Expr) -> Expr:
        return e if e.type == I32 else Cast(e, I32)

    def add(a: Expr, b: Expr) -> Expr:
        return Binary("+", a, b, I32)

    def mul(a: Expr, b: Expr) -> Expr:
        return Binary("*", a, b, I32)

    others = [i for i in range(3) if i != axis]
    # The former block's linear index over the two other axes (as launched before).
    linear = add(i32(Special("block", _AXES[others[0]])),
                 mul(i32(Special("grid_dim", _AXES[others[0]])),
                     i32(Special("block", _AXES[others[1]]))))

    def slot(j: Expr, offset: int) -> Expr:
        """Where split ``j`` of this thread's former block keeps value ``offset``."""
        return add(mul(add(mul(add(mul(former, Const(ways, I32)), j), Const(threads, I32)), t),
                       Const(width, I32)), Const(offset, I32))

    def component(n: str, i: int) -> Expr:
        v = Var(n, declared[n])
        return Component(v, i, elem) if lanes[n] > 1 else v

    offsets, at = {}, 0
    for n in names:
        offsets[n], at = at, at + lanes[n]

    stmts = list(kernel.body.stmts)
    loop = stmts[plan.at]
    assert isinstance(loop, For)
    dealt = dataclasses.replace(
        loop, init=Binary("+", loop.init, as_type(split, loop.type), loop.type),
        update=Binary("+", Var(loop.var, loop.type), Const(ways, loop.type), loop.type))
    head = [Declare(split.name, I32, i32(Special("block", _AXES[axis])), loc=loop.loc),
            Declare(former.name, I32, linear, loc=loop.loc)]
    publish: list[Stmt] = [Store(part, slot(split, offsets[n] + i), component(n, i))
                           for n in names for i in range(lanes[n])]
    flag, ticket = namer.name("split_is_last"), namer.name("split_ticket")
    publish += [
        Fence("device"),  # this thread's partials are seen before the block's ticket is
        Alloc(flag, I32, 1, "shared"),
        Barrier("block"),
        If(Binary("==", t, Const(0, I32), BOOL), Block((
            Declare(ticket, U32, Const(0, U32)),
            Atomic("add", tickets, former, Const(1, U32), ticket),
            Store(flag, Const(0, I32), Cast(Binary("==", Var(ticket, U32),
                                                     Const(ways - 1, U32), BOOL), I32)),
        ))),
        Barrier("block"),
        If(Binary("==", Load(flag, Const(0, I32), I32), Const(0, I32), BOOL),
           Block((Return(),))),
    ]
    combine = combine_splits(names, declared, ways, lambda j, n, i: Load(
        part, slot(j, offsets[n] + i), elem), namer)
    body = Block(tuple(head + stmts[:plan.at] + [dealt] + publish + combine
                       + stmts[plan.at + 1:]), kernel.body.loc)
    grid = list(kernel.launch.grid)
    blocks = " * ".join(f"({g})" for g in grid)
    grid[axis] = str(ways)
    launch = dataclasses.replace(
        kernel.launch, grid=tuple(grid),
        scratch=kernel.launch.scratch + ((part, f"{blocks} * {ways * threads * width}"),
                                         (tickets, blocks)))
    params = kernel.params + (Param(part, PointerType(elem)), Param(tickets, PointerType(U32)))
    return dataclasses.replace(kernel, params=params, body=body, launch=launch)


RULES = [SplitKeysGrid()]
