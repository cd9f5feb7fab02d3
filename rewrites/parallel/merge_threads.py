"""merge-threads: one thread does the work of `factor` threads of its block (register blocking)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import canonical, declared_names, has_matrix_stmts, has_own_exit, single_defs
from kir.analysis.loop_edits import Namer
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Node,
    Return,
    Shuffle,
    Special,
    Stmt,
    Store,
    Var,
    WarpReduce,
    While,
    transform,
)
from kir.rules import BaseRule, Match, NotApplicable, RuleContext, choice

AXES = "xyz"


class MergeThreads(BaseRule):
    """Thread coarsening within a block: each thread does the work of `factor` threads.

    CUDA practice: thread coarsening / register blocking (Kirk & Hwu, "Programming Massively
    Parallel Processors", 4th ed., ch. 6.3; Volkov, "Better performance at lower occupancy",
    GTC 2010). Along block dimension ``dim`` the block shrinks from ``n`` to ``n / factor``
    threads; thread ``t`` runs copies ``c = 0..factor-1`` of the old threads ``t + c * n /
    factor`` (strided, so loads along x stay coalesced). In copy ``c`` every read of
    ``thread.<dim>`` becomes ``thread.<dim> + c * n / factor`` and ``block_dim.<dim>`` the
    old size ``n``. The grid does not change. Values all copies share (``Bs[k][tx]`` in a
    tiled SGEMM merged along y) are then loaded once and kept in a register.

    The rewrite is the "barrier fission" of CUDA-on-CPU compilers (MCUDA, Stratton et al.
    2008): the body is split at barriers into barrier-free segments and each segment becomes
    its ``factor`` copies, fully unrolled, with each copy's locals renamed (``acc_0 ..
    acc_3``) so they stay in registers. Loops with a barrier inside stay one loop and their
    body is split the same way. Locals declared once, never reassigned and the same for every
    merged copy (``tx`` when merging y) are declared once and shared. Counted loops with
    bounds the same for every copy are unrolled-and-jammed: one loop whose body holds the
    copies of the old body, so the inner product of SGEMM reads ``Bs[k*16+tx]`` once for all
    copies' multiply-adds.

    Legality checked: between two barriers the threads of a CUDA block run in any
    interleaving, so a race-free kernel gives the same result for any order of the copies
    that keeps each copy's own order (which both replication and jamming do). A barrier must
    sit at top level or in ``for`` loops whose bounds do not depend on ``thread.<dim>``
    (directly, through locals, loads or thread-dependent control flow), without their own
    ``break``/``continue`` and not writing their counter; barriers under ``if``/``while``
    are refused. Refused: warp-level code (shuffles, warp reductions, ``__syncwarp``,
    lane/warp indices, matrix tiles), whose lanes would change; any ``return`` (one copy's
    exit would end the others); shared arrays below the top level; a block size along
    ``dim`` not divisible by ``factor``. Jammed loops must be counted (constant step, bound
    not written in the body) with no ``break``/``continue`` of their own.
    Not checked: that the kernel is free of data races between threads of a segment (CUDA
    leaves racy kernels undefined; such a kernel may change results).
    """

    name = "merge-threads"
    site_key = "dim"

    @dataclass(frozen=True)
    class Params:
        factor: int = choice(2, 4, 8)

    def candidates(self, kernel: Kernel) -> list[str]:
        block = kernel.launch.block
        return [d for i, d in enumerate(AXES) if block[i] > 1 and block[i] % 2 == 0]

    def plan(self, kernel: Kernel, site: str) -> _Plan:
        unsupported = _unsupported(kernel)
        if unsupported:  # (no need for the taint)
            return _Plan(set(), set(), NotApplicable(unsupported))
        tainted = _dim_tainted(kernel, site)
        problem = _barrier_problem(kernel.body.stmts, True, _Varies(site, tainted))
        return _Plan(tainted, _shareable(kernel, tainted),
                     NotApplicable(problem) if problem else None)

    def apply(self, kernel: Kernel, match: Match, params: Params,
              ctx: RuleContext) -> Kernel | NotApplicable:
        site, factor, plan = match.site, params.factor, match.plan
        axis = AXES.index(site)
        old = kernel.launch.block[axis]
        if not isinstance(old, int):
            return NotApplicable(f"block.{site} = {old!r} is not a compile-time constant")
        if old <= 1 or old % factor:
            return NotApplicable(f"block.{site} = {old} is not divisible by factor {factor}")
        if plan.refusal is not None:
            return plan.refusal
        merger = _Merger(kernel, site, factor, old, plan)
        stmts = merger.level(kernel.body.stmts)
        block = list(kernel.launch.block)
        block[axis] = old // factor
        return dataclasses.replace(
            kernel, body=Block(tuple(stmts), kernel.body.loc),
            launch=dataclasses.replace(kernel.launch, block=tuple(block)))


@dataclass(frozen=True)
class _Plan:
    """What the rewrite along one block dimension needs: the locals that differ between the
    threads merged, those one declaration serves for all copies, and why the kernel cannot
    be merged (None: it can). The refusal is kept in the plan rather than returned by the
    analysis so that the rule lists the same sites as before protocol v2 (issue 11 tightens
    that separately)."""

    tainted: set[str]
    shareable: set[str]
    refusal: NotApplicable | None


def _unsupported(kernel: Kernel) -> str | None:
    """Kernel-wide shapes the rule refuses, with the reason."""
    if has_matrix_stmts(kernel.body):
        return "the kernel uses warp-level matrix tiles (their lanes would change)"
    for n in kernel.body.walk():
        if isinstance(n, (Shuffle, WarpReduce)):
            return "the kernel uses warp shuffles/reductions (merging threads changes lanes)"
        if isinstance(n, Special) and n.kind in ("lane", "warp"):
            return f"the kernel reads the {n.kind} index (merging threads changes lanes)"
        if isinstance(n, Barrier) and n.scope != "block":
            return "the kernel synchronizes a warp (__syncwarp)"
    if any(isinstance(n, Return) for n in kernel.body.walk()):
        return "the kernel has a return (one merged thread's exit would end the others)"
    return None


class _Varies:
    """Whether an expression may differ between the threads merged along ``dim``."""

    def __init__(self, dim: str, tainted: set[str]) -> None:
        self.dim, self.tainted = dim, tainted

    def __call__(self, e: Expr) -> bool:
        return any(isinstance(n, Special) and n.kind == "thread" and n.axis == self.dim
                   or isinstance(n, Load) or isinstance(n, Var) and n.name in self.tainted
                   for n in e.walk())


def _barrier_problem(stmts: tuple[Stmt, ...], top: bool, varies: _Varies) -> str | None:
    """Why the barriers in ``stmts`` cannot stay where they are for all copies, or None: a
    barrier may sit at top level or in ``for`` loops with uniform bounds, no exit of their own
    and an unwritten counter (the loops :meth:`_Merger.level` keeps as one loop); shared
    arrays are declared at the top level only."""
    for s in stmts:
        if isinstance(s, Alloc) and s.space == "shared":
            if not top:
                return f"shared array {s.name} is declared below the top level"
        elif isinstance(s, Barrier) or not _has_barrier(s):
            continue
        elif not isinstance(s, For):
            kind = "an if" if isinstance(s, If) else "a while loop" if isinstance(s, While) \
                else "a nested block"
            return (f"a barrier sits inside {kind}; only for loops with uniform bounds may "
                    f"hold barriers")
        elif any(varies(e) for e in (s.init, s.cond, s.update)):
            return f"loop {s.label} holds a barrier and its bounds depend on thread.{varies.dim}"
        elif has_own_exit(s):
            return f"loop {s.label} holds a barrier and has break/continue"
        elif any(isinstance(n, (Assign, Declare)) and n.name == s.var for n in s.body.walk()):
            return f"loop {s.label} holds a barrier and writes its counter"
        else:
            inner = _barrier_problem(s.body.stmts, False, varies)
            if inner:
                return inner
    return None


def _dim_tainted(kernel: Kernel, dim: str) -> set[str]:
    """Locals whose value may differ between threads that differ only in ``thread.<dim>``
    (a conservative taint like analysis.thread_dependent_vars, for one axis: loads, atomic
    results and anything assigned under such control flow count as different)."""
    tainted: set[str] = set()

    def varies(e: Expr | None) -> bool:
        if e is None:
            return True
        for n in e.walk():
            if isinstance(n, Special) and (n.kind == "thread" and n.axis == dim
                                           or n.kind in ("lane", "warp")):
                return True
            if isinstance(n, (Load, Shuffle, WarpReduce)) or \
                    isinstance(n, Var) and n.name in tainted:
                return True
        return False

    changed = True
    while changed:
        changed = False
        stack: list[tuple[Stmt, bool]] = [(kernel.body, False)]
        while stack:
            s, ctx = stack.pop()
            targets: list[tuple[str, Expr | None]] = []
            if isinstance(s, Block):
                stack.extend((t, ctx) for t in s.stmts)
            elif isinstance(s, If):
                inner = ctx or varies(s.cond)
                stack.append((s.then, inner))
                if s.orelse is not None:
                    stack.append((s.orelse, inner))
            elif isinstance(s, While):
                stack.append((s.body, ctx or varies(s.cond)))
            elif isinstance(s, For):
                targets += [(s.var, s.init), (s.var, s.update)]
                stack.append((s.body, ctx or any(map(varies, (s.init, s.cond, s.update)))))
            elif isinstance(s, Declare):
                targets.append((s.name, s.init if s.init is not None else Const(0, s.type)))
            elif isinstance(s, Assign):
                targets.append((s.name, s.value))
            elif isinstance(s, Atomic) and s.result:
                targets.append((s.result, None))
            for name, value in targets:
                if name not in tainted and (ctx or varies(value)):
                    tainted.add(name)
                    changed = True
    return tainted


def _shareable(kernel: Kernel, tainted: set[str]) -> set[str]:
    """Locals declared once with an initializer, never written again and not tainted: one
    declaration can serve every copy."""
    return set(single_defs(kernel)) - tainted


def _has_barrier(node: Node) -> bool:
    return any(isinstance(n, Barrier) for n in node.walk())


class _Merger:
    """One application: walks the body in program order, deciding per statement whether it
    is replicated, shared, kept as one loop (has barriers) or jammed. The plan's analysis
    has checked that every barrier sits where it can stay (:func:`_barrier_problem`)."""

    def __init__(self, kernel: Kernel, dim: str, factor: int, old: int, plan: _Plan) -> None:
        self.dim, self.factor, self.old, self.new = dim, factor, old, old // factor
        self.namer = Namer(kernel)
        self.shareable = plan.shareable
        self.varies = _Varies(dim, plan.tainted)
        local_arrays = {n.name for n in kernel.body.walk()
                        if isinstance(n, Alloc) and n.space != "shared"}
        self.renamable = (declared_names(kernel.body) | local_arrays) - {
            n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "shared"}
        self.single: set[str] = set()   # names every copy uses as they are
        self.names: list[dict[str, str]] = [{} for _ in range(factor)]
        self.labels: list[dict[str, str]] = [{} for _ in range(factor)]

    # ------------------------------------------------------------------ structure

    def level(self, stmts: list[Stmt] | tuple[Stmt, ...]) -> list[Stmt]:
        """A statement list that may hold barriers: barrier-free runs become segments."""
        out: list[Stmt] = []
        run: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Alloc) and s.space == "shared":  # (only at the top level)
                out += self.segment(run)
                run = []
                out.append(s)  # one per block, not per thread
            elif isinstance(s, Barrier):
                out += self.segment(run)
                run = []
                out.append(s)
            elif _has_barrier(s):
                out += self.segment(run)
                run = []
                out.append(self.kept_loop(s))
            else:
                run.append(s)
        return out + self.segment(run)

    def kept_loop(self, s: Stmt) -> For:
        """A loop with a barrier inside stays one loop, run in step by all copies (a ``for``
        with uniform bounds: :func:`_barrier_problem` refused the others)."""
        assert isinstance(s, For)
        return self.one_loop(s, self.level)

    def one_loop(self, s: For, split) -> For:
        """``s`` kept as one loop with its body rewritten by ``split``."""
        self.single.add(s.var)  # one counter, read by every copy (before its body is split)
        # Uniform header: copy 0's names hold the value every copy has.
        init, cond, update = (self.inst(e, 0) for e in (s.init, s.cond, s.update))
        body = split(list(s.body.stmts))
        return dataclasses.replace(s, init=init, cond=cond, update=update,
                                   body=Block(tuple(body), s.body.loc))

    def segment(self, stmts: list[Stmt]) -> list[Stmt]:
        """A barrier-free run: jammable loops become one loop holding the copies of their
        body; the statements between them become their copies, copy 0 first."""
        out: list[Stmt] = []
        run: list[Stmt] = []
        for s in stmts:
            if isinstance(s, For) and self.jammable(s):
                out += self.copies(run)
                run = []
                out.append(self.one_loop(s, self.segment))
            else:
                run.append(s)
        return out + self.copies(run)

    def jammable(self, loop: For) -> bool:
        c = canonical(loop)
        return (c is not None and not has_own_exit(loop) and not _has_barrier(loop)
                and not self.varies(c.start) and not self.varies(c.stop))

    def copies(self, run: list[Stmt]) -> list[Stmt]:
        for s in run:
            # Top-level declarations of uniform, never-reassigned locals: copy 0 declares
            # them before any other copy runs, in the same scope.
            if isinstance(s, Declare) and s.name in self.shareable:
                self.single.add(s.name)
        out: list[Stmt] = []
        for c in range(self.factor):
            for s in run:
                if c and isinstance(s, Declare) and s.name in self.single:
                    continue
                out.append(self.inst(s, c))  # type: ignore[arg-type]
        return out

    # ------------------------------------------------------------------ per-copy rewrite

    def name(self, old: str, c: int) -> str:
        if old not in self.renamable or old in self.single:
            return old
        table = self.names[c]
        if old not in table:
            table[old] = self.namer.name(f"{old}_{c}")
        return table[old]

    def label(self, old: str, c: int) -> str:
        if c == 0:
            return old
        table = self.labels[c]
        if old not in table:
            table[old] = self.namer.label()
        return table[old]

    def inst(self, node: Node, c: int) -> Node:
        """Copy ``c`` of ``node``: thread.<dim> shifted, blockDim the old size, locals and
        nested loop labels renamed."""
        dim, shift = self.dim, c * self.new

        def visit(n: Node) -> Node | None:
            if isinstance(n, Special) and n.axis == dim:
                if n.kind == "thread" and shift:
                    return Binary("+", n, Const(shift, n.type), n.type)
                if n.kind == "block_dim":
                    return Const(self.old, n.type)
                return None
            if isinstance(n, Var):
                return dataclasses.replace(n, name=self.name(n.name, c))
            if isinstance(n, (Declare, Assign, Alloc)):
                return dataclasses.replace(n, name=self.name(n.name, c))
            if isinstance(n, For):
                return dataclasses.replace(n, var=self.name(n.var, c),
                                           label=self.label(n.label, c))
            if isinstance(n, (Load, Store, Atomic)):
                n = dataclasses.replace(n, buffer=self.name(n.buffer, c))
                if isinstance(n, Atomic) and n.result:
                    n = dataclasses.replace(n, result=self.name(n.result, c))
                return n
            return None

        return transform(node, visit)


RULES = [MergeThreads()]
