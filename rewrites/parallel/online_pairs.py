"""The online softmax's running pair as a partial result: a loop that carries ``(m, s)`` with
``m' = max(m, v)`` and ``s' = s * exp(m - m') + g * exp(v - m')`` leaves, for the elements it
saw, ``m = max v`` and ``s = sum g * exp(v - m)`` (Milakov & Gimelshein, "Online normalizer
calculation for softmax", 2018). Any split of the elements between lanes or threads gives
pairs that combine exactly: the max of the ``m``s, and the sum of ``s * exp(m - U)`` for one
``U`` shared by all (usually that max) — the sum of ``g * exp(v - U)`` over every element.
So a rule may deal such a loop's iterations to other threads when, after the loop, the
pair is read only in those two combines; this module checks both halves."""

from __future__ import annotations

from dataclasses import dataclass

from kir import analysis
from kir.analysis import strip_casts
from kir.ir import (
    Alloc,
    Assign,
    Binary,
    Call,
    Const,
    Declare,
    Expr,
    For,
    Stmt,
    Store,
    Var,
    WarpReduce,
)


@dataclass(frozen=True)
class Pair:
    """The running max ``m`` and the running sum ``s`` a loop carries."""

    m: str
    s: str


def online_pair(loop: For) -> Pair | None:
    """The pair when ``loop``'s body is straight-line lets and assignments whose net effect
    on the two variables it carries is the online update (with the element ``v`` and its
    weight ``g`` free of both; helper-function copies are seen through by substitution) —
    or when the body reads a pack of elements into its own local arrays and a loop inside
    it carries the pair over them (``for k < 4: acc.push(pack[k])``)."""
    return _pack_pair(loop) or _straight_pair(loop)


def _pack_pair(loop: For) -> Pair | None:
    """The pair of the one loop directly in ``loop``'s body that carries one, when every
    other statement only fills arrays of the body's own or sets its own locals, without
    reading either variable of the pair."""
    inner = [s for s in loop.body.stmts if isinstance(s, For)]
    if len(inner) != 1:
        return None
    pair = online_pair(inner[0])
    if pair is None:
        return None
    own = analysis.declared_names(loop.body) | {
        s.name for s in loop.body.stmts if isinstance(s, Alloc) and s.space == "local"}
    for stmt in loop.body.stmts:
        if stmt is inner[0] or (isinstance(stmt, Alloc) and stmt.space == "local"):
            continue
        if not isinstance(stmt, (Declare, Assign, Store)) or \
                {pair.m, pair.s} & analysis.used_vars(stmt):
            return None
        if (isinstance(stmt, Store) and stmt.buffer not in own) or \
                (isinstance(stmt, Assign) and stmt.name not in own):
            return None
    return pair


def _straight_pair(loop: For) -> Pair | None:
    final = analysis.net_effect(loop.body)
    if final is None or len(final) != 2:
        return None
    for m, s in (tuple(final), tuple(final)[::-1]):
        if _is_online(m, s, final[m], final[s]):
            return Pair(m, s)
    return None


def _is_online(m: str, s: str, new_m: Expr, new_s: Expr) -> bool:
    v = max_with(new_m, m)
    if v is None or {m, s} & analysis.used_vars(v):
        return False
    if not (isinstance(new_s, Binary) and new_s.op == "+"):
        return False
    for kept, added in ((new_s.left, new_s.right), (new_s.right, new_s.left)):
        if is_scaled(kept, s, Var(m, new_m.type), new_m) and weighted(added, v, new_m, {m, s}):
            return True
    return False


def max_with(e: Expr, m: str) -> Expr | None:
    """``v`` when ``e`` is ``max(m, v)`` or ``max(v, m)``."""
    if isinstance(e, Call) and e.fn == "max" and len(e.args) == 2:
        for a, b in (e.args, e.args[::-1]):
            if isinstance(strip_casts(a), Var) and strip_casts(a).name == m:
                return b
    return None


def exponent_of(e: Expr) -> tuple[Expr, Expr] | None:
    """``(a, b)`` when ``e`` is ``exp(a - b)`` (fast or not) or ``exp2((a - b) * c)`` with
    ``c`` a constant (what exp-to-exp2 makes of it)."""
    if not (isinstance(e, Call) and len(e.args) == 1):
        return None
    arg = e.args[0]
    if e.fn == "exp2" and isinstance(arg, Binary) and arg.op == "*" \
            and isinstance(arg.right, Const):
        arg = arg.left
    elif e.fn != "exp":
        return None
    if isinstance(arg, Binary) and arg.op == "-":
        return arg.left, arg.right
    return None


def is_scaled(e: Expr, s: str | Expr, m: Expr, by: Expr) -> bool:
    """``e`` is ``s * exp(m - by)`` (either order); ``s`` a variable's name, or an
    expression (a vector's component) compared without casts."""
    if not (isinstance(e, Binary) and e.op == "*"):
        return False
    for a, b in ((e.left, e.right), (e.right, e.left)):
        same = isinstance(a, Var) and a.name == s if isinstance(s, str) \
            else strip_casts(a) == s
        if same and exponent_of(b) == (m, by):
            return True
    return False


def weighted(e: Expr, v: Expr, by: Expr, carried: set[str]) -> bool:
    """``e`` is ``exp(v - by)`` or ``g * exp(v - by)`` with ``g`` free of the pair."""
    if exponent_of(e) == (v, by):
        return True
    if isinstance(e, Binary) and e.op == "*":
        for g, x in ((e.left, e.right), (e.right, e.left)):
            if exponent_of(x) == (v, by) and not carried & analysis.used_vars(g):
                return True
    return False


def combined_after(after: tuple[Stmt, ...], pair: Pair) -> set[int] | str:
    """The warp reductions (by id) that combine ``pair`` after its loop in ``after`` (the
    statements that follow it in its block), when nothing else reads it; else why not.
    Copies of either (``let t = m``) count as the same; ``reduce.max`` of the max and
    ``reduce.sum`` of ``s * exp(m - U)`` — directly, or of a variable set to it — are the
    combines, with ``U`` free of the pair; once reduced or overwritten a name is free."""
    maxes, sums, scaled = {pair.m}, {pair.s}, set()
    verified: set[int] = set()
    for stmt in after:
        tracked = maxes | sums | scaled
        if not (analysis.used_vars(stmt) | analysis.assigned_vars(stmt)) & tracked:
            continue
        if isinstance(stmt, Declare) and isinstance(stmt.init, Var) and stmt.init.name in tracked:
            for group in (maxes, sums, scaled):
                if stmt.init.name in group:
                    group.add(stmt.name)
            continue
        if not isinstance(stmt, (Declare, Assign)):
            return "the running pair is read other than to combine it"
        value = stmt.init if isinstance(stmt, Declare) else stmt.value
        allowed: set[int] = set()
        for n in value.walk():
            if isinstance(n, WarpReduce) and n.op == "max" and isinstance(n.value, Var) \
                    and n.value.name in maxes:
                allowed.add(id(n.value))
                verified.add(id(n))
            elif isinstance(n, WarpReduce) and n.op == "sum" and _sum_ready(
                    n.value, maxes, sums, scaled, tracked):
                allowed.update(id(x) for x in n.value.walk())
                verified.add(id(n))
        if _sum_ready(value, maxes, sums, scaled, tracked) and stmt.name in sums | scaled:
            allowed.update(id(x) for x in value.walk())  # s = s * exp(m - U): now summable
            sums.discard(stmt.name)
            scaled.add(stmt.name)
            continue
        if any(isinstance(n, Var) and n.name in tracked and id(n) not in allowed
               for n in value.walk()):
            return "the running pair is read other than to combine it"
        for group in (maxes, sums, scaled):
            group.discard(stmt.name)  # overwritten with a combined value
    return verified


def _sum_ready(e: Expr, maxes: set[str], sums: set[str], scaled: set[str],
               tracked: set[str]) -> bool:
    """``e`` is a variable holding ``s * exp(m - U)``, or that product itself."""
    if isinstance(e, Var):
        return e.name in scaled
    if not (isinstance(e, Binary) and e.op == "*"):
        return False
    for a, b in ((e.left, e.right), (e.right, e.left)):
        pair = exponent_of(b)
        if isinstance(a, Var) and a.name in sums and pair is not None \
                and isinstance(pair[0], Var) and pair[0].name in maxes \
                and not tracked & analysis.used_vars(pair[1]):
            return True
    return False
