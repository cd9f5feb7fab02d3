"""distribute-loop: spread a loop that every lane of a warp runs redundantly over the lanes."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from kir import analysis
from kir.analysis.memory import index_poly, inline_locals
from kir.analysis.parallel import is_lane_varying, lane_varying_context, lane_varying_vars
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
    Continue,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Node,
    Return,
    Special,
    Store,
    Var,
    WarpReduce,
    transform,
)
from kir.ir.fold import fold_expr
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, ScalarType
from kir.rewrites.parallel.accumulators import accumulators, combine
from kir.rules import LoopRule, Match, NotApplicable, RuleContext



@dataclass(frozen=True)
class Plan:
    """What distribute-loop found: the loops to spread (site first), the per-thread arrays
    whose elements they share out (name → per-lane size), what each loop accumulates
    (label → {acc: op}), and the loops whose shared-memory writes the warp must see before
    it reads them (labels: a warp barrier goes before and after each)."""

    loops: tuple[For, ...]
    arrays: dict[str, int]
    reductions: dict[str, dict[str, str]]
    fences: frozenset[str] = frozenset()


class DistributeLoop(LoopRule):
    """Spread a loop that all 32 lanes of a warp run redundantly over the lanes.

    CUDA practice: the warp-per-row layout of fast row kernels (Apex/PyTorch softmax and layer
    norm, FlashAttention-2's warps, MLX's row reductions): the lanes of the warp that owns a
    row split the row's loops, lane ``l`` taking elements ``l, l + 32, ...``; a reduction's
    per-lane partials are combined with a warp reduction (shuffles), and a per-thread array
    that the row's loops index (a query row, an output row in registers) is shared out the
    same way, element ``x`` living in lane ``x % 32`` at slot ``x / 32``, so each lane keeps
    ``ceil(n / 32)`` registers instead of ``n``. Typically after ``widen-threads``.

    The site loop and every loop that indexes the same per-thread arrays are spread together
    (a lane must find element ``x`` where another loop left it). Legality checked: blocks are
    one-dimensional and hold whole warps; each spread loop runs in warp-uniform control flow
    with warp-uniform bounds, is not nested in another spread loop, and has independent
    iterations but for its accumulators (``acc = acc (+|max|min) term`` or the running max
    written out, ``if (t > acc) acc = t``, read nowhere else in the body: each lane keeps a
    partial from the identity, a warp reduction combines them after the loop;
    :mod:`.accumulators`): it assigns only those and variables it declares, stores to the
    per-thread arrays it shares out at its own index, and stores to memory only at indices
    that move with the loop variable (an affine index with a non-zero coefficient on it); it
    has no barrier, atomic, break, continue or return; other per-thread arrays it writes would
    leave the lanes with different copies, so they are refused. Global memory it writes is
    not touched outside the spread loops unless a block barrier follows the loop; shared
    memory may be (every lane of the warp wrote it alike before, and read its own copy): warp
    barriers then go before and after the loop, and the loop itself reads such an array only
    at the index it writes. Per-thread arrays are indexed only by the variable of a loop
    ``x = 0; x < n; x + 1`` whose bound is at most the array's size. Sums are reassociated.
    """

    name = "distribute-loop"

    def plan_loop(self, kernel: Kernel, loop: For):
        bx, by, bz = kernel.launch.block
        if (by, bz) != (1, 1) or bx % WARP:
            return NotApplicable("the block is not one-dimensional with whole warps")
        canon = analysis.canonical(loop)
        if canon is None:
            return NotApplicable(f"{loop.label} is not a counted loop")
        group = _group(kernel, loop)
        if isinstance(group, NotApplicable):
            return group
        loops, arrays = group
        tainted = lane_varying_vars(kernel)
        reductions: dict[str, dict[str, str]] = {}
        spread = {lp.label for lp in loops}
        for lp in loops:
            problem = _uniform(kernel, lp, tainted)
            if problem:
                return NotApplicable(problem)
            if any(isinstance(n, For) and n.label in spread and n is not lp
                   for n in lp.body.walk()):
                return NotApplicable(f"{lp.label} holds another loop that must be spread")
            accs = accumulators(lp)
            if isinstance(accs, str):
                return NotApplicable(accs)
            types = _acc_types(lp, accs)
            if any(_identity(op, types[acc]) is None for acc, op in accs.items()):
                return NotApplicable(f"{lp.label} accumulates with no identity to start from")
            problem = _independent(kernel, lp, arrays, set(accs))
            if problem:
                return NotApplicable(problem)
            if accs:
                reductions[lp.label] = accs
        fences = _fences(kernel, loops, arrays)
        if isinstance(fences, NotApplicable):
            return fences
        sizes = {name: math.ceil(size / WARP) for name, size in arrays.items()}
        return Plan(loops, sizes, reductions, fences)

    def apply(self, kernel: Kernel, match: Match, params, ctx: RuleContext) -> Kernel:
        plan: Plan = match.plan
        for lp in plan.loops:
            replacement = _spread(kernel, lp, plan)
            if lp.label in plan.fences:
                replacement = [Barrier("warp", loc=lp.loc), *replacement,
                               Barrier("warp", loc=lp.loc)]
            kernel = analysis.replace_stmt(kernel, _current(kernel, lp.label), replacement)
        if plan.arrays:
            kernel = _compact(kernel, plan.arrays)
        return kernel


# --------------------------------------------------------------------------- analysis


def _barrier_follows(kernel: Kernel, loop: For) -> bool:
    """Whether the statement right after ``loop`` in its block is a block barrier."""
    for n in kernel.body.walk():
        if isinstance(n, Block):
            for i, stmt in enumerate(n.stmts):
                if stmt is loop:
                    after = n.stmts[i + 1] if i + 1 < len(n.stmts) else None
                    return isinstance(after, Barrier) and after.scope == "block"
    return False


def _direct_index(index: Expr) -> str | None:
    """The loop variable an array index is, under integer casts (``A[x]``), else None."""
    while isinstance(index, Cast):
        index = index.value
    return index.name if isinstance(index, Var) else None


def _array_accesses(kernel: Kernel, arrays: set[str]) -> dict[str, list[tuple[Node, For | None]]]:
    """For each array, its accesses with the innermost enclosing loop whose variable is the
    access's index (None when the index is no enclosing loop's variable)."""
    found: dict[str, list[tuple[Node, For | None]]] = {name: [] for name in arrays}
    stack: list[tuple[Node, tuple[For, ...]]] = [(kernel.body, ())]
    while stack:
        node, loops = stack.pop()
        if isinstance(node, (Load, Store, Atomic)) and node.buffer in arrays:
            var = _direct_index(node.index)
            owner = next((lp for lp in reversed(loops) if lp.var == var), None) \
                if var and not isinstance(node, Atomic) else None
            found[node.buffer].append((node, owner))
        inner = loops + (node,) if isinstance(node, For) else loops
        stack.extend((child, inner) for child in node.children())
    return found


def _group(kernel: Kernel, site: For):
    """The loops to spread with ``site`` and the per-thread arrays they share out
    (name → size): the closure of "a loop indexes an array with its variable" and "an array
    is indexed by a loop's variable"."""
    locals_ = {n.name: n for n in kernel.body.walk()
               if isinstance(n, Alloc) and n.space == "local" and not n.dynamic}
    accesses = _array_accesses(kernel, set(locals_))
    loops: dict[str, For] = {site.label: site}
    arrays: dict[str, int] = {}
    pending = [site]
    while pending:
        loop = pending.pop()
        for name, uses in accesses.items():
            if name in arrays or not any(owner is loop for _, owner in uses):
                continue
            arrays[name] = locals_[name].size
            for access, owner in uses:
                vector = isinstance(access, Load) and access.type != locals_[name].elem
                if owner is None or vector:
                    return NotApplicable(f"{name!r} is accessed other than as element "
                                         "[x] of a loop over x")
                if owner.label not in loops:
                    loops[owner.label] = owner
                    pending.append(owner)
    for name in arrays:
        for _, owner in accesses[name]:
            canon = analysis.canonical(owner)
            if canon is None or canon.step != 1 or not _is_zero(canon.start):
                return NotApplicable(f"{owner.label} indexes {name!r} but does not count "
                                     "0, 1, 2, ...")
    ordered = [lp for lp in analysis.loops(kernel) if lp.label in loops]
    ordered.sort(key=lambda lp: lp.label != site.label)
    return tuple(ordered), arrays


def _is_zero(e: Expr) -> bool:
    while isinstance(e, Cast):
        e = e.value
    return isinstance(e, Const) and e.value == 0


def _uniform(kernel: Kernel, loop: For, tainted: set[str]) -> str:
    """Why ``loop`` is not run alike by all lanes, or ""."""
    if lane_varying_context(kernel, loop):
        return f"{loop.label} runs under lane-dependent control flow"
    block = kernel.launch.block
    for part in (loop.init, loop.cond, loop.update):
        if is_lane_varying(part, tainted - {loop.var}, block):
            return f"the bounds of {loop.label} differ between lanes"
    body_locals = analysis.declared_names(loop.body) | {loop.var}
    for n in loop.body.walk():
        if isinstance(n, Expr) and is_lane_varying(n, tainted - body_locals, block):
            return f"{loop.label} computes different values in different lanes"
    return ""


def _acc_types(loop: For, accs: dict[str, str]) -> dict[str, ScalarType]:
    return {n.name: n.value.type for n in loop.body.walk()
            if isinstance(n, Assign) and n.name in accs}


def _fences(kernel: Kernel, loops: tuple[For, ...],
            arrays: dict[str, int]) -> frozenset[str] | NotApplicable:
    """The spread loops that need warp barriers around them, or why memory they write would
    be read wrong. Spread, a loop's writes are split between the lanes, so what it writes
    is read elsewhere only when every lane's part is visible to the reader: after a block
    barrier right after the loop (the cooperative-load pattern), or — for shared memory,
    which before the rewrite every lane of the warp wrote alike and read back itself — after
    a warp barrier (``__syncwarp``), which the rewrite puts after the loop (and one before
    it, so that a round's writes wait for the previous round's reads). Inside the writing
    loop itself a lane may read only what it wrote: the element it stores, at the same
    index."""
    shared = {n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "shared"}
    fenced = {lp.label for lp in loops if _barrier_follows(kernel, lp)}
    writers: dict[str, set[str]] = {}
    for lp in loops:
        if lp.label in fenced:
            continue
        stores = [n for n in lp.body.walk() if isinstance(n, Store) and n.buffer not in arrays]
        for st in stores:
            writers.setdefault(st.buffer, set()).add(lp.label)
            if st.buffer in shared and any(
                    isinstance(n, Load) and n.buffer == st.buffer and n.index != st.index
                    for n in lp.body.walk()):
                return NotApplicable(f"{lp.label} reads {st.buffer!r} at another index than "
                                     "it writes (another lane would write it)")
    inside = {id(n) for lp in loops for n in lp.walk()}
    fences: set[str] = set()
    for n in kernel.body.walk():
        if isinstance(n, (Load, Store, Atomic)) and n.buffer in writers \
                and id(n) not in inside:
            if n.buffer not in shared:
                return NotApplicable(f"{n.buffer!r} is written by the spread loops and "
                                     "used outside them")
            fences |= writers[n.buffer]
    return frozenset(fences)


def _independent(kernel: Kernel, loop: For, arrays: dict[str, int], accs: set[str]) -> str:
    """Why the iterations of ``loop`` cannot be shared out among lanes, or "" (assignments
    to the accumulators ``accs`` are checked by :func:`accumulators`)."""
    declared = analysis.declared_names(loop.body) | accs
    defs = analysis.single_defs(kernel)
    for n in loop.body.walk():
        if isinstance(n, (Barrier, Atomic, Break, Continue, Return)):
            return f"{loop.label} holds a {type(n).__name__.lower()}"
        if isinstance(n, Assign) and n.name not in declared:
            return f"{loop.label} carries {n.name!r} from one iteration to the next"
        if isinstance(n, For) and n.var not in declared and n is not loop:
            declared = declared | {n.var}
        if isinstance(n, Store):
            if n.buffer in arrays:
                if _direct_index(n.index) != loop.var:
                    return f"{n.buffer!r} is written at another loop's index"
                continue
            alloc = next((a for a in kernel.body.walk()
                          if isinstance(a, Alloc) and a.name == n.buffer), None)
            if alloc is not None and alloc.space == "local":
                return f"{loop.label} writes per-thread array {n.buffer!r}, which the " \
                       "lanes would then hold differently"
            # Locals set before the loop are atoms; lets inside it may carry the loop variable.
            index = inline_locals(n.index, {k: v for k, v in defs.items() if k in declared})
            poly = index_poly(_undo_divmod(index))
            if poly is None or poly.get((loop.var,), 0) == 0 or any(
                    loop.var in mono and mono != (loop.var,) for mono in poly):
                return f"the store to {n.buffer!r} does not move with {loop.var}"
    return ""


def _undo_divmod(expr: Expr) -> Expr:
    """``(a / c) * c + a % c`` → ``a``: C's division identity (exact for any integers, c ≠ 0),
    the form a row-major index takes when a flat counter is split into row and column."""
    def visit(n: Node) -> Node | None:
        if isinstance(n, Binary) and n.op == "+":
            for mul, mod in ((n.left, n.right), (n.right, n.left)):
                if isinstance(mul, Binary) and mul.op == "*" and isinstance(mod, Binary) \
                        and mod.op == "%":
                    for div, factor in ((mul.left, mul.right), (mul.right, mul.left)):
                        if isinstance(div, Binary) and div.op == "/" and div.right == factor \
                                and mod.right == factor and div.left == mod.left:
                            return div.left
        return None

    return transform(expr, visit)


def _identity(op: str, t: ScalarType) -> Const | None:
    if op == "sum":
        return Const(0.0 if t.is_float else 0, t)
    if t.is_float:
        return Const(-math.inf if op == "max" else math.inf, t)
    if t.name == "i32":
        return Const(-(2 ** 31) if op == "max" else 2 ** 31 - 1, t)
    return None


# ---------------------------------------------------------------------- the rewrite


def _current(kernel: Kernel, label: str) -> For:
    loop = analysis.find_loop(kernel, label)
    assert loop is not None
    return loop


def _spread(kernel: Kernel, loop: For, plan: Plan) -> list:
    """The statements replacing ``loop``: its iterations dealt out to the lanes, each lane
    accumulating into partials that a warp reduction combines after the loop."""
    loop = _current(kernel, loop.label)
    canon = analysis.canonical(loop)
    t = loop.type
    lane = Cast(Special("lane"), t)
    accs = plan.reductions.get(loop.label, {})
    types = _acc_types(loop, accs)
    parts: dict[str, str] = {}
    for acc in accs:
        parts[acc] = analysis.fresh_name(kernel, f"{acc}_part", set(parts.values()))
    body = _renamed(loop.body, parts)
    if any(_indexes(loop, name) for name in plan.arrays):
        # x = lane + 32 k for k = 0 .. slots - 1, guarded by the loop's own condition.
        slots = max(size for name, size in plan.arrays.items() if _indexes(loop, name))
        k = analysis.fresh_name(kernel, f"{loop.var}_slot", set(parts.values()))
        kv = Var(k, t)
        x = Binary("+", lane, Binary("*", kv, Const(WARP, t), t), t)
        inner = Block((Declare(loop.var, t, x, loop.loc),
                       If(loop.cond, _slots(body, loop.var, kv, plan.arrays), None, loop.loc)),
                      body.loc)
        new_loop = dataclasses.replace(
            loop, var=k, init=Const(0, t), cond=Binary("<", kv, Const(slots, t), BOOL),
            update=Binary("+", kv, Const(1, t), t), body=inner, kind="unroll", unroll=0)
    else:
        start = fold_expr(Binary("+", canon.start,
                                 Binary("*", lane, Const(canon.step, t), t), t))
        new_loop = dataclasses.replace(
            loop, init=start, body=body, kind="serial", unroll=None,
            update=Binary("+", Var(loop.var, t), Const(canon.step * WARP, t), t))
    before = [Declare(part, types[acc], _identity(accs[acc], types[acc]), loop.loc)
              for acc, part in parts.items()]
    after = [Assign(acc, combine(accs[acc], Var(acc, types[acc]),
                                  WarpReduce(accs[acc], Var(part, types[acc]), types[acc])),
                    loop.loc) for acc, part in parts.items()]
    return [*before, new_loop, *after]


def _renamed(body: Block, names: dict[str, str]) -> Block:
    """``body`` with the variables ``names`` maps read and assigned under their new names."""
    def visit(n: Node) -> Node | None:
        if isinstance(n, Var) and n.name in names:
            return dataclasses.replace(n, name=names[n.name])
        if isinstance(n, Assign) and n.name in names:
            return dataclasses.replace(n, name=names[n.name])
        return None

    return transform(body, visit)


def _indexes(loop: For, name: str) -> bool:
    return any(isinstance(n, (Load, Store)) and n.buffer == name
               and _direct_index(n.index) == loop.var for n in loop.body.walk())


def _slots(body: Block, var: str, slot: Var, arrays: dict[str, int]) -> Block:
    """``body`` with ``A[var]`` of the shared-out arrays read and written at ``A[slot]``."""
    def visit(n: Node) -> Node | None:
        if isinstance(n, (Load, Store)) and n.buffer in arrays and _direct_index(n.index) == var:
            return dataclasses.replace(n, index=slot)
        return None

    return transform(body, visit)


def _compact(kernel: Kernel, sizes: dict[str, int]) -> Kernel:
    def visit(n: Node) -> Node | None:
        if isinstance(n, Alloc) and n.name in sizes:
            return dataclasses.replace(n, size=sizes[n.name])
        return None

    return dataclasses.replace(kernel, body=transform(kernel.body, visit))


RULES = [DistributeLoop()]
