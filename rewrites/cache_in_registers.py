"""cache-in-registers: a row that each thread rereads in several lane-strided loops is read
from global memory once, into registers, and reread from there."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

from kir import analysis
from kir.analysis import assigned_vars, strip_casts, used_vars
from kir.analysis.affine import Poly
from kir.analysis.bounds import interval
from kir.analysis.loop_edits import Namer, copy_body
from kir.analysis.memory import index_poly
from kir.analysis.parallel import eval_int
from kir.analysis.walk import CanonicalLoop, counted_loop
from kir.ir import (
    Assign,
    Barrier,
    Binary,
    Block,
    Break,
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
    Select,
    Shuffle,
    Stmt,
    Var,
    WarpReduce,
    While,
    transform,
)
from kir.ir.types import BOOL, ScalarType, VectorType
from kir.rewrites.vectorize.vector_loop import base_of
from kir.rewrites.read_only_buffer import ReadOnlyBufferRule
from kir.rules import Match, NoParams, NotApplicable, RuleContext

# Elements a thread may keep (32-bit words): what the fastest row kernels hold (a softmax or
# layer norm over 8192 columns keeps 16-32 floats a thread at 256-512 threads a row).
MAX_ELEMENTS = 64


class CacheInRegisters(ReadOnlyBufferRule):
    """Read a row each thread rereads in several lane-strided loops once, into registers.

    CUDA practice: a row kernel whose row fits in the block's registers reads it from global
    memory once and makes its later passes (the mean, then the variance, then the output of
    a layer norm; a softmax's max, sum and output) over registers (the "register cache" of
    Apex's and OneFlow's softmax and layer norm kernels; NVIDIA blog "Register Cache:
    Caching for Warp-Centric CUDA Programs"). On the H200 at 8192 x 8192 a layer norm so
    written took 0.19 ms a call against 0.25 ms for three passes over global memory, and
    a softmax 0.186 against 0.201 for its row staged in shared memory (BENCHMARKS.md
    "Round 24").

    Shape handled: loops ``for c = start; c < stop; c = c + step`` (step a positive constant
    or a block dimension) that are statements of one block, the first of them reading
    buffer B at ``B[base + c]`` and the others sharing its ``start``, ``step``, ``base`` and
    access width (a scalar or one float4/float2 a lane, as vectorize-strided leaves them).
    Each becomes its first ``T`` iterations written out (``c = start + k * step``, the body
    under ``c < stop``), then the original loop from ``start + T * step`` for what is left;
    ``T`` covers the first loop's ``stop`` under the spec's values (its largest, through
    ``select``s). The first loop loads ``B[base + c]`` once an iteration into register
    variable ``k``; the others read variable ``k`` where ``c`` is below the first loop's
    stop and ``B`` elsewhere. Written out, not as a loop over an array: nvcc left such an
    array in local memory whenever the remainder loops followed, ``#pragma unroll`` or not.
    Every lane reads the same elements in the same order as before, so results are bit for
    bit the same, at any size: only how many iterations are cached follows the spec.

    Legality checked: B is a global buffer the kernel never writes; ``start`` and ``base``
    read nothing assigned from the first loop to the last; the bodies hold no barrier,
    shuffle, break, continue or return; the first loop reads ``B[base + c]`` unconditionally
    in its body (so loading it at the top of an iteration reads nothing the loop would not).
    At most :data:`MAX_ELEMENTS` elements a thread. Not checked: aliasing between B and
    another buffer parameter (CUDA ``__restrict__``).
    """

    name = "cache-in-registers"

    def plan_read_only(self, kernel: Kernel, site: str) -> _Group | NotApplicable:
        return _group(kernel, site)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        group: _Group = match.plan
        values = {**ctx.sizes, **ctx.scalars}
        defs = analysis.single_defs(kernel)
        stop = _largest(group.stop, values, defs)
        if stop is None:
            return NotApplicable(f"the bound of {group.loops[0].label} is not known from the "
                                 "spec")
        span = interval(group.start, kernel, {}, values, defs)
        first = max(0, span[0]) if span is not None else 0
        trips = -(-(stop - first) // group.step)
        if trips < 1:
            return NotApplicable(f"{group.loops[0].label} runs no iteration at the spec's sizes")
        words = trips * group.width * max(1, group.elem.nbytes // 4)
        if words > MAX_ELEMENTS:
            return NotApplicable(f"{trips} iterations of {group.width} element(s) of "
                                 f"{match.site} a thread: {words} registers, over the "
                                 f"{MAX_ELEMENTS} a thread may keep")
        return _rewrite(kernel, match.site, group, trips)


@dataclass(frozen=True)
class _Group:
    """The loops that reread buffer ``site`` at ``base + c`` (the first fills the cache)."""

    block: Block
    loops: tuple[For, ...]
    start: Expr
    stop: Expr  # the first loop's
    step: int
    base: Poly
    width: int  # elements an access reads: 1, or a vector's
    elem: ScalarType


def _strided(kernel: Kernel, loop: For) -> CanonicalLoop | None:
    """``loop`` as ``for c = start; c < stop; c = c + step`` with a constant step (a block
    dimension counts), ``c`` and ``stop`` unwritten in the body, or None."""
    found = counted_loop(kernel, loop)
    return None if found is None or found.inclusive else found


def _reads(loop: For, site: str, base: Poly | None = None) -> list[Load] | None:
    """The loads of ``site`` at ``base + c`` in ``loop``'s body (any base when None: the
    first load's), all of one type; None when there are none or their types differ."""
    found: list[Load] = []
    for n in loop.body.walk():
        if isinstance(n, Load) and n.buffer == site:
            b = base_of(index_poly(n.index), loop.var)
            if b is None or (base is not None and b != base):
                continue
            if found and (n.type != found[0].type or b != base_of(index_poly(found[0].index),
                                                                  loop.var)):
                return None
            found.append(n)
    return found or None


def _unsupported(body: Block) -> str | None:
    for n in body.walk():
        if isinstance(n, (Barrier, Shuffle, WarpReduce)):
            return "a barrier or a warp exchange"
        if isinstance(n, (Break, Continue, Return)):
            return "a break, continue or return"
    return None


def _blocks(node: Node) -> list[Block]:
    return [n for n in node.walk() if isinstance(n, Block)]


def _group(kernel: Kernel, site: str) -> _Group | NotApplicable:
    for block in _blocks(kernel.body):
        loops = [s for i, s in enumerate(block.stmts) if isinstance(s, For)
                 and not _continues(block.stmts[:i], s)]
        for i, loop in enumerate(loops):
            reads = _reads(loop, site)
            if reads is None:
                continue
            return _group_from(kernel, site, block, loops[i], loops[i + 1:], reads)
    return NotApplicable(f"no loop reads {site}[base + c] over its counter")


def _continues(before: Sequence[Stmt], loop: For) -> bool:
    """Whether ``loop`` does what is left of the statements before it: it starts from the
    bound of the loop just before (vectorize-strided's scalar tail), or past the iterations
    this rule wrote out (its own remainder loop, after the ``let c_k = start + k * step``
    and the ``if``s of those iterations). Remainders run few or no iterations at the spec's
    sizes; caching them would only take registers."""
    previous = before[-1] if before else None
    if isinstance(previous, For) and isinstance(previous.cond, Binary) \
            and isinstance(previous.cond.right, Var) \
            and previous.cond.right.name in used_vars(loop.init):
        return True
    init = loop.init
    if not (isinstance(init, Binary) and init.op == "+" and isinstance(init.right, Const)):
        return False
    for stmt in reversed(before):
        if isinstance(stmt, If):
            continue
        if not isinstance(stmt, Declare):
            return False
        last = stmt.init
        if isinstance(last, Binary) and last.op == "+" and isinstance(last.right, Const) \
                and last.left == init.left and init.right.value > last.right.value:
            return True
    return False


def _group_from(kernel: Kernel, site: str, block: Block, first: For, later: list[For],
                reads: list[Load]) -> _Group | NotApplicable:
    shape = _strided(kernel, first)
    if shape is None:
        return NotApplicable(f"{first.label} is not `for c = start; c < stop; c += step`")
    why = _unsupported(first.body)
    if why:
        return NotApplicable(f"{first.label} holds {why}")
    # The first loop's body reads the element at the top level (not under an if or in an
    # inner loop), so loading it at the top of each iteration loads nothing new.
    direct = [s for s in first.body.stmts if not isinstance(s, (If, For, While))]
    if not any(n in reads for s in direct for n in s.walk()):
        return NotApplicable(f"{first.label} reads {site} only under a condition")
    base = base_of(index_poly(reads[0].index), first.var)
    group = [first]
    for loop in later:
        other = _strided(kernel, loop)
        if other is None or other.step != shape.step or other.start != shape.start \
                or _unsupported(loop.body):
            continue
        found = _reads(loop, site, base)
        if found is not None and found[0].type == reads[0].type:
            group.append(loop)
    if len(group) < 2:
        return NotApplicable(f"only {first.label} reads {site}[base + c]: nothing is reread")
    stmts = list(block.stmts)
    between = Block(tuple(stmts[stmts.index(first):stmts.index(group[-1]) + 1]))
    moving = assigned_vars(between) & (used_vars(shape.start) | _atoms(base))
    if moving:
        return NotApplicable(f"{', '.join(sorted(moving))} change(s) between the loops that "
                             f"read {site}")
    t = reads[0].type
    width = t.count if isinstance(t, VectorType) else 1
    elem = t.elem if isinstance(t, VectorType) else t
    return _Group(block, tuple(group), shape.start, shape.stop, shape.step, base, width, elem)


def _atoms(poly: Poly) -> set[str]:
    return {atom for mono in poly for atom in mono if not atom.startswith("%")}


def _largest(stop: Expr, values: Mapping[str, int | float], defs: Mapping[str, Expr],
             depth: int = 0) -> int | None:
    """The largest value ``stop`` can take under the spec's ``values``: itself when known, the
    larger arm of a ``select`` (vectorize-strided's ``select(aligned, n / 4 * 4, 0)``)."""
    known = eval_int(stop, values, defs)
    if known is not None or depth > 20:
        return known
    e = strip_casts(stop)
    if isinstance(e, Var) and e.name in defs:
        return _largest(defs[e.name], values, defs, depth + 1)
    if isinstance(e, Select):
        arms = [_largest(a, values, defs, depth + 1) for a in (e.if_true, e.if_false)]
        return None if None in arms else max(arms)  # type: ignore[type-var]
    return None


def _rewrite(kernel: Kernel, site: str, group: _Group, trips: int) -> Kernel:
    namer = Namer(kernel)
    vtype = VectorType(group.elem, group.width) if group.width > 1 else group.elem
    slots = [namer.name(f"{site}_reg{k}") for k in range(trips)]
    end = namer.name(f"{site}_reg_end")
    first = group.loops[0]
    # One variable a cached iteration (not an array: the compilers keep each in registers
    # whether or not they unroll a loop), and the first loop's bound, read once.
    setup: list[Stmt] = [Declare(name, vtype, None, first.loc) for name in slots]
    setup.append(Declare(end, group.stop.type, group.stop, first.loc))
    replaced = {id(loop): _cached(loop, site, group, vtype, slots, end, namer,
                                  fills=(loop is first))
                for loop in group.loops}
    stmts: list[Stmt] = []
    for s in group.block.stmts:
        if s is first:
            stmts += setup
        stmts += replaced.get(id(s), [s])
    new_block = dataclasses.replace(group.block, stmts=tuple(stmts))

    def visit(node: Node) -> Node | None:
        return new_block if node is group.block else None
    return dataclasses.replace(kernel, body=transform(kernel.body, visit))


def _cached(loop: For, site: str, group: _Group, vtype, slots: list[str], end: str,
            namer: Namer, fills: bool) -> list[Stmt]:
    """``loop``'s first ``len(slots)`` iterations written out one after another (``c =
    start + k * step``, the body under ``c < stop``), each reading register ``slots[k]``
    (the first loop loading it), then the original loop for the iterations left."""
    itype = loop.type
    counters: list[Stmt] = []
    loads: list[Stmt] = []
    bodies: list[Stmt] = []
    for k, slot in enumerate(slots):
        c = namer.name(f"{loop.var}_{k}")
        value = slot if fills else namer.name(f"{site}_{loop.var}_{k}")
        index: list[Expr] = []

        def swap(node: Node) -> Node | None:
            if isinstance(node, Load) and node.buffer == site \
                    and base_of(index_poly(node.index), loop.var) == group.base:
                index.append(node.index)
                return Var(value, vtype)
            return None
        body = copy_body(transform(loop.body, swap), namer, {loop.var: Var(c, itype)})
        from_global = Load(site, analysis.substitute(index[0], loop.var, Var(c, itype)), vtype)
        bound = analysis.substitute(loop.cond, loop.var, Var(c, itype))
        counters.append(Declare(c, itype, _after(group, k, itype), loop.loc))
        if fills:
            # Every load first, then the bodies: the loads do not wait on one another's
            # arithmetic (issued back to back, as a hand-written register cache does). B is
            # never written and ``stop`` not by the body, so each load and guard reads what
            # it would have.
            loads.append(If(bound, Block((Assign(slot, from_global, loop.loc),)), None,
                            loop.loc))
            head: list[Stmt] = []
        else:
            cached = Binary("<", Var(c, itype), Var(end, itype), BOOL)
            head = [Declare(value, vtype, None, loop.loc),
                    If(cached, Block((Assign(value, Var(slot, vtype), loop.loc),)),
                       Block((Assign(value, from_global, loop.loc),)), loop.loc)]
        bodies.append(If(bound, Block((*head, *body.stmts)), None, loop.loc))
    out: list[Stmt] = [*counters, *loads, *bodies]
    rest = namer.name(f"{loop.var}_rest")
    out.append(dataclasses.replace(
        loop, label=namer.label(), var=rest, init=_after(group, len(slots), itype),
        cond=analysis.substitute(loop.cond, loop.var, Var(rest, itype)),
        update=analysis.substitute(loop.update, loop.var, Var(rest, itype)),
        body=copy_body(loop.body, namer, {loop.var: Var(rest, itype)})))
    return out


def _after(group: _Group, k: int, itype: ScalarType) -> Expr:
    """``start + k * step``: the counter at iteration ``k`` (kept in this form, which
    :func:`_continues` recognises in the remainder loop)."""
    return Binary("+", group.start, Const(k * group.step, itype), itype)


RULES = [CacheInRegisters()]
