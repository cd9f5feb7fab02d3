"""Building the warp-scan form of a linear recurrence (the ``parallel-scan`` rule's rewrite)."""

from __future__ import annotations

import dataclasses

from kir.analysis import (
    assigned_vars,
    declared_names,
    fresh_name,
    next_loop_label,
    rename_var,
    replace_stmt,
    used_vars,
)
from kir.ir import (
    Assign,
    Binary,
    Block,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Launch,
    Node,
    Select,
    Shuffle,
    Special,
    Stmt,
    Var,
    transform,
)
from kir.ir.fold import fold_expr
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, F32, U32, ScalarType

STEPS = (1, 2, 4, 8, 16)  # Hillis-Steele offsets: log2(32) rounds


def build(kernel: Kernel, rec, seqs: int) -> Kernel:
    """``kernel`` with ``rec`` (a parallel_scan.Recurrence) run as a warp scan, every original
    thread becoming a warp and ``seqs`` of them sharing a block."""
    names: set[str] = set()

    def fresh(base: str) -> str:
        name = fresh_name(kernel, base, names)
        names.add(name)
        return name

    loop: For = rec.loop
    c_start, c_stop = loop.init, loop.cond.right  # type: ignore[attr-defined]
    inclusive = loop.cond.op == "<="  # type: ignore[attr-defined]
    t = loop.type
    loc = loop.loc

    def iv(v: str) -> Var:
        return Var(v, t)

    def ic(value: int) -> Const:
        return Const(value, t)

    def ib(op: str, x: Expr, y: Expr) -> Binary:
        return Binary(op, x, y, BOOL if op in ("<", "<=", ">=", ">") else t)

    def fb(op: str, x: Expr, y: Expr) -> Binary:
        return Binary(op, x, y, F32)

    h, h0 = Var(rec.h, F32), fresh(f"{rec.h}_init")
    lane, trip, chunk = fresh("scan_lane"), fresh("scan_trip"), fresh("scan_chunk")
    lo, hi = fresh("scan_lo"), fresh("scan_hi")
    ca, cb = fresh("scan_a"), fresh("scan_b")
    span = ib("+", ib("-", c_stop, c_start), ic(1)) if inclusive else ib("-", c_stop, c_start)
    nonempty = ib("<=" if inclusive else "<", c_start, c_stop)
    stmts: list[Stmt] = [
        Declare(h0, F32, h, loc),
        Declare(lane, t, Cast(Special("lane", "", U32), t), loc),
        Declare(trip, t, Select(nonempty, span, ic(0), t), loc),
        Declare(chunk, t, ib("/", ib("+", iv(trip), ic(WARP - 1)), ic(WARP)), loc),
        Declare(lo, t, ib("+", c_start, ib("*", iv(lane), iv(chunk))), loc),
        Declare(hi, t, _min(ib("+", iv(lo), iv(chunk)), ib("+", c_start, iv(trip)), t), loc),
        Declare(ca, F32, Const(1.0, F32), loc),
        Declare(cb, F32, Const(0.0, F32), loc),
    ]
    stmts.append(_compose_loop(kernel, rec, fresh, iv(lo), iv(hi), ca, cb))
    a_, b_ = Var(ca, F32), Var(cb, F32)
    for off in STEPS:
        pa, pb = fresh("scan_pa"), fresh("scan_pb")
        on = ib(">=", iv(lane), ic(off))
        stmts += [
            Declare(pa, F32, Shuffle("up", a_, Const(off, t), F32), loc),
            Declare(pb, F32, Shuffle("up", b_, Const(off, t), F32), loc),
            # (pa, pb) covers the earlier lanes: compose it before this lane's pair.
            Assign(cb, Select(on, fb("+", fb("*", a_, Var(pb, F32)), b_), b_, F32), loc),
            Assign(ca, Select(on, fb("*", a_, Var(pa, F32)), a_, F32), loc),
        ]
    ea, eb = fresh("scan_ea"), fresh("scan_eb")
    first = ib(">=", iv(lane), ic(1))
    stmts += [
        Declare(ea, F32, Shuffle("up", a_, ic(1), F32), loc),
        Declare(eb, F32, Shuffle("up", b_, ic(1), F32), loc),
        Assign(rec.h, Select(first, fb("+", fb("*", Var(ea, F32), Var(h0, F32)), Var(eb, F32)),
                             Var(h0, F32), F32), loc),
        dataclasses.replace(loop, init=iv(lo), cond=ib("<", Var(loop.var, t), iv(hi))),
        # Lane 31's inclusive pair spans every step: all lanes leave with the final h.
        Assign(rec.h, Shuffle("idx", fb("+", fb("*", a_, Var(h0, F32)), b_), ic(WARP - 1),
                              F32), loc),
    ]
    stmts = [_folded(st) for st in stmts]
    out = replace_stmt(kernel, loop, stmts)
    return _to_warps(out, seqs)


def _folded(st: Stmt) -> Stmt:
    """Constant-fold a header statement built here (``0 + lo``, ``stop - 0``)."""
    if isinstance(st, Declare) and st.init is not None:
        return dataclasses.replace(st, init=fold_expr(st.init))
    if isinstance(st, For):
        return dataclasses.replace(st, init=fold_expr(st.init), cond=fold_expr(st.cond))
    return st


def _min(x: Expr, y: Expr, t: ScalarType) -> Expr:
    return Select(Binary("<", x, y, BOOL), x, y, t)


def _compose_loop(kernel: Kernel, rec, fresh, lo: Expr, hi: Expr, ca: str, cb: str) -> For:
    """The loop over a lane's chunk that composes its (A, B): only the statements before the
    update that a_t or b_t need, with fresh local names and loop labels."""
    loop: For = rec.loop
    needed = used_vars(rec.a) | used_vars(rec.b)
    pre: list[Stmt] = []
    for st in reversed(loop.body.stmts[:rec.index]):
        if isinstance(st, Declare) and st.name not in needed:
            continue
        pre.insert(0, st)
        needed |= used_vars(st) | assigned_vars(st)  # keep the declarations it writes
    at, uloc = fresh("scan_at"), loop.body.stmts[rec.index].loc
    body: Node = Block(tuple(pre) + (
        Declare(at, F32, rec.a, uloc),  # a_t once: it is used twice
        Assign(cb, Binary("+", Binary("*", Var(at, F32), Var(cb, F32), F32), rec.b, F32), uloc),
        Assign(ca, Binary("*", Var(at, F32), Var(ca, F32), F32), uloc)))
    var = fresh(loop.var)
    body = rename_var(body, loop.var, var)
    for name in sorted(declared_names(Block(tuple(pre)))):
        body = rename_var(body, name, fresh(name))
    taken: set[str] = set()

    def relabel(n: Node) -> Node | None:
        if isinstance(n, For):
            label = next_loop_label(kernel, taken)
            taken.add(label)
            return dataclasses.replace(n, label=label)
        return None

    body = transform(body, relabel)
    label = next_loop_label(kernel, taken)
    t = loop.type
    return For(label, var, t, lo, Binary("<", Var(var, t), hi, BOOL),
               Binary("+", Var(var, t), Const(1, t), t), body, loc=loop.loc)  # type: ignore


def _to_warps(kernel: Kernel, seqs: int) -> Kernel:
    """Relaunch: each former thread is a warp, ``seqs`` per block. Hardware indices are
    rewritten to the former thread's, so code outside the loop is unchanged (every lane of
    a warp computes the same values)."""
    block = kernel.launch.block[0]
    per = block // seqs  # new blocks per former block

    def visit(n: Node) -> Node | None:
        if not isinstance(n, Special) or n.axis != "x":
            return None
        tx, bx = Special("thread", "x", n.type), Special("block", "x", n.type)
        if n.kind == "thread":
            warp = Binary("/", tx, Const(WARP, n.type), n.type)
            if per == 1:
                return warp
            first = Binary("*", Binary("%", bx, Const(per, n.type), n.type),
                           Const(seqs, n.type), n.type)
            return Binary("+", first, warp, n.type)
        if n.kind == "block":
            return bx if per == 1 else Binary("/", bx, Const(per, n.type), n.type)
        if n.kind == "block_dim":
            return Const(block, n.type)
        if n.kind == "grid_dim":
            return n if per == 1 else Binary("/", n, Const(per, n.type), n.type)
        return None

    body = transform(kernel.body, visit)
    grid = kernel.launch.grid
    gx = grid[0] if per == 1 else f"({grid[0]}) * {per}"
    launch = Launch((gx, grid[1], grid[2]), (WARP * seqs, 1, 1), kernel.launch.shared_bytes)
    return dataclasses.replace(kernel, body=body, launch=launch)
