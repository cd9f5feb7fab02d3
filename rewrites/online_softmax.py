"""online-softmax: fuse the max pass and the sum-of-exponentials pass of a softmax."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    buffers_read,
    buffers_written,
    canonical,
    fresh_name,
    rename_var,
    used_vars,
)
from kir.ir import (
    Assign,
    Binary,
    Block,
    Call,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Node,
    Stmt,
    Var,
    transform,
)
from kir.ir.types import F32
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


@dataclass(frozen=True)
class Passes:
    """The two passes found at a max loop: the plan ``apply`` rewrites."""

    parent: Block       # the block holding both loops
    max_loop: For       # for i: m = max(m, E)
    sum_loop: For       # for i: s = s + exp(E - M)
    s_decl: Declare     # let s = 0.0, between the loops
    m: str
    s: str
    elem: Expr          # E, over max_loop's variable
    frame: Expr         # M, the max the sum loop subtracts
    fast: bool          # whether the sum loop's exp was the fast form


def parent_block(root: Block, stmt: Stmt) -> Block | None:
    """The block that holds ``stmt`` (by identity) directly."""
    for n in root.walk():
        if isinstance(n, Block) and any(s is stmt for s in n.stmts):
            return n
    return None


def _single_assign(loop: For) -> Assign | None:
    stmts = loop.body.stmts
    return stmts[0] if len(stmts) == 1 and isinstance(stmts[0], Assign) else None


def _max_update(loop: For) -> tuple[str, Expr] | None:
    """``m = max(m, E)`` (either argument order), E not reading m: (m, E)."""
    a = _single_assign(loop)
    if a is None or not (isinstance(a.value, Call) and a.value.fn == "max"
                         and a.value.type == F32 and len(a.value.args) == 2):
        return None
    x, y = a.value.args
    for mine, other in ((x, y), (y, x)):
        if mine == Var(a.name, F32) and a.name not in used_vars(other):
            return a.name, other
    return None


def _sum_update(loop: For) -> tuple[str, Expr, Expr, bool] | None:
    """``s = s + exp(E - M)`` (either operand order), M a variable: (s, E, M, fast)."""
    a = _single_assign(loop)
    if a is None or not (isinstance(a.value, Binary) and a.value.op == "+"
                         and a.value.type == F32):
        return None
    for mine, other in ((a.value.left, a.value.right), (a.value.right, a.value.left)):
        if mine != Var(a.name, F32) or not (isinstance(other, Call) and other.fn == "exp"):
            continue
        arg = other.args[0]
        if isinstance(arg, Binary) and arg.op == "-" and isinstance(arg.right, Var) \
                and arg.right.name not in (a.name, loop.var) \
                and a.name not in used_vars(arg.left):
            return a.name, arg.left, arg.right, other.fast
    return None


def _same_header(a: For, b: For) -> bool:
    """Same type, start, condition and step once b's variable is renamed to a's."""
    if a.type != b.type or a.init != b.init:
        return False
    return (rename_var(b.cond, b.var, a.var) == a.cond
            and rename_var(b.update, b.var, a.var) == a.update)


def find_passes(kernel: Kernel, loop: For) -> Passes | NotApplicable:
    """The two-pass pattern starting at ``loop``, or why there is none."""
    label = loop.label
    if canonical(loop) is None:
        return NotApplicable(f"loop {label} is not a counted loop")
    found = _max_update(loop)
    if found is None:
        return NotApplicable(f"loop {label} is not a max pass (its body must be just "
                             "m = max(m, x_i))")
    m, elem = found
    parent = parent_block(kernel.body, loop)
    assert parent is not None
    rest = parent.stmts[[i for i, s in enumerate(parent.stmts) if s is loop][0] + 1:]
    header_vars = (used_vars(loop.init) | used_vars(loop.cond) | used_vars(loop.update)) - {
        loop.var}
    for j, cand in enumerate(rest):
        if not isinstance(cand, For) or not _same_header(loop, cand):
            continue
        upd = _sum_update(cand)
        if upd is None:
            continue
        s, sum_elem, frame, fast = upd
        if rename_var(sum_elem, cand.var, loop.var) != elem:
            continue
        between = rest[:j]
        decls = [b for b in between if isinstance(b, Declare) and b.name == s]
        if len(decls) != 1 or decls[0].init != Const(0.0, F32):
            return NotApplicable(f"sum variable {s} is not declared as 0.0 between the two "
                                 "passes")
        others = Block(tuple(b for b in between if b is not decls[0]))
        if s in used_vars(others) | assigned_vars(others) or s == m:
            return NotApplicable(f"{s} is used between the two passes")
        if buffers_written(others) & buffers_read(elem):
            return NotApplicable("the data the passes read is written between them")
        if assigned_vars(others) & ((used_vars(elem) - {loop.var}) | header_vars):
            return NotApplicable("the element or the loop bounds change between the two passes")
        return Passes(parent, loop, cand, decls[0], m, s, elem, frame, fast)
    return NotApplicable(f"no sum-of-exp(x_i - max) pass over the same range follows loop "
                         f"{label}")


class OnlineSoftmax(LoopRule):
    """Fuse a softmax's max pass and sum-of-exponentials pass into one online pass.

    Encodes Milakov & Gimelshein 2018, "Online normalizer calculation for softmax" (the
    running max/sum that FlashAttention builds on): ``m = max_i x_i`` then
    ``s = sum_i exp(x_i - M)`` becomes one loop keeping ``(m, s)`` with
    ``m' = max(m, x); s = s * exp(m - m') + exp(x - m'); m = m'``, halving the reads of x.

    The passes may be per-thread partials of a block reduction (a block-strided loop whose
    ``m`` is then reduced across the block by shuffles and shared memory, and whose sum pass
    subtracts the block maximum ``M``). The fused loop leaves each thread's sum in its own
    maximum's frame, so at the place of the sum pass it inserts ``s = s * exp(m_thread - M)``:
    the partial is rescaled into the block maximum's frame before the cross-thread sum,
    and ``s * exp(m_t - M) = sum_i exp(x_i - M)`` holds exactly for any M.

    Checked: both loops are counted loops in the same block with identical bounds; the first
    is exactly ``m = max(m, E)``, the second exactly ``s = s + exp(E - M)`` with the same E;
    ``s`` is declared 0.0 between them and used nowhere else between; nothing between writes
    what E reads or the loop bounds. Not checked: rounding (the result differs in the last
    bits; the spec's tolerance decides) and infinite inputs (``-inf - -inf`` is NaN).
    """

    name = "online-softmax"

    def plan_loop(self, kernel: Kernel, loop: For) -> Passes | NotApplicable:
        return find_passes(kernel, loop)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        return _fuse(kernel, match.plan)


def _exp(arg: Expr, fast: bool) -> Call:
    return Call("exp", (arg,), F32, fast)


def _fuse(kernel: Kernel, mt: Passes) -> Kernel:
    loc = mt.max_loop.body.stmts[0].loc
    xv = fresh_name(kernel, f"{mt.m}_x")
    mn = fresh_name(kernel, f"{mt.m}_new", {xv})
    m_thread = fresh_name(kernel, f"{mt.m}_thread", {xv, mn})
    m, s = Var(mt.m, F32), Var(mt.s, F32)
    x, m_new = Var(xv, F32), Var(mn, F32)
    body = Block((
        Declare(xv, F32, mt.elem, loc),
        Declare(mn, F32, Call("max", (m, x), F32), loc),
        Assign(mt.s, Binary("+", Binary("*", s, _exp(Binary("-", m, m_new, F32), mt.fast), F32),
                            _exp(Binary("-", x, m_new, F32), mt.fast), F32),
               mt.sum_loop.body.stmts[0].loc),
        Assign(mt.m, m_new, loc),
    ), mt.max_loop.body.loc)
    fused = dataclasses.replace(mt.max_loop, body=body)
    rescale = Assign(mt.s, Binary("*", s, _exp(Binary("-", Var(m_thread, F32), mt.frame, F32),
                                               mt.fast), F32), mt.sum_loop.loc)
    stmts: list[Stmt] = []
    for st in mt.parent.stmts:
        if st is mt.max_loop:
            stmts += [mt.s_decl, fused, Declare(m_thread, F32, m, mt.max_loop.loc)]
        elif st is mt.sum_loop:
            stmts.append(rescale)
        elif st is not mt.s_decl:
            stmts.append(st)
    new_parent = dataclasses.replace(mt.parent, stmts=tuple(stmts))

    def visit(n: Node) -> Node | None:
        return new_parent if n is mt.parent else None

    return dataclasses.replace(kernel, body=transform(kernel.body, visit))


RULES = [OnlineSoftmax()]
