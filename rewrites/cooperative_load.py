"""cooperative-load: a per-thread row load into shared memory becomes a block-strided one."""

from __future__ import annotations

from dataclasses import dataclass

from kir import analysis
from kir.analysis import CanonicalLoop, single_defs
from kir.analysis.parallel import is_thread_x, position_of
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Special,
    Stmt,
    Store,
    Var,
    While,
    transform,
)
from kir.ir.types import BOOL, U32
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


def _terms(e: Expr) -> list[Expr]:
    """The operands of a chain of ``+``."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Binary) and x.op == "+":
            stack += [x.right, x.left]
        else:
            out.append(x)
    return out


def _inline(e: Expr, defs: dict[str, Expr], tainted: set[str]) -> Expr | None:
    """Replace thread-dependent locals by their single definitions until only ``thread.x``
    remains thread-dependent; None when some cannot be (assigned, or loaded data)."""
    for _ in range(20):
        names = analysis.used_vars(e) & tainted
        if not names:
            return e
        for name in names:
            if name not in defs:
                return None
            e = analysis.substitute(e, name, defs[name])  # type: ignore[assignment]
    return None


@dataclass(frozen=True)
class TileLoad:
    """A per-thread row load and its body with thread-dependent locals inlined (None when
    refused). ``refusal``: why the block cannot load the tile together, for a loop still
    listed so that the search sees the sites it saw before; a later change stops listing
    such loops."""

    canon: CanonicalLoop
    body: Block | None = None
    refusal: str = ""


class CooperativeLoad(LoopRule):
    """Make the threads of a block load a shared-memory tile together, coalesced.

    CUDA practice: CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory" and
    "Shared Memory": when thread ``t`` loads its own row ``tile[t*d + x] = G[base + t*d + x]``
    for ``x < d``, neighbouring threads touch addresses ``d`` elements apart on each step;
    letting thread ``t`` take elements ``t, t + blockDim.x, ...`` of the whole ``T*d`` tile
    makes each step one contiguous, coalesced access. FlashAttention-1's K/V tile loads are
    of this form.

    Legality checked: the loop runs from 0 with step 1 to a block-uniform bound ``d``, is not
    under thread-dependent control flow, and its body only stores into shared arrays (no
    reads of them, no global writes, barriers or loops) at indices ``uniform + ROW * d + x``
    with ``ROW`` the thread index (so (thread, x) pairs map one-to-one to elements); thread
    dependent values in it are inlined from single definitions. A barrier must follow before
    the tile is read, and no read of the tile may precede the load without a barrier between
    (other threads now write every thread's row). 1-D blocks only.
    """

    name = "cooperative-load"

    def plan_loop(self, kernel: Kernel, loop: For) -> TileLoad | NotApplicable:
        canon = analysis.canonical(loop)
        if canon is None or canon.step != 1 or not any(
                isinstance(n, Store) for n in loop.body.walk()):
            return NotApplicable(f"{loop.label} is not a counted loop with step 1 that stores")
        body = _inlined_body(kernel, canon)
        if isinstance(body, str):
            return TileLoad(canon, refusal=body)
        return TileLoad(canon, body)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        plan: TileLoad = match.plan
        if plan.refusal:
            return NotApplicable(plan.refusal)
        canon, new_body = plan.canon, plan.body
        loop = canon.loop
        t = loop.type
        idx = analysis.fresh_name(kernel, "coop")
        row = analysis.fresh_name(kernel, "coop_row", {idx})
        iv = Var(idx, t)
        rowv = Var(row, t)
        new_body = transform(new_body, lambda n: Cast(rowv, U32)
                             if isinstance(n, Special) and is_thread_x(n) else None)
        # i32(u32(row)) is row again: drop the round trip the substitution left.
        new_body = transform(new_body, lambda n: rowv if isinstance(n, Cast) and n.type == t
                             and n.value == Cast(rowv, U32) else None)
        bdim = Cast(Special("block_dim", "x"), t)
        stmts: tuple[Stmt, ...] = (
            Declare(row, t, Binary("/", iv, canon.stop, t), loc=loop.loc),
            Declare(loop.var, t, Binary("%", iv, canon.stop, t), loc=loop.loc),
        ) + new_body.stmts  # type: ignore[attr-defined]
        coop = For(loop.label, idx, t, Cast(Special("thread", "x"), t),
                   Binary("<", iv, Binary("*", bdim, canon.stop, t), BOOL),
                   Binary("+", iv, bdim, t), Block(stmts), loc=loop.loc)
        return analysis.replace_stmt(kernel, loop, coop)


def _inlined_body(kernel: Kernel, canon: CanonicalLoop) -> Block | str:
    """The loop's body with thread-dependent locals inlined, or why the block cannot load
    the tile together."""
    loop, site = canon.loop, canon.loop.label
    if canon.inclusive or canon.start != Const(0, loop.type):
        return f"{site} is not a loop from 0 to a bound with step 1"
    if kernel.launch.block[1:] != (1, 1):
        return "the block is not one-dimensional"
    if analysis.has_matrix_stmts(loop.body):
        return f"{site} holds matrix-tile statements"
    tainted = analysis.thread_dependent_vars(kernel)
    if analysis.is_thread_dependent(canon.stop, tainted):
        return f"the bound of {site} differs between threads"
    pos = position_of(kernel, loop)
    assert pos is not None
    if any(isinstance(a, (If, While)) and analysis.is_thread_dependent(a.cond, tainted)
           for a in pos.ancestors):
        return f"{site} runs under thread-dependent control flow"
    shared = {n.name for n in kernel.body.walk() if isinstance(n, Alloc)
              and n.space == "shared"}
    body_ok = _check_body(loop, shared)
    if isinstance(body_ok, NotApplicable):
        return body_ok.reason
    tiles = analysis.buffers_written(loop.body)
    defs = {k: v for k, v in single_defs(kernel).items() if not any(
        isinstance(n, Load) for n in v.walk())}
    new_body = _inline(loop.body, defs, tainted - analysis.declared_names(loop.body))
    if new_body is None:
        return f"{site} uses thread-dependent values that cannot be inlined"
    for n in new_body.walk():
        if isinstance(n, Special) and n.kind in ("lane", "warp", "thread") \
                and not is_thread_x(n):
            return f"{site} uses {n.kind}{n.axis}"
    for n in new_body.walk():
        if isinstance(n, Store) and not _row_major(n.index, loop.var, canon.stop, tainted):
            return (f"{site} stores {n.buffer!r} at an index not of the form base + thread * "
                    f"{_short(canon.stop)} + {loop.var}")
    why = _barriers(pos, tiles)
    if why:
        return why
    return new_body


def _short(e: Expr) -> str:
    return e.name if isinstance(e, Var) else "d"


def _check_body(loop: For, shared: set[str]) -> NotApplicable | None:
    stores = 0
    for n in loop.body.walk():
        if isinstance(n, (Barrier, For, While, Atomic)) or (
                isinstance(n, Assign)):
            return NotApplicable(f"{loop.label} does more than load a tile")
        if isinstance(n, Store):
            if n.buffer not in shared:
                return NotApplicable(f"{loop.label} writes global {n.buffer!r}")
            stores += 1
        if isinstance(n, Load) and n.buffer in shared:
            return NotApplicable(f"{loop.label} reads shared {n.buffer!r}")
    return None if stores else NotApplicable(f"{loop.label} stores nothing")


def _row_major(index: Expr, var: str, stop: Expr, tainted: set[str]) -> bool:
    """``uniform + ROW * stop + var`` (any order of the ``+`` terms) with ROW = thread.x."""
    terms = _terms(index)
    xs = [t for t in terms if isinstance(t, Var) and t.name == var]
    rows = [t for t in terms if isinstance(t, Binary) and t.op == "*" and (
        (is_thread_x(t.left) and t.right == stop) or (is_thread_x(t.right) and t.left == stop))]
    if len(xs) != 1 or len(rows) != 1:
        return False
    rest = [t for t in terms if t is not xs[0] and t is not rows[0]]
    return not any(analysis.is_thread_dependent(t, tainted) or var in analysis.used_vars(t)
                   for t in rest)


def _reads(stmt: Stmt, tiles: set[str]) -> bool:
    return any(isinstance(n, Load) and n.buffer in tiles for n in stmt.walk())


def _barriers(pos, tiles: set[str]) -> str | None:
    """A barrier must separate the load from every read of the tile, before and after."""
    stmts = pos.block.stmts
    after = stmts[pos.index + 1:]
    for s in after:
        if isinstance(s, Barrier):
            break
        if _reads(s, tiles) or any(isinstance(n, Barrier) for n in s.walk()):
            return "no barrier between the load and the tile's first use"
    else:
        return "no barrier follows the load"
    for s in reversed(stmts[:pos.index]):
        if isinstance(s, Barrier):
            return None
        if _reads(s, tiles):
            return "the tile is read before the load without a barrier between"
    outer = [a for a in pos.ancestors if not isinstance(a, Block)]
    if outer and isinstance(outer[-1], (For, While)):
        # Next iteration's load against this iteration's reads: a barrier must end the body.
        for s in reversed(after):
            if isinstance(s, Barrier):
                return None
            if _reads(s, tiles):
                return "the tile is read at the end of the loop body without a barrier after"
        return None
    return None if not outer else "the load sits in a branch"


RULES = [CooperativeLoad()]
