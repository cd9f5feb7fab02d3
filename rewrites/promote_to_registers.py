"""promote-to-registers: keep a thread's own element(s) of a buffer in registers across a loop."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from kir import analysis
from kir.analysis import single_defs
from kir.analysis.affine import difference
from kir.analysis.memory import (
    Access,
    access_chains,
    buffer_elem,
    index_poly,
    inline_locals,
    involves_all_threads,
)
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
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
    Store,
    Var,
    transform,
)
from kir.ir.fold import fold_expr
from kir.ir.printer import print_expr
from kir.ir.types import BOOL, I32, ScalarType
from kir.rules import ANALYSES, BaseRule, Match, NoParams, NotApplicable, RuleContext

MAX_REGISTERS = 128


@dataclass(frozen=True)
class _Plan:
    loop: For
    accesses: list[Access]
    index: Expr                 # case 1: the element's index; case 2: the base
    guard: list[Expr]           # L-invariant conditions every access sits under
    # case 2: (stop expr, D); D None while it is a scalar whose value the spec gives
    array: tuple[Expr, int | None] | None
    written: bool
    # case 2: each access's own index (as written) -> the variable of ITS 0..D loop, so
    # B[base + x] becomes B_reg[x] with the x of that access (accesses in different inner
    # loops have different variables).
    offsets: Mapping[Expr, str] | None = None


# A loop with the promotion of a buffer across it planned, or refused.
_Entry = tuple[For, _Plan | NotApplicable]


class PromoteToRegisters(BaseRule):
    """Keep a thread-private buffer element (or a short run of them) in registers across a loop.

    CUDA practice: registers are the fastest storage, so a value a thread reads and updates on
    every iteration of a loop is loaded once before it and stored once after (CUDA C++ Best
    Practices Guide, "Memory Optimizations": minimize global memory traffic). FlashAttention-2
    keeps the running max ``m``, sum ``l`` and output accumulator ``O`` of a query row in
    registers instead of re-reading them from HBM on every K/V tile (Dao 2023, §3.1).

    Site: ``buffer=B`` (the outermost loop where B's accesses qualify) or ``buffer=B@L3`` (that
    loop). Case 1: every access of B in the loop has one index, invariant in the loop -> a
    local scalar. Case 2: every access is ``B[base + x]`` with ``base`` invariant and ``x`` the
    variable of an inner loop ``for x = 0; x < D; x++`` (D a constant, or a scalar argument
    specialized from the spec, at most 128) -> a local array ``B_reg[D]``; each access becomes
    ``B_reg[x]`` with the ``x`` of its own inner loop (different accesses may sit in different
    0..D loops with different variables).

    Legality checked: the index mentions every thread axis of the block (different threads
    own different elements), all accesses of B in the loop share the same loop-invariant
    guards (replicated around the load before / store after), at least one access runs
    whenever the loop runs under those guards (so the hoisted load touches only an element
    the original touched; no ``break``/``continue`` of the loop, nor of that access's 0..D
    loop, may skip it), no ``return`` in the loop, no atomics or vector accesses of B.
    Not checked: that B does not alias another buffer parameter (CUDA ``__restrict__``), and
    injectivity of the index in the thread indices beyond their presence.
    """

    name = "promote-to-registers"
    site_key = "buffer"

    def candidates(self, kernel: Kernel) -> list[str]:
        labels = [loop.label for loop in analysis.loops(kernel)]
        return [site for buffer in _candidate_buffers(kernel)
                for site in [buffer] + [f"{buffer}@{label}" for label in labels]]

    def match(self, kernel: Kernel, ctx: RuleContext | None = None) -> Iterator[Match]:
        # One analysis per buffer serves all its sites (the loops are analysed together to
        # find the outermost that qualifies).
        for buffer in _candidate_buffers(kernel):
            ANALYSES[self.name] += 1
            entries = _loop_plans(kernel, buffer)
            found = [entry for entry in entries if isinstance(entry[1], _Plan)]
            if found:
                yield Match(buffer, entries)
            for entry in found[1:]:
                yield Match(f"{buffer}@{entry[0].label}", [entry])

    def plan(self, kernel: Kernel, site: str) -> list[_Entry] | NotApplicable:
        """The loops to try in order, each with its plan or refusal: for ``B`` every loop
        (the outermost that qualifies is taken), for ``B@L`` loop L."""
        buffer, _, label = site.partition("@")
        entries = _loop_plans(kernel, buffer)
        if not label:
            chosen = _outermost(buffer, (plan for _, plan in entries))
            return chosen if isinstance(chosen, NotApplicable) else entries
        entry = next((e for e in entries if e[0].label == label), None)
        if entry is None:
            return NotApplicable(f"no loop {label}")
        if isinstance(entry[1], NotApplicable):
            return entry[1]
        if entry is next(e for e in entries if isinstance(e[1], _Plan)):
            return NotApplicable(f"{label} is the outermost loop where {buffer} can be "
                                 f"promoted: its site is buffer={buffer}")
        return [entry]

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        buffer = match.site.partition("@")[0]
        # A range given by a scalar is sized by the spec's value (the context).
        plan = _outermost(buffer, (_sized(plan, ctx.scalars) if isinstance(plan, _Plan)
                                   else plan for _, plan in match.plan))
        if isinstance(plan, NotApplicable):
            return plan
        return _rewrite(kernel, buffer, plan)


def _loop_plans(kernel: Kernel, buffer: str) -> list[_Entry]:
    """Every loop of the kernel (outermost first) with the promotion of ``buffer`` across it
    planned, or refused."""
    return [(loop, _plan(kernel, buffer, loop)) for loop in analysis.loops(kernel)]


def _outermost(buffer: str, plans: Iterable[_Plan | NotApplicable]) -> _Plan | NotApplicable:
    """The first plan; else the first refusal that says more than "not accessed" (else the
    last refusal)."""
    last = NotApplicable(f"{buffer} is not accessed in any loop")
    first: NotApplicable | None = None
    for plan in plans:
        if isinstance(plan, _Plan):
            return plan
        if first is None and "is not accessed" not in plan.reason:
            first = plan
        last = plan
    return first if first is not None else last


def _sized(plan: _Plan, scalars: Mapping[str, int | float]) -> _Plan | NotApplicable:
    """``plan`` with a range given by a scalar sized by its value in the spec."""
    if plan.array is None or plan.array[1] is not None:
        return plan
    stop = plan.array[0]
    assert isinstance(stop, Var)
    value = scalars.get(stop.name)
    if not isinstance(value, (int, float)):
        return NotApplicable(f"range {print_expr(stop)} is not a constant or specialized "
                             "scalar")
    size = int(value)
    if not 0 < size <= MAX_REGISTERS:
        return NotApplicable(f"{size} elements do not fit in registers (<= {MAX_REGISTERS})")
    return dataclasses.replace(plan, array=(stop, size))


def _candidate_buffers(kernel: Kernel) -> list[str]:
    names = [p.name for p in kernel.params if p.is_buffer]
    names += [n.name for n in kernel.body.walk()
              if isinstance(n, Alloc) and n.space == "shared" and not n.dynamic]
    return names


def _plan(kernel: Kernel, buffer: str, loop: For) -> _Plan | NotApplicable:
    """Check the promotion of ``buffer`` across ``loop`` (a range given by a scalar is sized
    when applying, with the spec's value: :func:`_sized`)."""
    if buffer in analysis.buffers_read(loop.body) | analysis.buffers_written(loop.body) \
            and analysis.has_matrix_stmts(loop.body):
        return NotApplicable(f"{loop.label} uses matrix tiles")
    accesses = access_chains(loop.body, buffer)
    if not accesses:
        return NotApplicable(f"{buffer} is not accessed in {loop.label}")
    if any(isinstance(n, Return) for n in loop.body.walk()):
        return NotApplicable(f"{loop.label} may return")
    if any(isinstance(n, (Load, Atomic)) and n.buffer == buffer
           for e in (loop.init, loop.cond, loop.update) for n in e.walk()):
        return NotApplicable(f"the header of {loop.label} reads {buffer}")
    if analysis.has_own_exit(loop):
        return NotApplicable(f"{loop.label} has a break or continue (an iteration may skip "
                             f"the accesses of {buffer})")
    if any(isinstance(a.node, Atomic) or not isinstance(a.node.type if isinstance(a.node, Load)
           else a.node.value.type, ScalarType) for a in accesses):
        return NotApplicable(f"atomic or vector access of {buffer} in {loop.label}")
    defs = single_defs(kernel)
    assigned = analysis.assigned_vars(loop)
    inner = defs.keys() & analysis.declared_names(loop.body)

    def invariant(expr: Expr) -> Expr | None:
        expr = inline_locals(expr, defs, set(inner))
        return None if analysis.used_vars(expr) & assigned else expr

    indices = [inline_locals(a.index, defs, set(inner)) for a in accesses]
    array = None
    loop_vars: list[str] | None = None
    offsets: dict[Expr, str] | None = None
    if all(e == indices[0] for e in indices) and invariant(indices[0]) is not None:
        index = indices[0]
    else:
        split = _split_array(kernel, loop, accesses, indices, assigned)
        if isinstance(split, NotApplicable):
            return split
        index, array, loop_vars = split
        # The rewrite maps each access by its index as written; one written index must name
        # one inner loop variable.
        offsets = {}
        for access, var in zip(accesses, loop_vars):
            if offsets.setdefault(access.index, var) != var:
                return NotApplicable(f"index {print_expr(access.index)} of {buffer} stands for "
                                     "different inner loops")
    poly = index_poly(index, defs)
    if poly is None or not involves_all_threads(kernel, poly):
        return NotApplicable(f"index of {buffer} does not involve every thread index")
    guard = _common_guard(accesses, invariant, loop_vars)
    if isinstance(guard, NotApplicable):
        return guard
    written = any(a.is_write for a in accesses)
    return _Plan(loop, accesses, index, guard, array, written, offsets)


def _split_array(kernel, loop, accesses, indices, assigned):
    """Case 2: every index is ``base + x`` with x the variable of an inner 0..D loop around
    that access (its own loop: different accesses may use different loops). Returns (base,
    (stop, D), the x of each access); D is None when stop is a scalar (sized when applying)."""
    base_poly = None
    stop = None
    base_expr = None
    loop_vars: list[str] = []
    for access, index in zip(accesses, indices):
        loops = [s for s, _ in access.chain if isinstance(s, For)]
        found = None
        for inner_loop in loops:
            c = analysis.canonical(inner_loop)
            if c is None or c.step != 1 or c.inclusive or c.start != Const(0, c.start.type):
                continue
            poly = index_poly(index)
            if poly is None or poly.get((inner_loop.var,)) != 1:
                continue
            rest = difference(poly, {(inner_loop.var,): 1})
            if any(inner_loop.var in mono for mono in rest):
                continue
            found = (inner_loop, c, rest)
            break
        if found is None:
            return NotApplicable(f"index {print_expr(index)} is neither loop-invariant "
                                 "nor base + x")
        inner_loop, c, rest = found
        if base_poly is None:
            base_poly, stop = rest, c.stop
            base_expr = analysis.substitute(index, inner_loop.var, Const(0, I32))
        elif rest != base_poly or c.stop != stop:
            return NotApplicable("accesses do not share one base and one range")
        loop_vars.append(inner_loop.var)
    base_expr = fold_expr(base_expr)
    if analysis.used_vars(base_expr) & assigned:
        return NotApplicable(f"base {print_expr(base_expr)} varies in {loop.label}")
    if analysis.used_vars(stop) & assigned:
        return NotApplicable(f"range {print_expr(stop)} varies in {loop.label}")
    if isinstance(stop, Const):
        size: int | None = int(stop.value)
        if not 0 < size <= MAX_REGISTERS:
            return NotApplicable(f"{size} elements do not fit in registers "
                                 f"(<= {MAX_REGISTERS})")
    elif isinstance(stop, Var):
        size = None  # the spec's value, read when applying (_sized)
    else:
        return NotApplicable(f"range {print_expr(stop)} is not a constant or specialized "
                             "scalar")
    return base_expr, (stop, size), loop_vars


def _common_guard(accesses: list[Access], invariant, loop_vars: list[str] | None):
    """The loop-invariant if-conditions (then-branches) every access sits under; at least
    one access must sit under nothing else (bar its own 0..D loop in case 2, whose variable
    is ``loop_vars[i]`` for access i, and which must not end early)."""
    prefix = list(accesses[0].chain)
    for a in accesses[1:]:
        n = 0
        while n < min(len(prefix), len(a.chain)) and prefix[n][0] is a.chain[n][0] \
                and prefix[n][1] == a.chain[n][1]:
            n += 1
        del prefix[n:]
    guard: list[Expr] = []
    for stmt, branch in prefix:
        if not isinstance(stmt, If) or branch != "then":
            break
        cond = invariant(stmt.cond)
        if cond is None:
            break
        guard.append(cond)
    depth = len(guard)

    def unconditional(i: int, a: Access) -> bool:
        rest = a.chain[depth:]
        if loop_vars is None:
            return not rest
        return (len(rest) == 1 and isinstance(rest[0][0], For)
                and rest[0][0].var == loop_vars[i] and not analysis.has_own_exit(rest[0][0]))
    if not any(unconditional(i, a) for i, a in enumerate(accesses)):
        return NotApplicable("no access runs on every iteration (the hoisted load could "
                             "touch an element the loop never touches)")
    return guard


def _rewrite(kernel: Kernel, buffer: str, plan: _Plan) -> Kernel:
    elem, _ = buffer_elem(kernel, buffer)  # type: ignore[misc]
    loop = plan.loop
    loc = loop.loc
    entry = analysis.substitute(loop.cond, loop.var, loop.init)
    cond = entry
    for g in plan.guard:
        cond = Binary("&&", cond, g, BOOL)
    cond = fold_expr(cond)  # type: ignore[assignment]
    taken = analysis.all_names(kernel)
    reg = analysis.fresh_name(kernel, f"{buffer}_reg")
    new: list = []
    if plan.array is None:
        def replace(n: Node) -> Node | None:
            if isinstance(n, Load) and n.buffer == buffer:
                return Var(reg, elem)
            if isinstance(n, Store) and n.buffer == buffer:
                return Assign(reg, n.value, loc=n.loc)
            return None
        new.append(Declare(reg, elem, None, loc=loc))
        load = [Assign(reg, Load(buffer, plan.index, elem), loc=loc)]
        store = [Store(buffer, plan.index, Var(reg, elem), loc=loc)]
    else:
        stop, size = plan.array
        assert size is not None  # _sized gave it
        offsets = plan.offsets
        assert offsets is not None

        def replace(n: Node) -> Node | None:
            # Each access by its own inner loop's variable (_plan mapped every index).
            if isinstance(n, Load) and n.buffer == buffer:
                return Load(reg, Var(offsets[n.index], I32), elem)
            if isinstance(n, Store) and n.buffer == buffer:
                return Store(reg, Var(offsets[n.index], I32), n.value, loc=n.loc)
            return None
        new.append(Alloc(reg, elem, size, "local", loc=loc))
        x = analysis.fresh_name(kernel, "r", taken | {reg})
        first = analysis.next_loop_label(kernel)
        second = analysis.next_loop_label(kernel, {first})
        at = fold_expr(Binary("+", plan.index, Var(x, I32), I32))

        def copy(label: str, body) -> For:
            return For(label, x, I32, Const(0, I32), Binary("<", Var(x, I32), stop, BOOL),
                       Binary("+", Var(x, I32), Const(1, I32), I32), Block((body,)), loc=loc)
        load = [copy(first, Store(reg, Var(x, I32), Load(buffer, at, elem), loc=loc))]
        store = [copy(second, Store(buffer, at, Load(reg, Var(x, I32), elem), loc=loc))]
    new_loop = transform(loop, replace)
    new += _guarded(cond, load, loc) + [new_loop]
    if plan.written:
        new += _guarded(cond, store, loc)
    return analysis.replace_stmt(kernel, loop, new)


def _guarded(cond: Expr, stmts: list, loc) -> list:
    if cond == Const(True, BOOL):
        return stmts
    return [If(cond, Block(tuple(stmts)), loc=loc)]


RULES = [PromoteToRegisters()]
