"""warp-reduce: recognize hand-written warp reductions and replace them with WarpReduce."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir import analysis
from kir.analysis import accumulation, single_defs, strip_casts
from kir.analysis.parallel import is_thread_x, position_of
from kir.ir import (
    Assign,
    Barrier,
    Binary,
    Block,
    Call,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Shuffle,
    Special,
    Store,
    Var,
    WarpReduce,
    While,
    const,
)
from kir.ir.types import BOOL, U32, ScalarType
from kir.rewrites.parallel.online_pairs import exponent_of, is_scaled, max_with
from kir.rules import ANALYSES, BaseRule, Match, NoParams, NotApplicable, RuleContext


def _var(e: Expr, name: str) -> bool:
    return isinstance(e, Var) and e.name == name


def _halving(loop: For, start_ok) -> bool:
    """``for (s = START; s > 0 | s >= 1; s = s / 2 | s >> 1)`` with ``start_ok(START)``."""
    c, u, v = loop.cond, loop.update, loop.var
    if not (isinstance(c, Binary) and _var(c.left, v) and isinstance(c.right, Const)
            and (c.op, c.right.value) in ((">", 0), (">=", 1))):
        return False
    if not (isinstance(u, Binary) and _var(u.left, v) and isinstance(u.right, Const)
            and ((u.op == "/" and u.right.value == 2) or (u.op == ">>" and u.right.value == 1))):
        return False
    return start_ok(loop.init)


def _combine(value: Expr, a: Expr, b_ok) -> str | None:
    """The reduction op when ``value`` is ``a + B``, ``B + a``, ``max(a, B)``, ``min(...)``
    with ``b_ok(B)``."""
    found = accumulation(value, a)
    if found is None or not b_ok(found[1]):
        return None
    return "sum" if found[0] == "+" else found[0]


def butterfly(loop: For) -> tuple[str, str, ScalarType] | None:
    """(variable, op, its type) when ``loop`` is ``for (off = 16; off > 0; off /= 2) v = v +
    shfl(v, off)`` (xor or down shuffles over the full warp), else None. The step may go
    through temporaries (a reduction functor's call inlined: ``let b = shfl(v, off); let r =
    max(v, b); v = r``): what counts is its net effect on the one variable it carries."""
    final = _butterfly_effect(loop)
    if final is None or len(final) != 1:
        return None
    name, value = next(iter(final.items()))
    op = _combine(value, Var(name, value.type), lambda e: _partner(e, name, loop))
    if op is None or not isinstance(value.type, ScalarType):
        return None
    return name, op, value.type


def _butterfly_effect(loop: For) -> dict[str, Expr] | None:
    """The net effect of a loop halving its offset from 16 to 1 on the variables it
    carries (:func:`kir.analysis.net_effect`), or None for any other loop."""
    if not _halving(loop, lambda e: isinstance(e, Const) and e.value == 16):
        return None
    return analysis.net_effect(loop.body)


def _partner(e: Expr, name: str, loop: For) -> bool:
    """``e`` is the partner lane's ``name``: a full-warp xor or down shuffle of it at the
    butterfly's offset."""
    return (isinstance(e, Shuffle) and e.mode in ("xor", "down") and e.width == 32
            and _var(e.value, name) and _var(strip_casts(e.lane), loop.var))


def tree(kernel: Kernel, loop: For) -> tuple[str, str, Expr] | None:
    """(buffer, op, tid expr) when ``loop`` is the shared-memory tree ``for (s = bdim/2; s >
    0; s >>= 1) { if (tid < s) sh[tid] = sh[tid] + sh[tid + s]; barrier }``."""
    bx = kernel.launch.block[0]
    if kernel.launch.block[1:] != (1, 1) or bx < 32 or bx & (bx - 1):
        return None

    def start_ok(e: Expr) -> bool:
        e = strip_casts(e)
        if isinstance(e, Const):
            return e.value == bx // 2
        return (isinstance(e, Binary) and e.op == "/" and isinstance(e.right, Const)
                and e.right.value == 2 and isinstance(strip_casts(e.left), Special)
                and strip_casts(e.left).kind == "block_dim" and strip_casts(e.left).axis == "x")

    if not _halving(loop, start_ok):
        return None
    stmts = loop.body.stmts
    if len(stmts) != 2 or not isinstance(stmts[0], If) or stmts[0].orelse is not None \
            or not isinstance(stmts[1], Barrier) or len(stmts[0].then.stmts) != 1:
        return None
    cond, store = stmts[0].cond, stmts[0].then.stmts[0]
    defs = single_defs(kernel)

    def tid(e: Expr) -> bool:
        e = strip_casts(e)
        return is_thread_x(e) or (isinstance(e, Var) and e.name in defs
                                  and is_thread_x(defs[e.name]))

    if not (isinstance(cond, Binary) and cond.op == "<" and tid(cond.left)
            and _var(strip_casts(cond.right), loop.var)):
        return None
    if not (isinstance(store, Store) and tid(store.index)
            and isinstance(store.value.type, ScalarType)):
        return None
    own = Load(store.buffer, store.index, store.value.type)

    def other(e: Expr) -> bool:
        return (isinstance(e, Load) and e.buffer == store.buffer
                and isinstance(e.index, Binary) and e.index.op == "+"
                and e.index.left == store.index and _var(strip_casts(e.index.right), loop.var))

    op = _combine(store.value, own, other)
    return (store.buffer, op, store.index) if op else None


@dataclass(frozen=True)
class Butterfly:
    """A shuffle butterfly ``loop`` reducing ``var`` with ``op``."""

    loop: For
    var: str
    op: str
    type: ScalarType


@dataclass(frozen=True)
class PairButterfly:
    """A shuffle butterfly ``loop`` merging the online softmax's running pair: each step
    takes the partner lane's ``(m, s)`` and keeps ``max`` and ``s * exp(m - max) + s' *
    exp(m' - max)`` (an accumulator type's ``merge``)."""

    loop: For
    m: str
    s: str
    type: ScalarType


def pair_butterfly(loop: For) -> PairButterfly | None:
    """The pair when ``loop`` halves from 16 and its straight-line body's net effect on the
    two variables it assigns is the merge with their shuffles across the loop's offset."""
    final = _butterfly_effect(loop)
    if final is None or len(final) != 2:
        return None
    for m, s in (tuple(final), tuple(final)[::-1]):
        t = final[m].type
        if isinstance(t, ScalarType) and t.is_float and _merges(loop, m, s, final[m], final[s]):
            return PairButterfly(loop, m, s, t)
    return None


def _merges(loop: For, m: str, s: str, new_m: Expr, new_s: Expr) -> bool:
    """``new_m`` is ``max(m, shfl(m))`` and ``new_s`` is ``s * exp(m - new_m) + shfl(s) *
    exp(shfl(m) - new_m)`` (terms and factors in either order)."""
    other_m = max_with(new_m, m)
    if other_m is None or not _partner(other_m, m, loop):
        return False
    if not (isinstance(new_s, Binary) and new_s.op == "+"):
        return False
    for kept, added in ((new_s.left, new_s.right), (new_s.right, new_s.left)):
        if not is_scaled(kept, s, Var(m, new_m.type), new_m):
            continue
        if isinstance(added, Binary) and added.op == "*":
            for g, x in ((added.left, added.right), (added.right, added.left)):
                if _partner(g, s, loop) and exponent_of(x) == (other_m, new_m):
                    return True
    return False


@dataclass(frozen=True)
class Tree:
    """A shared-memory tree ``loop`` reducing ``buffer`` (of ``elem``) with ``op``, each
    thread at element ``tid``. ``refusal``: why it cannot be replaced (nested, partial sums
    read afterwards, not a shared array), for a reduction still numbered among the sites so
    that the search sees the sites it saw before; a later change stops listing it."""

    loop: For
    buffer: str
    op: str
    tid: Expr
    elem: ScalarType | None
    refusal: str = ""


def reductions(kernel: Kernel) -> list[Butterfly | PairButterfly | Tree]:
    """Every hand-written warp reduction, in source order: the rule's sites, by number."""
    found: list[Butterfly | PairButterfly | Tree] = []
    for loop in analysis.loops(kernel):
        bf = butterfly(loop)
        if bf is not None:
            found.append(Butterfly(loop, *bf))
            continue
        pair = pair_butterfly(loop)
        if pair is not None:
            found.append(pair)
            continue
        shape = tree(kernel, loop)
        if shape is not None:
            found.append(_tree_plan(kernel, loop, *shape))
    return found


def _tree_plan(kernel: Kernel, loop: For, buf: str, op: str, tid: Expr) -> Tree:
    pos = position_of(kernel, loop)
    if pos is None or any(isinstance(a, (For, While, If)) for a in pos.ancestors):
        return Tree(loop, buf, op, tid, None, "the tree reduction is nested in a loop or branch")
    after = pos.block.stmts[pos.index + 1:]
    for s in after:
        for n in s.walk():
            if isinstance(n, Load) and n.buffer == buf and not (
                    isinstance(strip_casts(n.index), Const) and strip_casts(n.index).value == 0):
                return Tree(loop, buf, op, tid, None,
                            f"{buf!r} is read at an element other than 0 afterwards; its "
                            "partial sums would change")
    elem = kernel_elem(kernel, buf)
    return Tree(loop, buf, op, tid, elem,
                "" if elem is not None else f"{buf!r} is not a shared array")


class WarpReduceRule(BaseRule):
    """Replace a hand-written warp reduction with a WarpReduce (simd_sum / simd_max).

    CUDA practice: the shuffle butterfly ``for (off = 16; off > 0; off /= 2) v +=
    __shfl_xor_sync(~0u, v, off)`` (CUDA C++ Programming Guide, "Warp Shuffle Functions") and
    the shared-memory tree reduction whose last five steps run inside one warp (Harris,
    "Optimizing Parallel Reduction in CUDA", 2007, "unroll the last warp"); and the butterfly
    merging an online softmax's running pair, each lane taking its partner's ``(m, s)``
    (an accumulator type's ``merge``), which becomes ``M = reduce.max(m); s =
    reduce.sum(s * exp(m - M))`` (Milakov & Gimelshein 2018: the pairs combine exactly,
    in any grouping). Metal has
    ``simd_sum``/``simd_max`` for the whole SIMD-group in one instruction; CUDA emits the
    butterfly again.

    Legality checked: the butterfly covers the full 32-lane warp (starts at 16, halves to 1,
    width 32) and combines the variable with its own shuffle; for ``__shfl_down_sync`` only
    lane 0 held the total in CUDA, and every lane getting it is a refinement. The tree form
    needs a power-of-two block width (y = z = 1) that the loop starts at half of, and the
    buffer read afterwards only at element 0 (the other elements' partial sums are not kept);
    blocks wider than 32 keep the loop for s > 32 and hand the tail to warp 0. Not checked:
    that inactive lanes of a divergent warp held nothing the CUDA code relied on (the search
    validates every candidate).
    """

    name = "warp-reduce"
    site_key = "at"

    # Sites are numbered reductions: finding one means finding all before it, so the whole
    # kernel is analysed once per match rather than once per candidate.
    def match(self, kernel: Kernel, ctx: RuleContext | None = None) -> list[Match]:
        ANALYSES[self.name] += 1
        return [Match(str(i), found) for i, found in enumerate(reductions(kernel))
                if not getattr(found, "refusal", "")]

    def match_at(self, kernel: Kernel, site: str,
                 ctx: RuleContext | None = None) -> Match | NotApplicable:
        ANALYSES[self.name] += 1
        found = reductions(kernel)
        if not site.isdigit() or int(site) >= len(found):
            return NotApplicable(f"no warp reduction #{site}")
        refusal = getattr(found[int(site)], "refusal", "")
        return NotApplicable(refusal) if refusal else Match(site, found[int(site)])

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        found = match.plan
        if isinstance(found, Butterfly):
            loop = found.loop
            t = found.type
            new = Assign(found.var, WarpReduce(found.op, Var(found.var, t), t), loc=loop.loc)
            return analysis.replace_stmt(kernel, loop, new)
        if isinstance(found, PairButterfly):
            return _apply_pair(kernel, found)
        if found.refusal:
            return NotApplicable(found.refusal)
        return _apply_tree(kernel, found)


def _apply_pair(kernel: Kernel, plan: PairButterfly) -> Kernel:
    """The merge butterfly as the pair's two reductions: ``M = reduce.max(m); s =
    reduce.sum(s * exp(m - M)); m = M`` (every lane gets the merge of all 32)."""
    t, loc = plan.type, plan.loop.loc
    top = analysis.fresh_name(kernel, f"{plan.m}_all")
    m, s, big = Var(plan.m, t), Var(plan.s, t), Var(top, t)
    scaled = Binary("*", s, Call("exp", (Binary("-", m, big, t),), t), t)
    return analysis.replace_stmt(kernel, plan.loop, [
        Declare(top, t, WarpReduce("max", m, t), loc=loc),
        Assign(plan.s, WarpReduce("sum", scaled, t), loc=loc),
        Assign(plan.m, big, loc=loc)])


def _apply_tree(kernel: Kernel, plan: Tree) -> Kernel:
    loop, buf, op, tid, elem = plan.loop, plan.buffer, plan.op, plan.tid, plan.elem
    assert elem is not None  # a tree without a refusal reduces a shared array
    bx = kernel.launch.block[0]
    res = analysis.fresh_name(kernel, f"{buf}_red")
    own = Load(buf, tid, elem)
    value = own
    if bx > 32:
        shifted = Binary("+", tid, Cast(Const(32, U32), tid.type) if tid.type != U32
                         else Const(32, U32), tid.type)
        value = _combine_expr(op, own, Load(buf, shifted, elem))
    tid_u = tid if tid.type == U32 else Cast(tid, U32)
    zero = Const(0, tid.type) if isinstance(tid.type, ScalarType) else const(0)
    warp0 = If(Binary("<", tid_u, Const(32, U32), BOOL), Block((
        Declare(res, elem, WarpReduce(op, value, elem), loc=loop.loc),
        If(Binary("==", tid, zero, BOOL),
           Block((Store(buf, Const(0, tid.type), Var(res, elem), loc=loop.loc),)),
           loc=loop.loc),
    )), loc=loop.loc)
    new: list = []
    if bx > 32:
        v = Var(loop.var, loop.type)
        new.append(dataclasses.replace(loop, cond=Binary(">", v, Const(32, loop.type), BOOL)))
    new += [warp0, Barrier("block", loc=loop.loc)]
    return analysis.replace_stmt(kernel, loop, new)


def kernel_elem(kernel: Kernel, buf: str) -> ScalarType | None:
    from kir.ir import Alloc
    for n in kernel.body.walk():
        if isinstance(n, Alloc) and n.name == buf and n.space == "shared" \
                and isinstance(n.elem, ScalarType):
            return n.elem
    return None


def _combine_expr(op: str, a: Expr, b: Expr) -> Expr:
    if op == "sum":
        return Binary("+", a, b, a.type)
    return Call(op, (a, b), a.type)


RULES = [WarpReduceRule()]
