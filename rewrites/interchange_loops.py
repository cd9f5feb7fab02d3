"""interchange-loops: swap a loop with the loop nested in it (prologue/epilogue moved in)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kir.analysis import (
    assigned_vars,
    declared_names,
    has_own_exit,
    is_thread_dependent,
    replace_loop,
    thread_dependent_vars,
    used_vars,
)
from kir.analysis.deps import all_deps, can_interchange, dependence_graph
from kir.analysis.loop_edits import has_barrier, has_exit, int_assume
from kir.ir import Alloc, Atomic, Barrier, Block, For, Kernel, Load, Stmt, Store
from kir.rules import LoopRule, Match, NoParams, NotApplicable, RuleContext


@dataclass(frozen=True)
class Nest:
    """An outer loop, the last loop nested directly in its body, and the statements before
    (``pro``) and after (``epi``) that inner loop. ``refusal``: why the shape forbids the
    swap, for a site still listed so that the search sees the sites it saw before; a later
    change stops listing such nests."""

    outer: For
    inner: For
    pro: tuple[Stmt, ...]
    epi: tuple[Stmt, ...]
    refusal: str = ""


class InterchangeLoops(LoopRule):
    """Swap loop ``loop`` with the (last) loop nested directly in its body.

    CUDA practice: loop interchange, and the FlashAttention-1 -> FlashAttention-2 change
    (Dao 2023, §3.1): FA-1 loops over K/V tiles outside and query tiles inside, keeping the
    running max/sum in global memory; FA-2 swaps the loops so each query tile streams over
    all K/V tiles. The statements around the inner loop (cooperative loads of Kj/Vj and the
    barriers) move inside: ``for j {P; for i {B}; E}`` becomes ``for i {for j {P; B; E}}``.

    Legality (via :mod:`kir.analysis.deps`, with the spec's integer scalars as facts):
    * the inner loop's bounds do not depend on the outer loop; no break/continue/return;
    * P and E write only scalars they declare and shared/local arrays that nothing after the
      nest reads, never global memory; nothing in the nest flows into them (they can be run
      again for every inner iteration and give the same values); their dependences with B are
      flow P->B within one outer iteration or anti B->P; when threads communicate between
      P/E and B, P ends and E contains a barrier;
    * among B's instances no dependence has direction (<, >) once reads covered by a write
      of the same iteration are discounted (iteration-private tiles such as Qi and S), and
      threads do not conflict in B;
    * barriers stay uniform: the new outer loop's bounds are the same for every thread.
    Not checked: dependences on non-affine indices count as conflicts (refused), which makes
    the rule conservative; overflow is ignored.
    """

    name = "interchange-loops"

    def plan_loop(self, kernel: Kernel, outer: For) -> Nest | NotApplicable:
        """The nest and its shape checks; the dependence tests need the spec's scalars
        (``ctx``), so they run in ``apply``."""
        inner_at = [k for k, s in enumerate(outer.body.stmts) if isinstance(s, For)]
        if not inner_at:
            return NotApplicable(f"{outer.label} holds no directly nested loop")
        at = inner_at[-1]  # earlier loops (cooperative tile loads) belong to the prologue
        inner: For = outer.body.stmts[at]  # type: ignore[assignment]
        pro, epi = outer.body.stmts[:at], outer.body.stmts[at + 1:]
        reason = _check_shape(kernel, outer, inner, Block(pro + epi))
        return Nest(outer, inner, pro, epi, reason or "")

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        nest: Nest = match.plan
        if nest.refusal:
            return NotApplicable(nest.refusal)
        outer, inner, pro, epi = nest.outer, nest.inner, list(nest.pro), list(nest.epi)
        assume = int_assume(ctx.scalars)
        if not can_interchange(kernel, outer.label, inner.label, assume, within=inner.label,
                               kill_covered=True):
            return NotApplicable(f"a dependence of {inner.label}'s body forbids the swap")
        reason = _check_around(kernel, outer, inner, pro, epi, assume)
        if reason:
            return NotApplicable(reason)
        new_outer = dataclasses.replace(
            outer, body=Block(tuple(pro) + inner.body.stmts + tuple(epi), outer.body.loc))
        new_inner = dataclasses.replace(inner, body=Block((new_outer,), inner.body.loc))
        return replace_loop(kernel, match.site, new_inner)


def _check_shape(kernel: Kernel, outer: For, inner: For, around: Block) -> str | None:
    if has_own_exit(outer) or has_own_exit(inner) or has_exit(around):
        return "break/continue/return in the nest"
    header = used_vars(inner.init) | used_vars(inner.cond) | used_vars(inner.update)
    if header & (assigned_vars(outer.body) - {inner.var} | {outer.var}):
        return f"{inner.label}'s bounds depend on {outer.label}"
    if any(isinstance(n, Alloc) for n in outer.body.walk()):
        return "an array is allocated inside the nest"
    if has_barrier(outer):
        tainted = thread_dependent_vars(kernel)
        if any(is_thread_dependent(e, tainted) for e in (inner.init, inner.cond, inner.update)):
            return f"{inner.label}'s bounds differ between threads and the nest has a barrier"
    written = assigned_vars(around)
    if written - declared_names(around):
        return "statements around the inner loop write variables declared elsewhere"
    return None


def _check_around(kernel: Kernel, outer: For, inner: For, pro: list[Stmt], epi: list[Stmt],
                  assume: dict[str, int]) -> str | None:
    around = Block(tuple(pro + epi))
    spaces = {a.name: a.space for a in kernel.body.walk() if isinstance(a, Alloc)}
    written = {n.buffer for n in around.walk() if isinstance(n, (Store, Atomic))}
    if any(spaces.get(b) is None for b in written):
        return "statements around the inner loop write global memory"
    reads_outside = sum(1 for n in kernel.body.walk() if isinstance(n, (Load, Atomic))
                        and n.buffer in written) - \
        sum(1 for n in outer.walk() if isinstance(n, (Load, Atomic)) and n.buffer in written)
    if reads_outside:
        return "arrays written around the inner loop are read after the nest"
    graph = dependence_graph(kernel, outer.label, assume=assume, kill_covered=True)
    region = graph.graph["region"]
    around_ids = {id(n) for s in pro + epi for n in s.walk()}
    body_ids = {id(n) for n in inner.walk()}
    kind = {k: ("a" if id(s) in around_ids else "b" if id(s) in body_ids else "h")
            for k, s in enumerate(region.nodes)}
    cross = False
    for dep in all_deps(graph):
        src, dst = kind[dep.source], kind[dep.sink]
        if {src, dst} == {"b"} or "h" in (src, dst):
            continue  # B-B checked by can_interchange; the outer header reads only bounds
        if dep.cross_thread:
            cross = True
            continue
        if dst == "a" and dep.kind == "flow" and dep.what[0] != "$":
            return f"{dep.what} flows into the statements around {inner.label}"
        if dep.what[0] == "$" and dep.direction[:1] != ("=",) and dst == "a":
            return f"{dep.what[1:]} is carried into the statements around {inner.label}"
        if src == "a" and dst == "b" and dep.kind == "flow" and dep.direction[:1] == ("<",) \
                and _refreshed(region, dep.sink_pos, around_ids):
            continue  # the sink's element is rewritten by the statements around every time
        if src == "a" and dst == "b" and dep.kind != "flow" or \
                src == "a" and dst == "b" and dep.direction[:1] != ("=",):
            return f"{dep.what}: {dep.kind} dependence from around into {inner.label}"
        if src == "b" and dst == "a" and dep.kind != "anti":
            return f"{dep.what}: {dep.kind} dependence from {inner.label} into around"
    if cross and not (pro and _ends_with_barrier(pro) and any(isinstance(s, Barrier)
                                                              for s in epi)):
        return "threads share data around the inner loop without barriers on both sides"
    return None


def _refreshed(region, sink_pos: int, around_ids: set[int]) -> bool:
    """Whether the read at ``sink_pos`` is covered by a write of the statements around the
    inner loop in the same outer iteration (so values from older iterations never reach it)."""
    from kir.analysis.accesses import covered

    read = next(a for a in region.accesses if a.pos == sink_pos)
    return any(w.write and w.buffer == read.buffer and id(region.nodes[w.node]) in around_ids
               and w.pos < read.pos and covered(region, w, read, threads=True)
               for w in region.accesses)


def _ends_with_barrier(stmts: list[Stmt]) -> bool:
    last_write = max((k for k, s in enumerate(stmts)
                      if any(isinstance(n, (Store, Atomic)) for n in s.walk())), default=-1)
    return any(isinstance(s, Barrier) for s in stmts[last_write + 1:])


RULES = [InterchangeLoops()]
