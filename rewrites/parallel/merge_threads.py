"""merge-threads: one thread does the work of `factor` threads of its block (register blocking)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    declared_names,
    has_matrix_stmts,
    has_own_exit,
    single_defs,
    strip_casts,
    used_vars,
)
from kir.analysis.loop_edits import Namer, copy_body
from kir.analysis.parallel import is_lane_varying, is_thread_x, lane_varying_vars
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
    Unary,
    Var,
    WarpReduce,
    While,
    transform,
)
from kir.ir.types import BOOL
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

    *Warps merged.* When the copies are a whole number of warps apart (``n / factor``
    threads along x, or rows of ``n / factor`` × the threads before ``dim``, a multiple of
    32) every copy of a thread sits in the same lane of its old warp, so warp-level code
    (shuffles, warp reductions, ``__syncwarp``, the lane index) keeps its lanes: one warp
    then does the work of ``factor`` warps — a warp per row becomes a warp per ``factor``
    rows, the register tiling FlashAttention-2 gives each warp. The warp index of copy ``c``
    is ``warp + c * n / factor / 32``.

    *Block-stride loops.* A loop ``for (v = thread.<dim> + u; v < b; v += n)`` (a
    cooperative load) whose body depends on its copy only through ``v`` and writes no outer
    local becomes one loop stepping by ``n / factor``: together the copies visit exactly
    those values, each thread's own in order, and their loads issue from one loop.

    *Per-copy conditions.* Code under an ``if`` whose condition differs between the copies
    (a row's bounds check) cannot be jammed as it is: each copy has its own ``if``. When such
    an ``if`` holds a loop worth jamming, it is versioned: ``if (cond_0 && ... &&
    cond_{f-1})`` runs the jammed body (every copy takes the branch), ``else`` each copy's
    own ``if`` — as loop versioning does for a remainder. The condition must read no memory
    and no local the body writes; with warp-level code in the body it must also be the same
    across a warp's lanes (else the two versions would split a warp the original kept).

    Legality checked: between two barriers the threads of a CUDA block run in any
    interleaving, so a race-free kernel gives the same result for any order of the copies
    that keeps each copy's own order (which both replication and jamming do). A block
    barrier must sit at top level, in ``if``s whose condition is the same for every copy, or
    in ``for`` loops whose bounds do not depend on ``thread.<dim>`` (directly, through
    locals, loads or thread-dependent control flow), without their own ``break``/
    ``continue`` and not writing their counter; barriers under other ``if``s or ``while``
    are refused. Refused: warp-level code unless the copies are whole warps apart (above);
    matrix tiles; a ``return`` other than a top-level guard ``if (c) return;`` (which becomes
    ``if (!c) { the rest }``; any other would end every copy); shared arrays below
    the top level; a block size along ``dim`` not divisible by ``factor``. Jammed loops must
    have a header the same for every copy that reads nothing their body writes, and no
    ``break``/``continue`` of their own.
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
        kernel = dataclasses.replace(kernel, body=_guards_as_ifs(kernel.body))
        unsupported = _unsupported(kernel)
        if unsupported:  # (no need for the taint)
            return _Plan(set(), set(), NotApplicable(unsupported))
        warp_code = _warp_code(kernel)
        tainted = _dim_tainted(kernel, site, warp_code is not None)
        problem = _barrier_problem(kernel.body.stmts, True,
                                   _Varies(site, tainted, warp_code is not None))
        return _Plan(tainted, _shareable(kernel, tainted),
                     NotApplicable(problem) if problem else None, warp_code, kernel.body)

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
        warp_shift = _warp_shift(kernel.launch.block, axis, old // factor)
        if plan.warp_code and warp_shift is None:
            return NotApplicable(
                f"the kernel uses warp-level code ({plan.warp_code}) and copies "
                f"{old // factor} threads apart along {site} are not whole warps apart; "
                f"a larger block or a smaller factor keeps them in their lanes")
        kernel = dataclasses.replace(kernel, body=plan.body)  # early exits as ifs
        merger = _Merger(kernel, site, factor, old, plan, warp_shift or 0)
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
    warp_code: str | None = None  # what warp-level code the kernel has (None: none)
    body: Block | None = None  # the kernel's body with its guard returns as ifs


def _guards_as_ifs(body: Block) -> Block:
    """``if (c) return;`` at the kernel's top level followed by the rest becomes ``if (!c)
    { rest }`` (an early exit for rows past the end, as warp-per-row kernels write it): one
    copy's exit would end the others, its ``if`` ends only its own copy."""
    stmts = list(body.stmts)
    for k, s in enumerate(stmts):
        if (isinstance(s, If) and s.orelse is None and len(s.then.stmts) == 1
                and isinstance(s.then.stmts[0], Return)):
            rest = _guards_as_ifs(Block(tuple(stmts[k + 1:]), body.loc))
            keep = If(Unary("!", s.cond, BOOL), rest, None, s.loc)
            return Block((*stmts[:k], keep), body.loc)
    return body


def _unsupported(kernel: Kernel) -> str | None:
    """Kernel-wide shapes the rule refuses, with the reason."""
    if has_matrix_stmts(kernel.body):
        return "the kernel uses warp-level matrix tiles (their fragments would change)"
    if any(isinstance(n, Return) for n in kernel.body.walk()):
        return "the kernel has a return (one merged thread's exit would end the others)"
    return None


def _warp_code(kernel: Kernel) -> str | None:
    """The first warp-level construct of the kernel, named, or None: merged copies must then
    stay in their lanes (:func:`_warp_shift`)."""
    for n in kernel.body.walk():
        if isinstance(n, (Shuffle, WarpReduce)):
            return "warp shuffles/reductions"
        if isinstance(n, Special) and n.kind in ("lane", "warp"):
            return f"the {n.kind} index"
        if isinstance(n, Barrier) and n.scope != "block":
            return "__syncwarp"
    return None


def _warp_shift(block: tuple, axis: int, new: int) -> int | None:
    """How many warps apart copy 1 is from copy 0 when ``new`` threads along ``axis`` are
    what is left of the block; None when that is not a whole number of warps (or the block
    is not known)."""
    if not all(isinstance(b, int) for b in block):
        return None
    linear = new
    for size in block[:axis]:
        linear *= size
    return linear // 32 if linear % 32 == 0 else None


class _Varies:
    """Whether an expression may differ between the threads merged along ``dim``: it reads
    ``thread.<dim>``, the warp index, memory, a shuffle or a local in ``tainted``. With
    ``lanes_kept`` (warp-level code, merged only with copies whole warps apart) a lane form
    of ``thread.x`` (``% 32``, ``& 31``) is the same for every copy."""

    def __init__(self, dim: str, tainted: set[str], lanes_kept: bool = False) -> None:
        self.dim, self.tainted = dim, tainted
        self.lanes_kept = lanes_kept and dim == "x"

    def __call__(self, e: Expr) -> bool:
        stack: list[Node] = [e]
        while stack:
            n = stack.pop()
            if self.lanes_kept and _lane_form(n):
                continue
            if isinstance(n, Special) and (n.kind == "thread" and n.axis == self.dim
                                           or n.kind == "warp"):
                return True
            if isinstance(n, (Load, Shuffle, WarpReduce)) or \
                    isinstance(n, Var) and n.name in self.tainted:
                return True
            stack.extend(n.children())
        return False


def _lane_form(e: Node) -> bool:
    """``thread.x % m`` or ``thread.x & (m - 1)`` with ``m`` dividing 32: the same for
    threads a whole number of warps apart."""
    if not (isinstance(e, Binary) and e.op in ("%", "&") and isinstance(e.right, Const)):
        return False
    if not is_thread_x(e.left):
        return False
    m = e.right.value
    if not isinstance(m, int) or isinstance(m, bool):
        return False
    m = m if e.op == "%" else m + 1
    return 0 < m <= 32 and 32 % m == 0


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
        elif isinstance(s, If) and not varies(s.cond):
            for branch in (s.then, s.orelse):
                inner = branch and _barrier_problem(branch.stmts, False, varies)
                if inner:
                    return inner
        elif not isinstance(s, For):
            kind = "an if" if isinstance(s, If) else "a while loop" if isinstance(s, While) \
                else "a nested block"
            return (f"a barrier sits inside {kind}; only for loops with uniform bounds and "
                    f"ifs with uniform conditions may hold barriers")
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


def _dim_tainted(kernel: Kernel, dim: str, lanes_kept: bool) -> set[str]:
    """Locals whose value may differ between threads that differ only in ``thread.<dim>``
    (a conservative taint like analysis.thread_dependent_vars, for one axis: loads, atomic
    results and anything assigned under such control flow count as different)."""
    tainted: set[str] = set()
    differs = _Varies(dim, tainted, lanes_kept)

    def varies(e: Expr | None) -> bool:
        return e is None or differs(e)

    # The control context of a statement: False (the same for every copy), True (it differs)
    # or, inside an ``if`` each copy decides for itself with no ``else``, the names declared in
    # that ``if``: they live only where every copy of the jammed version takes the branch
    # (_Merger.versioned), so only the names written there from outside differ by control.
    def control_taints(ctx: bool | frozenset[str], name: str) -> bool:
        return ctx is True or isinstance(ctx, frozenset) and name not in ctx

    def under(ctx: bool | frozenset[str], varying: bool) -> bool | frozenset[str]:
        return True if varying else ctx

    changed = True
    while changed:
        changed = False
        stack: list[tuple[Stmt, bool | frozenset[str]]] = [(kernel.body, False)]
        while stack:
            s, ctx = stack.pop()
            targets: list[tuple[str, Expr | None]] = []
            if isinstance(s, Block):
                stack.extend((t, ctx) for t in s.stmts)
            elif isinstance(s, If):
                if ctx is False and s.orelse is None and varies(s.cond):
                    stack.append((s.then, frozenset(declared_names(s.then))))
                else:
                    inner = under(ctx, varies(s.cond))
                    stack.append((s.then, inner))
                    if s.orelse is not None:
                        stack.append((s.orelse, inner))
            elif isinstance(s, While):
                stack.append((s.body, under(ctx, varies(s.cond))))
            elif isinstance(s, For):
                targets += [(s.var, s.init), (s.var, s.update)]
                stack.append((s.body, under(ctx, any(map(varies, (s.init, s.cond, s.update))))))
            elif isinstance(s, Declare):
                targets.append((s.name, s.init if s.init is not None else Const(0, s.type)))
            elif isinstance(s, Assign):
                targets.append((s.name, s.value))
            elif isinstance(s, Atomic) and s.result:
                targets.append((s.result, None))
            for name, value in targets:
                if name not in tainted and (control_taints(ctx, name) or varies(value)):
                    tainted.add(name)
                    changed = True
    return tainted


def _shareable(kernel: Kernel, tainted: set[str]) -> set[str]:
    """Locals declared once with an initializer, never written again and not tainted: one
    declaration can serve every copy."""
    return set(single_defs(kernel)) - tainted


def _has_barrier(node: Node) -> bool:
    """Whether ``node`` holds a block barrier (a warp's ``__syncwarp`` is copied like any
    statement: every copy keeps its lanes)."""
    return any(isinstance(n, Barrier) and n.scope == "block" for n in node.walk())


class _Merger:
    """One application: walks the body in program order, deciding per statement whether it
    is replicated, shared, kept as one loop (has barriers) or jammed. The plan's analysis
    has checked that every barrier sits where it can stay (:func:`_barrier_problem`)."""

    def __init__(self, kernel: Kernel, dim: str, factor: int, old: int, plan: _Plan,
                 warp_shift: int) -> None:
        self.dim, self.factor, self.old, self.new = dim, factor, old, old // factor
        self.warp_shift = warp_shift  # warps between copy c and copy c + 1
        self.block = kernel.launch.block
        self.lane_varying = lane_varying_vars(kernel) if plan.warp_code else set()
        self.namer = Namer(kernel)
        self.shareable = plan.shareable
        self.varies = _Varies(dim, plan.tainted, plan.warp_code is not None)
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
                out.append(self.kept(s))
            else:
                run.append(s)
        return out + self.segment(run)

    def kept(self, s: Stmt) -> Stmt:
        """A loop or an ``if`` with a barrier inside stays one, run in step by all copies (a
        ``for`` with uniform bounds or an ``if`` with a uniform condition:
        :func:`_barrier_problem` refused the others)."""
        if isinstance(s, If):
            return dataclasses.replace(
                s, cond=self.inst(s.cond, 0), then=self.kept_block(s.then),
                orelse=None if s.orelse is None else self.kept_block(s.orelse))
        assert isinstance(s, For)
        return self.one_loop(s, self.level)

    def kept_block(self, block: Block) -> Block:
        return Block(tuple(self.level(list(block.stmts))), block.loc)

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
            elif isinstance(s, For) and self.restridable(s):
                out += self.copies(run)
                run = []
                out.append(self.restrided(s))
            elif isinstance(s, If) and self.uniform_around_jam(s):
                out += self.copies(run)
                run = []
                out.append(dataclasses.replace(
                    s, cond=self.inst(s.cond, 0), then=self.jammed_block(s.then),
                    orelse=None if s.orelse is None else self.jammed_block(s.orelse)))
            elif isinstance(s, If) and self.versionable(s):
                out += self.copies(run)
                run = []
                out.append(self.versioned(s))
            else:
                run.append(s)
        return out + self.copies(run)

    def restridable(self, loop: For) -> bool:
        """A block-stride loop (``for (v = thread.<dim> + u; v < b; v += n)``, n the old
        block size, u and b the same for every copy) whose body depends on its copy only
        through ``v`` and writes no local declared outside it (a cooperative load)."""
        if has_own_exit(loop) or _has_barrier(loop):
            return False
        if not (isinstance(loop.cond, Binary) and loop.cond.op in ("<", "<=")
                and isinstance(loop.cond.left, Var) and loop.cond.left.name == loop.var
                and not self.varies(loop.cond.right)):
            return False
        update = loop.update
        if not (isinstance(update, Binary) and update.op == "+"
                and isinstance(update.left, Var) and update.left.name == loop.var
                and self.is_old_size(strip_casts(update.right))):
            return False
        if not self.thread_plus_uniform(strip_casts(loop.init)):
            return False
        inside = declared_names(loop.body)
        if assigned_vars(loop.body) - inside or loop.var in assigned_vars(loop.body):
            return False
        if any(isinstance(n, (Shuffle, WarpReduce, Barrier)) for n in loop.body.walk()):
            return False
        body_reads = used_vars(loop.body)
        return not (body_reads - inside - {loop.var}) & self.varies.tainted and not any(
            isinstance(n, Special) and (n.kind == "thread" and n.axis == self.dim
                                        or n.kind == "warp") for n in loop.body.walk())

    def is_old_size(self, e: Expr) -> bool:
        return (isinstance(e, Const) and e.value == self.old
                or isinstance(e, Special) and e.kind == "block_dim" and e.axis == self.dim)

    def thread_plus_uniform(self, e: Expr) -> bool:
        def is_thread(x: Expr) -> bool:
            x = strip_casts(x)
            return isinstance(x, Special) and x.kind == "thread" and x.axis == self.dim
        if is_thread(e):
            return True
        return (isinstance(e, Binary) and e.op == "+" and (
            is_thread(e.left) and not self.varies(e.right)
            or is_thread(e.right) and not self.varies(e.left)))

    def restrided(self, loop: For) -> For:
        """One loop for all copies, stepping by the new block size: copy ``c`` of the old
        loop visits ``v0 + c * new + k * old``, so together they visit ``v0 + m * new``,
        each value once; each thread's own values stay in order."""
        first = self.inst(loop, 0)
        step = loop.update.right
        update = dataclasses.replace(first.update, right=Const(self.new, step.type))
        return dataclasses.replace(first, update=update)

    def jammed_block(self, block: Block) -> Block:
        return Block(tuple(self.segment(list(block.stmts))), block.loc)

    def uniform_around_jam(self, s: If) -> bool:
        """Whether ``s`` decides the same for every copy, holds a loop to jam and writes
        nothing its condition reads: one ``if`` then serves all copies' bodies."""
        if self.varies(s.cond):
            return False
        if not any(isinstance(n, For) and self.jammable(n) for n in s.walk()):
            return False
        return not used_vars(s.cond) & assigned_vars(s)

    def versionable(self, s: If) -> bool:
        """Whether ``s`` is an ``if`` each copy decides for itself around a loop worth
        jamming, which :meth:`versioned` can jam when all copies take it."""
        if s.orelse is not None or not self.varies(s.cond) or _has_barrier(s):
            return False
        # Worth it when a jammed loop reads a value every copy shares (one load then serves
        # all copies); a loop of each copy's own loads gains nothing from the second version.
        if not any(isinstance(n, For) and self.jammable(n) and self.shares_a_load(n)
                   for n in s.then.walk()):
            return False
        if any(isinstance(n, Load) for n in s.cond.walk()):
            return False
        if used_vars(s.cond) & assigned_vars(s.then):
            return False
        warp_level = any(isinstance(n, (Shuffle, WarpReduce, Barrier))
                         or isinstance(n, Special) and n.kind == "lane" for n in s.then.walk())
        return not (warp_level and is_lane_varying(s.cond, self.lane_varying, self.block))

    def shares_a_load(self, loop: For) -> bool:
        return any(isinstance(n, Load) and not self.varies(n.index) for n in loop.body.walk())

    def versioned(self, s: If) -> If:
        """``if (cond_0 && ... && cond_{f-1})`` the body's copies jammed, ``else`` each copy
        under its own condition (fresh names and labels, so every local is declared once)."""
        conds = [self.inst(s.cond, c) for c in range(self.factor)]
        both = conds[0]
        for cond in conds[1:]:
            both = Binary("&&", both, cond, both.type)
        fast = self.segment(list(s.then.stmts))
        slow = [copy_body(Block((self.inst(s, c),), s.loc), self.namer, {}).stmts[0]
                for c in range(self.factor)]
        return If(both, Block(tuple(fast), s.then.loc), Block(tuple(slow), s.loc), s.loc)

    def jammable(self, loop: For) -> bool:
        """A loop every copy runs through the same iterations: a header the same for every
        copy, reading nothing the body writes (any condition, not only ``i < n``)."""
        if has_own_exit(loop) or _has_barrier(loop):
            return False
        if any(self.varies(e) for e in (loop.init, loop.cond, loop.update)):
            return False
        written = assigned_vars(loop.body)
        return loop.var not in written and not (used_vars(loop.cond) | used_vars(loop.update)) & written

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
            if isinstance(n, Special) and n.kind == "warp" and c:
                return Binary("+", n, Const(c * self.warp_shift, n.type), n.type)
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
