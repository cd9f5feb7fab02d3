"""split-keys: deal the iterations of a block's serial online-softmax loop to ``ways`` copies
of the block and combine their partial results through shared memory (flash-decoding's split
of the keys, within one block)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from kir import analysis
from kir.analysis import canonical, strip_casts
from kir.analysis.loop_edits import Namer
from kir.analysis.memory import shared_bytes
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Call,
    Cast,
    Component,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    MakeVector,
    Node,
    Select,
    Shuffle,
    Special,
    Stmt,
    Store,
    Var,
    WarpReduce,
    transform,
)
from kir.ir.types import BOOL, I32, ScalarType, VectorType
from kir.rewrites.parallel.online_pairs import is_scaled, max_with, weighted
from kir.rules import LoopRule, Match, NotApplicable, RuleContext, choice

# A running maximum must start at or below this (or at -inf) for a group that gets no
# iteration to weigh nothing in the combine.
_LOWEST_START = -1e30


@dataclass(frozen=True)
class Plan:
    """The loop's place among the kernel's top-level statements, its running max ``m`` and
    sum ``s``, the accumulators rescaled with them, and the block's width."""

    at: int
    m: str
    s: str
    accumulators: tuple[str, ...]
    threads: int


class SplitKeys(LoopRule):
    """Deal a serial loop carrying an online softmax over ``ways`` copies of the block.

    CUDA practice: Flash-Decoding (Dao et al., 2023) splits the keys of a decode step when
    one block a head leaves the GPU idle: each split keeps its own running max ``m``, sum
    ``s`` and output accumulator, and a final step rescales each split's ``s`` and
    accumulator by ``exp(m_split - M)`` (``M`` the largest ``m``) and adds them up. Here the
    splits are ``ways`` groups of one block: a kernel launched with ``T`` threads (32 or a
    multiple) runs with ``T * ways``, thread ``x`` acting as thread ``x % T`` of group
    ``x / T``; with ``T`` < 32 each group takes a whole warp, whose ``32 / T`` copies of the
    original threads compute alike (the original's shuffles named lanes that did not
    exist; here every lane of the warp reaches them, whatever the other groups' trip
    counts). Group ``g`` takes iterations ``a + g, a + g + ways, ...``; after the loop every
    thread (the first copy) writes its ``(m, s, accumulators)`` to shared memory, a
    barrier, and every thread combines the groups' values for its own position. The code
    after the loop then runs in every group alike, its stores made by group 0's first copy
    only.

    Shape required: a one-dimensional block; the loop at the top level of the kernel,
    ``for v = a; v < n; v = v + 1`` with ``a`` and ``n`` the same in every thread; before
    it only lets and assignments; in its body only lets, assignments, and inner loops and
    branches of those that neither read nor write the carried variables (a soft cap or a
    bias on the score). The variables the loop carries
    (declared before it, assigned in it) must be exactly a running max ``m' = max(m, v)``, a
    running sum ``s' = s * exp(m - m') + g * exp(v - m')`` and accumulators (scalars or
    vectors, component by component) ``o' = o * exp(m - m') + h * exp(v - m')``, with
    ``v``, ``g`` and ``h`` free of them (``kir.rewrites.parallel.online_pairs``: the split
    is exact in real arithmetic), starting at ``m <= -1e30`` (or -inf) and ``s = o = 0``.
    Legality also checked: no atomics; no buffer both read and written by the kernel (a
    group could otherwise read what group 0 stored); no ``warp`` index; with fewer than 32
    threads, ``T`` divides 32, every shuffle stays within ``T`` lanes, no warp reduction and
    no ``lane`` index (a group's copies share a warp). The result is specialized to nothing: it
    is right at every size.
    """

    name = "split-keys"

    @dataclass(frozen=True)
    class Params:
        ways: int = choice(8, 4, 16, 32, 2)

    def plan_loop(self, kernel: Kernel, loop: For) -> Plan | NotApplicable:
        launch = kernel.launch
        if launch.block[1:] != (1, 1):
            return NotApplicable("the block is not one-dimensional")
        threads = launch.block[0]
        at = next((i for i, s in enumerate(kernel.body.stmts) if s is loop), None)
        if at is None:
            return NotApplicable(f"{loop.label} is not at the top level of the kernel")
        c = canonical(loop)
        if c is None or c.step != 1 or c.inclusive:
            return NotApplicable(f"{loop.label} is not a loop v = a; v < n; v = v + 1")
        prologue = kernel.body.stmts[:at]
        if not all(isinstance(s, (Declare, Assign)) for s in prologue):
            return NotApplicable(f"statements other than lets come before {loop.label}")
        per_thread = _thread_dependent(prologue)
        for bound in (c.start, c.stop):
            if _reads_thread(bound) or analysis.used_vars(bound) & per_thread:
                return NotApplicable(f"{loop.label}'s bounds differ between threads")
        problem = _kernel_problem(kernel, threads) or _body_problem(loop)
        if problem:
            return NotApplicable(problem)
        declared = {s.name: s for s in prologue if isinstance(s, Declare)}
        carried = analysis.assigned_vars(loop.body) & set(declared)
        final = _net_effect(loop.body, carried)
        if isinstance(final, str):
            return NotApplicable(final)
        roles = _roles(final, carried)
        if isinstance(roles, str):
            return NotApplicable(roles)
        m, s, accumulators = roles
        for name in carried:
            if any(isinstance(st, Assign) and st.name == name for st in prologue):
                return NotApplicable(f"{name} is assigned before {loop.label}: its start is "
                                     "not known")
        if not _starts_lowest(declared[m].init) or not all(
                _is_zero(declared[n].init) for n in (s, *accumulators)):
            return NotApplicable(f"{loop.label}'s running values do not start at -inf and 0")
        return Plan(at, m, s, tuple(sorted(accumulators)), threads)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan, ways = match.plan, params.ways
        threads = _group_width(plan.threads) * ways
        limit = ctx.target.max_threads if ctx.target is not None else 1024
        if threads > limit:
            return NotApplicable(f"{ways} groups of {plan.threads} threads make {threads}, "
                                 f"over the {limit} a block may have")
        return _rewrite(kernel, plan, ways, ctx)


def _group_width(threads: int) -> int:
    """Threads a group takes: the block's, or a whole warp for a block narrower than one
    (its 32 / T copies compute alike, so that a shuffle of the original block, whose other
    lanes did not exist, finds every lane of its warp at it)."""
    return max(threads, 32)


def _reads_thread(e: Node) -> bool:
    """Whether ``e`` reads a thread, lane or warp index. (Not
    :func:`kir.analysis.is_thread_dependent`: that counts every load as varying, and a
    bound read from memory at a uniform index, as a decode kernel's context length, is the
    same in every thread here, the kernel writing no buffer it reads.)"""
    return any(isinstance(n, Special) and n.kind in analysis.THREAD_VARYING
               for n in e.walk())


def _thread_dependent(stmts) -> set[str]:
    """Locals of straight-line ``stmts`` whose value may differ between threads."""
    names: set[str] = set()
    for stmt in stmts:
        value = stmt.init if isinstance(stmt, Declare) else stmt.value
        if value is not None and (_reads_thread(value) or analysis.used_vars(value) & names):
            names.add(stmt.name)
    return names


def _kernel_problem(kernel: Kernel, threads: int) -> str:
    """Why groups of ``threads`` threads cannot share the kernel's block, or ''."""
    written = analysis.buffers_written(kernel.body)
    for n in kernel.body.walk():
        if isinstance(n, Atomic):
            return "the kernel has atomics"
        if isinstance(n, Load) and n.buffer in written:
            return f"the kernel both reads and writes {n.buffer}"
        if isinstance(n, Special) and n.kind == "warp":
            return "the kernel reads its warp index, which groups change"
        if isinstance(n, Special) and n.kind in ("thread", "block_dim") and n.axis != "x":
            return "the kernel reads a thread index other than x"
        if threads < 32:
            if isinstance(n, Special) and n.kind == "lane":
                return "a group's copies share a warp: the lane index changes"
            if isinstance(n, WarpReduce):
                return "a warp reduction would add up a group's copies"
            if isinstance(n, Shuffle) and n.width > threads:
                return f"a shuffle spans {n.width} lanes, more than the block's {threads}"
    if threads < 32 and 32 % threads:
        return f"{threads} threads a group do not divide a warp"
    if threads > 32 and threads % 32:
        return f"{threads} threads a group are not whole warps"
    return ""


def _body_problem(loop: For) -> str:
    for n in loop.body.walk():
        if isinstance(n, Stmt) and not isinstance(n, (Declare, Assign, For, If, Block)):
            return (f"{loop.label}'s body holds a {type(n).__name__}, not only lets, loops "
                    "and branches")
    return ""


def _net_effect(body: Block, carried: set[str]) -> dict[str, Expr] | str:
    """What the body leaves in the carried variables, in terms of their values before it
    (lets substituted; what an inner loop or branch assigns stays an opaque name, provided
    it neither reads nor writes a carried variable, even through a let)."""
    env: dict[str, Expr] = {}
    # The names each substituted value reads, kept beside it: the values share subtrees and
    # walking one as a tree costs what it grew to, not what it is.
    reads: dict[str, set[str]] = {}
    final: dict[str, Expr] = {}
    tainted: set[str] = set(carried)

    def substituted(e: Expr) -> Expr:
        return transform(e, lambda n: env.get(n.name) if isinstance(n, Var) else None)

    def read_by(e: Expr) -> set[str]:
        return set().union(*(reads.get(name, {name}) for name in analysis.used_vars(e)))

    for stmt in body.stmts:
        if isinstance(stmt, (For, If)):
            inner_reads = {n.name for n in stmt.walk() if isinstance(n, Var)}
            inner_writes = analysis.assigned_vars(stmt) | (
                {stmt.var} if isinstance(stmt, For) else set())
            if (inner_reads | inner_writes) & tainted:
                return "an inner loop or branch reads or writes the running values"
            for name in inner_writes:
                env.pop(name, None)  # its value after it: an opaque name from here
                reads.pop(name, None)
            continue
        raw = stmt.init if isinstance(stmt, Declare) else stmt.value
        if raw is None:
            env.pop(stmt.name, None)
            reads.pop(stmt.name, None)
            continue
        value, names = substituted(raw), read_by(raw)
        env[stmt.name], reads[stmt.name] = value, names
        if names & carried:
            tainted.add(stmt.name)
        if isinstance(stmt, Assign) and stmt.name in carried:
            final[stmt.name] = value
    return final


def _component(e: Expr, i: int) -> Expr:
    """Element ``i`` of vector expression ``e``, with ``{a, b, ..}.i`` read through."""
    def fold(n: Node) -> Node | None:
        if isinstance(n, Component) and isinstance(n.vector, MakeVector):
            return n.vector.elems[n.index]
        return None
    if isinstance(e, MakeVector):
        return transform(e.elems[i], fold, shared=True)  # type: ignore[return-value]
    return transform(Component(e, i, e.type.elem), fold,  # type: ignore[union-attr]
                     shared=True)


def _roles(final: dict[str, Expr], carried: set[str]) -> tuple[str, str, set[str]] | str:
    """(max, sum, accumulators) of the carried variables, or why they are not an online
    softmax with accumulators."""
    if set(final) != carried:
        return "some carried variable is not set on every iteration"
    maxes = [(m, max_with(final[m], m)) for m in sorted(carried)]
    maxes = [(m, v) for m, v in maxes if v is not None and not analysis.used_vars(v) & carried]
    if len(maxes) != 1:
        return "no running max m' = max(m, v) with v free of the running values"
    m, v = maxes[0]
    new_m = final[m]
    rest = carried - {m}
    sums = {n for n in rest if isinstance(final[n].type, ScalarType)
            and _rescaled(final[n], Var(n, final[n].type), m, new_m, v, carried)}
    if not sums:
        return "no running sum s' = s * exp(m - m') + g * exp(v - m')"
    s = min(sums)
    for n in rest - {s}:
        t = final[n].type
        parts = [(final[n], Var(n, t))] if isinstance(t, ScalarType) else [
            (_component(final[n], i), Component(Var(n, t), i, t.elem))
            for i in range(t.count)]  # type: ignore[union-attr]
        if not all(_rescaled(e, own, m, new_m, v, carried) for e, own in parts):
            return f"{n} is not rescaled with the running sum (o' = o * exp(m - m') + ...)"
    return m, s, rest - {s}


def _rescaled(e: Expr, own: Expr, m: str, new_m: Expr, v: Expr, carried: set[str]) -> bool:
    """``e`` is ``own * exp(m - m') + h * exp(v - m')`` (either order), ``h`` free of the
    running values (or absent)."""
    if not (isinstance(e, Binary) and e.op == "+"):
        return False
    for kept, added in ((e.left, e.right), (e.right, e.left)):
        if is_scaled(kept, own, Var(m, new_m.type), new_m) and \
                weighted(added, v, new_m, carried):
            return True
    return False


def _starts_lowest(init: Expr | None) -> bool:
    init = strip_casts(init) if init is not None else None
    return isinstance(init, Const) and isinstance(init.value, float) \
        and init.value <= _LOWEST_START


def _is_zero(init: Expr | None) -> bool:
    init = strip_casts(init) if init is not None else None
    if isinstance(init, MakeVector):
        return all(_is_zero(e) for e in init.elems)
    return isinstance(init, Const) and init.value == 0


def _rewrite(kernel: Kernel, plan: Plan, ways: int, ctx: RuleContext) -> Kernel | NotApplicable:
    namer = Namer(kernel)
    t, g = Var(namer.name("t_in_group"), I32), Var(namer.name("group"), I32)
    copies = _group_width(plan.threads) // plan.threads
    copy = Var(namer.name("copy"), I32) if copies > 1 else None
    width = Const(plan.threads, I32)
    declared = {s.name: s.type for s in kernel.body.stmts[:plan.at] if isinstance(s, Declare)}

    def remap(n: Node) -> Node | None:
        if isinstance(n, Special) and n.kind == "thread":
            return Cast(t, n.type)
        if isinstance(n, Special) and n.kind == "block_dim":
            return Const(plan.threads, n.type)
        return None

    body = transform(kernel.body, remap)
    assert isinstance(body, Block)
    stmts = list(body.stmts)
    loop = stmts[plan.at]
    assert isinstance(loop, For)
    split = dataclasses.replace(
        loop, init=Binary("+", loop.init, as_type(g, loop.type), loop.type),
        update=Binary("+", Var(loop.var, loop.type), Const(ways, loop.type), loop.type))
    zero = Const(0, I32)
    first_copy = Binary("==", copy, zero, BOOL) if copy is not None else None
    combine = _combine(plan, ways, declared, t, g, first_copy, namer, ctx, kernel)
    if isinstance(combine, NotApplicable):
        return combine
    first = Binary("==", g, zero, BOOL)
    if first_copy is not None:
        first = Binary("&&", first, first_copy, BOOL)
    after = [_guard_stores(s, first) for s in stmts[plan.at + 1:]]
    thread = Cast(Special("thread", "x"), I32)
    group_width = Const(_group_width(plan.threads), I32)
    within = Binary("%", thread, group_width, I32)
    head = [Declare(t.name, I32, Binary("%", within, width, I32), loc=loop.loc),
            Declare(g.name, I32, Binary("/", thread, group_width, I32), loc=loop.loc)]
    if copy is not None:
        head.append(Declare(copy.name, I32, Binary("/", within, width, I32), loc=loop.loc))
    new_body = Block(tuple(head + stmts[:plan.at] + [split] + combine + after), body.loc)
    launch = dataclasses.replace(kernel.launch,
                                 block=(_group_width(plan.threads) * ways, 1, 1))
    return dataclasses.replace(kernel, body=new_body, launch=launch)


def as_type(e: Expr, t: ScalarType) -> Expr:
    """``e`` cast to ``t`` unless it already is one."""
    return e if e.type == t else Cast(e, t)


def _combine(plan: Plan, ways: int, declared: dict, t: Var, g: Var, first_copy: Expr | None,
             namer: Namer, ctx: RuleContext, kernel: Kernel) -> list[Stmt] | NotApplicable:
    """Each thread's (m, s, accumulators) to shared memory, a barrier, then every thread
    combines the groups' values for its own position: M = max m_j, s = sum s_j * w_j,
    o = sum o_j * w_j with w_j = exp(m_j - M) (1 where m_j = M, so that groups that saw no
    iteration combine to the start values, as the original leaves them)."""
    slots = plan.threads * ways
    names = [plan.m, plan.s, *plan.accumulators]
    lanes = {n: (declared[n].count if isinstance(declared[n], VectorType) else 1)
             for n in names}
    elems = {n: (declared[n].elem if isinstance(declared[n], VectorType) else declared[n])
             for n in names}
    used = sum(slots * lanes[n] * elems[n].nbytes for n in names)
    budget, existing = ctx.static_shared_budget, shared_bytes(kernel)
    if used + existing > budget:
        return NotApplicable(f"combining {ways} groups needs {used} B of shared memory, over "
                             f"the {budget - existing} B left")
    arrays = {n: namer.name(f"{n}_groups") for n in names}
    out: list[Stmt] = [Alloc(arrays[n], elems[n], slots * lanes[n], "shared") for n in names]

    def of_group(v: Expr) -> Expr:
        """Where group ``v`` keeps this thread's values (group 0: at the thread's index)."""
        if v == Const(0, I32):
            return t
        return Binary("+", Binary("*", v, Const(plan.threads, I32), I32), t, I32)

    def at(base: Expr, n: str, i: int) -> Expr:
        index = Binary("*", base, Const(lanes[n], I32), I32) if lanes[n] > 1 else base
        return Binary("+", index, Const(i, I32), I32) if i else index

    def lane(n: str, i: int) -> Expr:
        v = Var(n, declared[n])
        return Component(v, i, elems[n]) if lanes[n] > 1 else v

    saves: list[Stmt] = [Store(arrays[n], at(of_group(g), n, i), lane(n, i))
                         for n in names for i in range(lanes[n])]
    out += saves if first_copy is None else [If(first_copy, Block(tuple(saves)))]
    out.append(Barrier("block"))
    return out + combine_splits(names, declared, ways, lambda v, n, i: Load(
        arrays[n], at(of_group(v), n, i), elems[n]), namer)


def combine_splits(names: list[str], declared: dict, ways: int,
                   read: Callable[[Expr, str, int], Expr], namer: Namer) -> list[Stmt]:
    """Combine the ``ways`` splits' running values for this thread's position: M = max m_j,
    s = sum s_j * w_j, o = sum o_j * w_j with w_j = exp(m_j - M) (1 where m_j = M, so that
    splits that saw no iteration combine to the start values, as the original leaves them).
    ``names`` are m, s and the accumulators; ``read(j, n, i)`` is component ``i`` of value
    ``n`` as split ``j`` left it (split-keys: shared memory; split-keys-grid: a workspace)."""
    m, rest = names[0], names[1:]
    mt = declared[m]
    big = namer.name(f"{m}_all")
    j, k = namer.name("j"), namer.name("k")
    jv, kv = Var(j, I32), Var(k, I32)

    def lanes(n: str) -> int:
        return declared[n].count if isinstance(declared[n], VectorType) else 1

    def own(n: str, i: int) -> Expr:
        v = Var(n, declared[n])
        return Component(v, i, declared[n].elem) if lanes(n) > 1 else v

    def loop(var: Var, start: int, body: tuple[Stmt, ...]) -> For:
        return For(namer.label(), var.name, I32, Const(start, I32),
                   Binary("<", var, Const(ways, I32), BOOL),
                   Binary("+", var, Const(1, I32), I32), Block(body))

    out: list[Stmt] = [Declare(big, mt, read(Const(0, I32), m, 0)),
                       loop(kv, 1, (Assign(big, Call("max", (Var(big, mt), read(kv, m, 0)),
                                                     mt)),))]
    out += [Assign(n, zero_of(declared[n])) for n in rest]
    mj, w = namer.name(f"{m}_j"), namer.name("weight")
    step: list[Stmt] = [
        Declare(mj, mt, read(jv, m, 0)),
        Declare(w, mt, Select(Binary("==", Var(mj, mt), Var(big, mt), BOOL), Const(1.0, mt),
                              Call("exp", (Binary("-", Var(mj, mt), Var(big, mt), mt),), mt),
                              mt))]
    for n in rest:
        t = declared[n].elem if lanes(n) > 1 else declared[n]
        parts = [Binary("+", own(n, i), Binary("*", read(jv, n, i), Var(w, mt), t), t)
                 for i in range(lanes(n))]
        step.append(Assign(n, MakeVector(tuple(parts), declared[n]) if lanes(n) > 1
                           else parts[0]))
    out += [loop(jv, 0, tuple(step)), Assign(m, Var(big, mt))]
    return out


def zero_of(t) -> Expr:
    """Zero of scalar or vector type ``t``."""
    if isinstance(t, VectorType):
        return MakeVector(tuple(Const(0.0, t.elem) for _ in range(t.count)), t)
    return Const(0.0 if t.is_float else 0, t)


def _guard_stores(stmt: Stmt, first: Expr) -> Stmt:
    """``stmt`` with every store made only where ``first`` holds (group 0's first copy)."""

    def guard(n: Node) -> Node | None:
        if isinstance(n, Store):
            return If(first, Block((n,)), loc=n.loc)
        return None
    return transform(stmt, guard)  # type: ignore[return-value]


RULES = [SplitKeys()]
