"""widen-warps: give each warp's work to a whole block: its lane-strided loops spread over the
block's threads, its warp reductions made block reductions."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.analysis import strip_casts
from kir.analysis.parallel import is_thread_x, position_of, stmts_in_order
from kir.rewrites.parallel.accumulators import accumulators
from kir.rewrites.parallel.block_reduce import Scratch, block_reductions
from kir.rewrites.parallel.online_pairs import combined_after, online_pair
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Break,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    Node,
    Return,
    Select,
    Shuffle,
    Special,
    Stmt,
    Store,
    Var,
    WarpReduce,
    transform,
)
from kir.ir.fold import fold_expr
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, I32, U32
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice

_MATRIX = (MatrixFill, MatrixLoad, MatrixMultiplyAccumulate, MatrixStore)


@dataclass(frozen=True)
class Plan:
    """What widen-warps found: the warps per block of the original launch, the locals that
    hold the lane index, the warp index or ``thread.x`` itself, and the lane-strided loops:
    each one's label and the elements a lane takes at a time (8 for a loop ``c = lane * 8;
    c += 32 * 8`` reading 16-byte packs of bf16, else 1)."""

    warps: int
    lane_vars: frozenset[str]
    warp_vars: frozenset[str]
    tid_vars: frozenset[str]
    loops: tuple[tuple[str, int], ...]


class WidenWarps(BaseRule):
    """Give each warp's work to a whole block: a warp-per-row kernel becomes block-per-row.

    CUDA practice: a row of 8192 floats is too long for one warp to stream at full bandwidth
    and to keep in registers; fast row kernels (Apex and PyTorch layer norm for long rows,
    vLLM's RMS norm, MLX's own row reductions) give each row a block, the row's loops striding
    over all of its threads and each reduction done in two levels — a warp reduction by
    shuffles, then the warps' partials combined through shared memory (CUDA C++ Programming
    Guide, "Warp Shuffle Functions"; Harris, "Optimizing Parallel Reduction in CUDA"). The
    block's width is the rule's ``threads`` parameter; ``vectorize-strided`` then gives the
    row loops 128-bit loads, and ``split-reduction`` can spread the combine of the slots.

    The launch goes from ``G`` blocks of ``32 R`` threads (``R`` rows a block, warp ``w`` of
    block ``b`` owning item ``b R + w``) to ``G x R`` blocks of ``threads``: the warp index
    becomes ``block.y`` and ``block_dim.x`` the old width everywhere but in the loops, so block
    ``(b, w)`` owns the item warp ``w`` of block ``b`` owned. A loop ``for (c = lane; c < n;
    c += 32)`` becomes ``for (c = thread.x; c < n; c += block_dim.x)`` (one taking ``K``
    elements a lane at a time, ``c = lane * K; c += 32 * K`` as code reading 16-byte packs
    does, ``c = thread.x * K; c += block_dim.x * K``); a warp reduction of its
    partials ``reduce.op(p)`` becomes a block reduction (each warp's result through a shared
    array of 32, read back by every thread); code under ``lane == 0`` runs on thread 0.

    Legality checked: a one-dimensional block of whole warps (or a block 32 wide with its
    warps in rows, ``thread.y`` the warp: the same kernel on a block of 32W) and grid;
    ``thread.x`` appears
    only as the lane (``% 32``, ``& 31``) or warp (``/ 32``, ``>> 5``) index; the lane index
    only starts lane-strided loops or tests ``lane == 0``; no shuffle but a broadcast of a
    warp-uniform value, no matrix fragment, barrier or shared memory; every warp reduction is
    of a loop's partial, in warp-uniform control flow, as a whole statement's operand. A
    lane-strided loop carries only partials ``p = p op term`` (op +, max, min) that start from
    the identity (``0`` for a sum) and are read after the loop only by a warp reduction with
    the same op, or the online softmax's running pair (max and sum, the sum starting at 0,
    read after the loop only by a warp max of the max and a warp sum of ``s * exp(m - U)``:
    :mod:`.online_pairs`); it has no break or return. Memory a lane-strided loop writes is touched
    elsewhere only by lane-strided loops at the same index ``base + c`` (so by the same
    thread); memory written outside them is not read; atomics outside them run under ``lane
    == 0`` with warp-uniform operands. Sums are reassociated.
    """

    name = "widen-warps"
    site_key = "dim"

    @dataclass(frozen=True)
    class Params:
        threads: int = choice(1024, 256, 512, 128, 64)

    def candidates(self, kernel: Kernel) -> list[str]:
        return ["x"]

    def plan(self, kernel: Kernel, site: str) -> Plan | NotApplicable:
        return _plan(_warps_in_rows(kernel))

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel:
        return _widen(_warps_in_rows(kernel), match.plan, params.threads)


def _warps_in_rows(kernel: Kernel) -> Kernel:
    """A block 32 threads wide written with its lane as ``thread.x``: a block of one warp
    (32, 1, 1), or of warps in rows (32, W, 1; OneFlow's softmax, whose ``thread.y`` is the
    warp) — the same kernel on a one-dimensional block of 32W, ``thread.x`` written as the
    lane and ``thread.y`` as ``thread.x / 32`` (CUDA forms warps from the linear thread
    index, so warp ``y`` is row ``y`` of the block): the forms below then see them."""
    bx, by, bz = kernel.launch.block
    if bx != WARP or bz != 1:
        return kernel

    def visit(n: Node) -> Node | None:
        if isinstance(n, Special) and n.kind == "thread" and n.axis == "x":
            return Special("lane", "", U32)
        if isinstance(n, Special) and n.kind == "thread" and n.axis == "y":
            return Binary("/", Special("thread", "x", U32), Const(WARP, U32), U32)
        if isinstance(n, Special) and n.kind == "block_dim" and n.axis in "xy":
            return Const(WARP if n.axis == "x" else by, n.type)
        return None

    body = transform(kernel.body, visit)
    launch = dataclasses.replace(kernel.launch, block=(WARP * by, 1, 1))
    return dataclasses.replace(kernel, body=body, launch=launch)


# --------------------------------------------------------------------------- analysis


def _plan(kernel: Kernel) -> Plan | NotApplicable:
    bx, by, bz = kernel.launch.block
    if (by, bz) != (1, 1) or bx % WARP:
        return NotApplicable("the block is not one-dimensional with whole warps")
    if kernel.launch.grid[1:] != ("1", "1"):
        return NotApplicable("the grid is not one-dimensional")
    for n in kernel.body.walk():
        if isinstance(n, _MATRIX + (Barrier,)) or (isinstance(n, Alloc) and n.space == "shared"):
            return NotApplicable(f"the kernel already works across warps "
                                 f"({type(n).__name__})")
        if isinstance(n, Shuffle) and n.mode != "idx":
            return NotApplicable("a shuffle other than a broadcast (run warp-reduce on the "
                                 "kernel's hand-written reductions first)")
        if isinstance(n, Special) and n.axis in ("y", "z") and n.kind != "block_dim":
            return NotApplicable(f"the kernel reads {n.kind}.{n.axis}")
    defs = analysis.single_defs(kernel)
    tid_vars = {k for k, v in defs.items() if is_thread_x(v)}
    lane_vars = {k for k, v in defs.items() if _lane_form(v, tid_vars)}
    warp_vars = {k for k, v in defs.items() if _warp_form(v, tid_vars)}
    chunks = [(lp, k) for lp in analysis.loops(kernel)
              if (k := _lane_loop(lp, lane_vars, tid_vars))]
    loops = [lp for lp, _k in chunks]
    problem = _thread_uses(kernel, loops, lane_vars, tid_vars)
    if problem:
        return NotApplicable(problem)
    if not loops:
        return NotApplicable("no loop strides over the lanes (c = lane; ...; c += 32)")
    verified: set[int] = set()
    for lp in loops:
        found = _loop_partials(kernel, lp, loops)
        if isinstance(found, str):
            return NotApplicable(found)
        verified |= found
    problem = _outside_loops(kernel, loops, verified, lane_vars, tid_vars) \
        or _memory(kernel, loops)
    if problem:
        return NotApplicable(problem)
    return Plan(bx // WARP, frozenset(lane_vars), frozenset(warp_vars), frozenset(tid_vars),
                tuple((lp.label, k) for lp, k in chunks))


def _is_tid(e: Expr, tid_vars: set[str]) -> bool:
    e = strip_casts(e)
    return is_thread_x(e) or (isinstance(e, Var) and e.name in tid_vars)


def _lane_or_tid(e: Expr, tid_vars: set[str]) -> bool:
    """``thread.x`` or the lane itself (``lane % 32`` is the lane too: in a block of one
    warp, ``thread.x`` reads as the lane)."""
    s = strip_casts(e)
    return _is_tid(e, tid_vars) or (isinstance(s, Special) and s.kind == "lane")


def _const(e: Expr, value: int) -> bool:
    e = strip_casts(e)
    return isinstance(e, Const) and not isinstance(e.value, bool) and e.value == value


def _lane_form(e: Expr, tid_vars: set[str]) -> bool:
    """``lane``, ``thread.x % 32`` or ``thread.x & 31`` (under casts)."""
    e = strip_casts(e)
    if isinstance(e, Special) and e.kind == "lane":
        return True
    return isinstance(e, Binary) and _lane_or_tid(e.left, tid_vars) and (
        (e.op == "%" and _const(e.right, WARP)) or (e.op == "&" and _const(e.right, WARP - 1)))


def _warp_form(e: Expr, tid_vars: set[str]) -> bool:
    """``warp``, ``thread.x / 32`` or ``thread.x >> 5`` (under casts)."""
    e = strip_casts(e)
    if isinstance(e, Special) and e.kind == "warp":
        return True
    return isinstance(e, Binary) and _is_tid(e.left, tid_vars) and (
        (e.op == "/" and _const(e.right, WARP)) or (e.op == ">>" and _const(e.right, 5)))


def _is_lane(e: Expr, lane_vars: set[str], tid_vars: set[str]) -> bool:
    s = strip_casts(e)
    return _lane_form(s, tid_vars) or (isinstance(s, Var) and s.name in lane_vars)


def _lane_loop(loop: For, lane_vars: set[str], tid_vars: set[str]) -> int:
    """``K`` for ``for (c = lane * K; c < n; c = c + 32 * K)`` (``K`` elements a lane at a
    time, a constant; for ``K = 1`` the step may be ``warp_size``), else 0."""
    c = loop.cond
    bounded = isinstance(c, Binary) and c.op in ("<", "<=") \
        and isinstance(strip_casts(c.left), Var) and strip_casts(c.left).name == loop.var
    u = loop.update
    if not (bounded and isinstance(u, Binary) and u.op == "+"
            and isinstance(strip_casts(u.left), Var) and strip_casts(u.left).name == loop.var):
        return 0
    chunk = _lane_times(loop.init, lane_vars, tid_vars)
    if chunk == 1 and isinstance(strip_casts(u.right), Special) \
            and strip_casts(u.right).kind == "warp_size":
        return 1
    return chunk if chunk and _const(u.right, WARP * chunk) else 0


def _lane_times(e: Expr, lane_vars: set[str], tid_vars: set[str]) -> int:
    """``K`` when ``e`` is the lane index times the positive constant ``K`` (1 for the lane
    index itself), else 0."""
    if _is_lane(e, lane_vars, tid_vars):
        return 1
    e = strip_casts(e)
    if isinstance(e, Binary) and e.op == "*":
        for a, b in ((e.left, e.right), (e.right, e.left)):
            b = strip_casts(b)
            if _is_lane(a, lane_vars, tid_vars) and isinstance(b, Const) \
                    and not isinstance(b.value, bool) and b.value > 0:
                return int(b.value)
    return 0


def _lane_test(cond: Expr, lane_vars: set[str], tid_vars: set[str]) -> Binary | None:
    """The test ``lane == 0`` (either way round) when ``cond`` is it or a conjunction with
    it (``lane == 0 && p != nullptr``), else None."""
    if isinstance(cond, Binary) and cond.op == "&&":
        return _lane_test(cond.left, lane_vars, tid_vars) or \
            _lane_test(cond.right, lane_vars, tid_vars)
    if _is_zero_lane(cond, lane_vars, tid_vars):
        return cond  # type: ignore[return-value]
    return None


def _is_zero_lane(e: Expr, lane_vars: set[str], tid_vars: set[str]) -> bool:
    """``lane == 0`` or ``0 == lane``."""
    return isinstance(e, Binary) and e.op == "==" and any(
        _is_lane(a, lane_vars, tid_vars) and _const(b, 0)
        for a, b in ((e.left, e.right), (e.right, e.left)))


def _thread_uses(kernel: Kernel, loops: list[For], lane_vars: set[str],
                 tid_vars: set[str]) -> str:
    """Why ``thread.x`` or the lane index is used other than as this rule maps it, or ""."""
    allowed: set[int] = set()

    def allow(e: Expr) -> None:
        allowed.update(id(n) for n in e.walk())

    for lp in loops:
        allow(lp.init)
    for n in kernel.body.walk():
        if isinstance(n, Declare) and n.name in lane_vars | tid_vars and n.init is not None:
            allow(n.init)
        elif isinstance(n, If) \
                and (test := _lane_test(n.cond, lane_vars, tid_vars)) is not None:
            allow(test)
        elif isinstance(n, Expr) and _warp_form(n, tid_vars):
            allow(n)
        elif isinstance(n, (Declare, Assign)) and n.name in lane_vars | tid_vars:
            return f"the lane index {n.name!r} is assigned"
    for n in kernel.body.walk():
        if id(n) in allowed:
            continue
        if _is_lane(n, lane_vars, tid_vars) if isinstance(n, Expr) else False:
            return ("the lane index is used other than to start a loop striding by 32 or "
                    "to test lane == 0")
        if isinstance(n, Expr) and _is_tid(n, tid_vars):
            return "thread.x is used other than as the lane or warp index"
    return ""


def _loop_partials(kernel: Kernel, loop: For, loops: list[For]) -> set[int] | str:
    """The warp reductions (by id) that combine what ``loop`` accumulates — partials
    ``p = p op t``, or the online softmax's running pair (:mod:`.online_pairs`) — or why its
    iterations cannot go to other threads."""
    declared = analysis.declared_names(loop.body) | {loop.var}
    for n in loop.body.walk():
        if isinstance(n, (Break, Return, Barrier, Shuffle, WarpReduce)):
            return f"{loop.label} holds a {type(n).__name__.lower()}"
        if isinstance(n, For) and n is not loop and n.label in {lp.label for lp in loops}:
            return f"{loop.label} holds another lane-strided loop"
        if isinstance(n, Atomic) and n.result is not None and n.result not in declared:
            return f"{loop.label} keeps an atomic's old value past the iteration"
    pos = position_of(kernel, loop)
    if pos is None:
        return f"{loop.label} is not found"
    before, after = pos.block.stmts[:pos.index], pos.block.stmts[pos.index + 1:]
    ops = accumulators(loop)
    if isinstance(ops, str):
        pair = online_pair(loop)
        if pair is None:
            return ops
        found = _starts_at_identity(before, pair.s, "sum") \
            or _starts_at_identity(before, pair.m, "max") or combined_after(after, pair)
        return found if isinstance(found, set) else \
            f"{loop.label}'s running pair ({pair.m}, {pair.s}): {found}"
    verified: set[int] = set()
    for name, op in ops.items():
        found = _starts_at_identity(before, name, op) or _reduced_after(after, name, op)
        if isinstance(found, str):
            return f"{loop.label}'s partial {name!r}: {found}"
        verified |= found
    return verified


def _starts_at_identity(before: tuple[Stmt, ...], name: str, op: str) -> str:
    """Why the partial's value entering the loop may not be the op's identity, or "". A max
    or min may start anywhere (they are idempotent); a sum must start at 0 — otherwise each
    thread would add its start once and the block would count it ``threads`` times."""
    for stmt in reversed(before):
        if isinstance(stmt, (Declare, Assign)) and stmt.name == name:
            value = stmt.init if isinstance(stmt, Declare) else stmt.value
            if op != "sum" or (value is not None and _const(value, 0)):
                return ""
            return "a sum that does not start at 0"
        if name in analysis.assigned_vars(stmt):
            return "set in a nested statement before the loop"
    return "not set right before the loop"


def _reduced_after(after: tuple[Stmt, ...], name: str, op: str) -> set[int] | str:
    """The warp reductions (by id) of the partial and its copies (``let w = p``: a helper
    function's argument, inlined), when each is read after the loop only by a warp
    reduction with ``op`` until it is overwritten (``p = reduce.op(p)`` leaves the total in
    it); else why not."""
    live = {name}
    verified: set[int] = set()
    for stmt in after:
        touched = (analysis.used_vars(stmt) | analysis.assigned_vars(stmt)) & live
        if not touched:
            continue
        if isinstance(stmt, Declare) and isinstance(stmt.init, Var) and stmt.init.name in live:
            live.add(stmt.name)
            continue
        reads = [n for n in stmt.walk() if isinstance(n, Var) and n.name in live]
        reductions = [n for n in stmt.walk() if isinstance(n, WarpReduce) and n.op == op
                      and isinstance(n.value, Var) and n.value.name in live]
        if not isinstance(stmt, (Declare, Assign, Store)) or \
                any(r not in {id(n.value) for n in reductions} for r in map(id, reads)):
            return f"read after the loop other than by a warp {op}"
        verified.update(id(n) for n in reductions)
        if isinstance(stmt, Assign) and stmt.name in live:
            live.discard(stmt.name)
            if not live:
                break
    return verified


def _guarded(kernel: Kernel, lane_vars: set[str], tid_vars: set[str]) -> dict[int, If]:
    """Every node under a ``lane == 0`` test (id → the test's If)."""
    return {id(n): s for s in kernel.body.walk() if isinstance(s, If)
            and _lane_test(s.cond, lane_vars, tid_vars) is not None for n in s.then.walk()}


def _outside_loops(kernel: Kernel, loops: list[For], verified: set[int],
                   lane_vars: set[str], tid_vars: set[str]) -> str:
    """Why a statement outside the lane-strided loops would not compute the same in every
    thread of the block after the rewrite, or "".

    Outside those loops only the partials (read by warp reductions alone, checked) and the
    ``lane == 0`` tests tell lanes apart, so everything else the warp computed was the same
    in all its lanes; what this checks is that nothing escapes a ``lane == 0`` test, that
    every warp reduction can become a block reduction, and that shuffles only broadcast."""
    inside = {id(n) for lp in loops for n in lp.walk()}
    guarded = _guarded(kernel, lane_vars, tid_vars)
    for stmt in stmts_in_order(kernel.body):
        if id(stmt) in inside:
            continue
        guard = guarded.get(id(stmt))
        if isinstance(stmt, If) and _lane_test(stmt.cond, lane_vars, tid_vars) is not None \
                and stmt.orelse is not None:
            return "a lane == 0 test with an else branch"
        if guard is not None:
            if isinstance(stmt, Return):
                return "a return under lane == 0"
            if isinstance(stmt, Assign) and stmt.name not in analysis.declared_names(guard.then):
                return f"{stmt.name!r} is set under lane == 0 and read by every lane"
        if isinstance(stmt, Atomic) and (guard is None or stmt.result is not None):
            return (f"an atomic on {stmt.buffer!r} outside the lane-strided loops that is "
                    "not a lone lane == 0 update")
        exprs = [n for n in stmt.children() if isinstance(n, Expr)]
        for n in (m for e in exprs for m in e.walk()):
            if not isinstance(n, WarpReduce):
                continue
            if not isinstance(stmt, (Declare, Assign, Store)):
                return f"a warp reduction inside a {type(stmt).__name__.lower()}"
            if guard is not None:
                return "a warp reduction under lane == 0"
            if id(n) not in verified:
                return "a warp reduction of something other than a loop's partials"
            if any(isinstance(m, Select) or (isinstance(m, Binary) and m.op in ("&&", "||"))
                   for e in exprs for m in e.walk() if _holds(m, n)):
                return "a warp reduction under a conditional expression"
    return ""


def _holds(outer: Node, inner: Node) -> bool:
    return outer is not inner and any(m is inner for m in outer.walk())


def _memory(kernel: Kernel, loops: list[For]) -> str:
    """Why memory accesses would see other threads' values after the rewrite, or "". A
    thread's own arrays (``local``: a pack of 16 bytes) are its own whatever thread it is."""
    private = {n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "local"}
    in_loop: dict[int, For] = {id(n): lp for lp in loops for n in lp.walk()}
    loop_written = {n.buffer for lp in loops for n in lp.walk() if isinstance(n, (Store, Atomic))}
    loop_read = {n.buffer for lp in loops for n in lp.walk() if isinstance(n, Load)}
    other_written = {n.buffer for n in kernel.body.walk()
                     if isinstance(n, (Store, Atomic)) and id(n) not in in_loop}
    bases: dict[str, Expr] = {}
    for n in kernel.body.walk():
        if not isinstance(n, (Load, Store, Atomic)) or n.buffer in private:
            continue
        if isinstance(n, Load) and n.buffer in other_written:
            return f"{n.buffer!r} is read after a write outside the lane-strided loops"
        owner = in_loop.get(id(n))
        if owner is None:
            if n.buffer in loop_written:
                return f"{n.buffer!r} is written by a lane-strided loop and used outside them"
        elif n.buffer in loop_written and n.buffer in loop_read:
            base = _base_of(n.index, owner.var)
            if base is None or bases.setdefault(n.buffer, base) != base:
                return (f"{n.buffer!r} is written and read by lane-strided loops at indices "
                        "that differ (another thread may own the element)")
    return ""


def _base_of(index: Expr, var: str) -> Expr | None:
    """``B`` when ``index`` is ``B + var``, ``var + B`` or ``var`` (``B`` free of ``var``)."""
    e = strip_casts(index)
    if isinstance(e, Var) and e.name == var:
        return Const(0, I32)
    if isinstance(e, Binary) and e.op == "+":
        for a, b in ((e.left, e.right), (e.right, e.left)):
            if isinstance(strip_casts(b), Var) and strip_casts(b).name == var \
                    and var not in analysis.used_vars(a):
                return a
    return None


# ---------------------------------------------------------------------- the rewrite


def _widen(kernel: Kernel, plan: Plan, threads: int) -> Kernel:
    old_width = plan.warps * WARP
    lanes, tids = set(plan.lane_vars), set(plan.tid_vars)
    chunks = dict(plan.loops)

    def visit(n: Node) -> Node | None:
        if isinstance(n, Expr) and _warp_form(n, tids):
            return Special("block", "y", U32) if n.type == U32 else Cast(
                Special("block", "y", U32), n.type)
        if isinstance(n, Special) and n.kind == "block_dim" and n.axis == "x":
            return Const(old_width, n.type)
        if isinstance(n, Special) and n.kind == "warp_size":
            return Const(WARP, n.type)
        if isinstance(n, Shuffle):  # a broadcast of a warp-uniform value (checked)
            return n.value
        if isinstance(n, Expr) and _is_zero_lane(n, lanes, tids):  # only in If tests (checked)
            return Binary("==", Special("thread", "x", U32), Const(0, U32), BOOL)
        if isinstance(n, For) and n.label in chunks:
            t, chunk = n.type, chunks[n.label]
            first, step = Cast(Special("thread", "x", U32), t), \
                Cast(Special("block_dim", "x", U32), t)
            if chunk != 1:
                first, step = (Binary("*", e, Const(chunk, t), t) for e in (first, step))
            return dataclasses.replace(
                n, init=first, update=Binary("+", Var(n.var, t), step, t))
        return None

    body = transform(kernel.body, visit)
    body = _drop_unused(body, lanes | tids | set(plan.warp_vars))
    scratch = Scratch()
    body = block_reductions(kernel, body, False, scratch)
    body = transform(body, lambda n: fold_expr(n) if isinstance(n, Expr) else None)
    body = dataclasses.replace(body, stmts=tuple(scratch.allocs) + body.stmts)
    grid = kernel.launch.grid
    if plan.warps > 1:
        grid = (grid[0], str(plan.warps), "1")
    launch = dataclasses.replace(kernel.launch, grid=grid, block=(threads, 1, 1))
    return dataclasses.replace(kernel, body=body, launch=launch)


def _drop_unused(body: Block, names: set[str]) -> Block:
    """``body`` without the declarations of ``names`` that nothing reads any more."""
    read = analysis.used_vars(body)

    def visit(n: Node) -> Node | None:
        if isinstance(n, Block) and any(isinstance(s, Declare) and s.name in names
                                        and s.name not in read for s in n.stmts):
            return dataclasses.replace(n, stmts=tuple(
                s for s in n.stmts if not (isinstance(s, Declare) and s.name in names
                                           and s.name not in read)))
        return None

    return transform(body, visit)


RULES = [WidenWarps()]
