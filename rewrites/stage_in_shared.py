"""stage-in-shared: load a read-only global region that a block's threads share into shared
memory once, cooperatively, and read it from there."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kir import analysis
from kir.analysis import single_defs
from kir.analysis.bounds import interval, loop_env
from kir.analysis.memory import shared_bytes
from kir.analysis.parallel import eval_int
from kir.ir import (
    Alloc,
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
    Node,
    Return,
    Special,
    Stmt,
    Store,
    Var,
    transform,
)
from kir.ir.types import BOOL, F32, I32, PointerType, ScalarType, VectorType
from kir.rewrites.read_only_buffer import ReadOnlyBufferRule
from kir.rules import Match, NoParams, NotApplicable, RuleContext


class StageInShared(ReadOnlyBufferRule):
    """Stage a read-only global vector that several threads of a block reread into shared memory.

    CUDA practice: CUDA C++ Programming Guide, "Shared Memory" (the tiled matrix multiply):
    data that several threads of a block read from global memory is loaded once by the block,
    each thread fetching a strided part (coalesced), a ``__syncthreads()``, and then read from
    on-chip shared memory. LayerNorm's gamma/beta, read whole by each of the block's rows
    (warps), is the textbook case; so is a per-block weight row.

    Shape handled: every read of buffer B is ``B[base + v]`` where ``base`` is the same
    block-uniform expression everywhere and ``v`` the variable of a canonical loop
    ``for v = init; v < stop; v += step`` with the same block-uniform ``stop`` everywhere and
    ``init`` ranging exactly over ``[0, step)`` across the block's threads, so together the
    threads read B[base + 0 .. base + stop) and nothing else. The region (``stop`` under the
    spec's values) must fit in the static shared memory of a block on the target (Metal 32 KiB,
    CUDA 48 KiB; 32 KiB when the target is not known) with the arrays already there.
    The staging loop ``for s = thread.x; s < SIZE; s += block threads`` copies
    ``B[base + s]`` when ``s < stop`` (zero fill otherwise; in float4s when the region is
    whole and aligned, see :func:`_with_vector_copy`), then a block barrier; both go at
    the top level of the kernel, after the definitions of ``base`` and ``stop`` and before
    any ``return`` (a uniform point) or read of B. Legality checked also: B is a global
    buffer the kernel never writes; the block is one-dimensional. Not checked: that some
    thread of every block reaches the reads (an early return could skip them all; the copy
    then reads elements no thread of that block would have), and aliasing between B and
    another buffer parameter (CUDA ``__restrict__``).
    """

    name = "stage-in-shared"

    def plan_read_only(self, kernel: Kernel, site: str) -> _Plan | NotApplicable:
        reads = _reads(kernel, site)
        if isinstance(reads, NotApplicable):
            return reads
        return _region(kernel, site, reads)

    def apply(self, kernel: Kernel, match: Match, params: NoParams,
              ctx: RuleContext) -> Kernel | NotApplicable:
        site, plan = match.site, match.plan
        if plan.refusal is not None:
            return plan.refusal
        # The region's extent is known at the spec's values (the context).
        values = dict(ctx.sizes)
        values.update(ctx.scalars)
        reason = _check_starts(kernel, plan.reads, values, plan.defs)
        if reason:
            return NotApplicable(reason)
        size = eval_int(plan.stop, values, plan.defs)
        if size is None or size <= 0:
            return NotApplicable(f"the length of {site}'s region is not known from the spec")
        used = shared_bytes(kernel) + size * plan.elem.nbytes
        budget = ctx.static_shared_budget
        if used > budget:
            return NotApplicable(f"staging {size} elements of {site} needs {used} B of shared "
                                 f"memory, over the {budget} B a block may declare")
        if plan.at is None:
            return NotApplicable(f"no uniform point before the reads of {site} where its "
                                 "region is known")
        return _rewrite(kernel, site, plan.elem, plan.base, plan.stop, size, plan.at,
                        plan.reads)


@dataclass(frozen=True)
class _Plan:
    """The reads of the buffer (each with its base and canonical loop), the region's base
    and bound, the kernel's single-definition locals, where the staging goes (None: nowhere)
    and why the region cannot be staged whatever the spec's values (None: it can). That
    refusal is kept in the plan rather than returned by the analysis so that the rule lists
    the same sites as before protocol v2 (issue 11 tightens that separately)."""

    reads: list
    elem: ScalarType | None = None
    base: Expr | None = None
    stop: Expr | None = None
    defs: Mapping[str, Expr] | None = None
    at: int | None = None
    refusal: NotApplicable | None = None


def _region(kernel: Kernel, site: str, reads: list) -> _Plan:
    """What staging the region ``reads`` covers needs, and what forbids it."""
    param = kernel.param(site)
    assert param is not None and isinstance(param.type, PointerType)
    elem = param.type.elem
    if not isinstance(elem, ScalarType):
        return _Plan(reads, refusal=NotApplicable(f"{site} is not a global buffer of scalars"))
    if kernel.launch.block[1] != 1 or kernel.launch.block[2] != 1:
        return _Plan(reads, refusal=NotApplicable("the block is not one-dimensional"))
    base, stop = reads[0][1], reads[0][2].stop
    if any(b != base or c.stop != stop for _, b, c in reads):
        return _Plan(reads, refusal=NotApplicable(f"the reads of {site} do not share one base "
                                                  "and bound"))
    tainted = analysis.thread_dependent_vars(kernel)
    if any(analysis.is_thread_dependent(e, tainted) for e in (base, stop)):
        return _Plan(reads, refusal=NotApplicable(f"the region of {site} differs between "
                                                  "threads of a block"))
    return _Plan(reads, elem, base, stop, single_defs(kernel),
                 _insertion_point(kernel, site, base, stop))


def _reads(kernel: Kernel, buffer: str):
    """Every load of ``buffer`` as (load, base, canonical loop of v), or NotApplicable."""
    loops_of: dict[str, analysis.CanonicalLoop] = {}
    for f in analysis.loops(kernel):
        # Block-stride loops (``i += blockDim.x``) count too: the staging copy then steps by
        # the launch's width, a constant that ties the kernel to this block size (and that
        # resize-block refuses).
        c = analysis.counted_loop(kernel, f)
        if c is not None and not c.inclusive:
            loops_of[f.var] = c
    out = []
    for n in kernel.body.walk():
        if not (isinstance(n, Load) and n.buffer == buffer):
            continue
        terms = analysis.sum_terms(n.index)
        loop_terms = [k for k, t in enumerate(terms) if _loop_var(t) in loops_of]
        if len(loop_terms) != 1:
            return NotApplicable(f"a read of {buffer} is not base + a loop variable")
        k = loop_terms[0]
        rest = terms[:k] + terms[k + 1:]
        base: Expr = Const(0, n.index.type)  # type: ignore[arg-type]
        for t in rest:
            base = t if base == Const(0, n.index.type) else Binary("+", base, t, t.type)
        if any(isinstance(m, Var) and m.name in loops_of for m in base.walk()):
            return NotApplicable(f"a read of {buffer} moves with two loops")
        out.append((n, base, loops_of[_loop_var(terms[k])]))
    if not out:
        return NotApplicable(f"{buffer} is never read")
    return out


def _loop_var(term: Expr) -> str | None:
    """``v`` or an integer cast of it (the loop keeps ``v`` in [0, stop), so casts keep it)."""
    while isinstance(term, Cast) and isinstance(term.type, ScalarType) and term.type.is_int:
        term = term.value
    return term.name if isinstance(term, Var) else None


def _check_starts(kernel: Kernel, reads, values, defs) -> str | None:
    """Across the block's threads, each reading loop starts at every value in [0, step)."""
    envs = {id(s): env for s, env in loop_env(kernel, values)}
    for _, _, c in reads:
        env = envs.get(id(c.loop), {})
        span = interval(c.start, kernel, env, values, defs)
        if span != (0, c.step - 1):
            return f"loop {c.loop.label} does not start at every value 0..{c.step - 1}"
    return None


def _insertion_point(kernel: Kernel, buffer: str, base: Expr, stop: Expr) -> int | None:
    stmts = kernel.body.stmts
    needed = analysis.used_vars(base) | analysis.used_vars(stop)
    needed -= {p.name for p in kernel.params}
    at = 0
    for k, s in enumerate(stmts):
        if isinstance(s, Declare) and s.name in needed:
            needed.discard(s.name)
            at = k + 1
    if needed:
        return None  # defined below the top level
    for s in stmts[:at]:
        if any(isinstance(n, Return) or isinstance(n, Load) and n.buffer == buffer
               for n in s.walk()):
            return None
    written = analysis.assigned_vars(kernel.body) - analysis.declared_names(kernel.body)
    if (analysis.used_vars(base) | analysis.used_vars(stop)) & written:
        return None
    return at


def _rewrite(kernel: Kernel, buffer: str, elem: ScalarType, base: Expr, stop: Expr, size: int,
             at: int, reads) -> Kernel:
    namer_taken: set[str] = set()
    array = analysis.fresh_name(kernel, f"{buffer}_s", namer_taken)
    var = analysis.fresh_name(kernel, "s", {array})
    label = analysis.next_loop_label(kernel)
    first = kernel.body.stmts[at] if at < len(kernel.body.stmts) else None
    loc = getattr(first, "loc", None)
    s = Var(var, I32)
    threads = kernel.launch.threads_per_block
    zero = Const(0.0 if elem.is_float else 0, elem)
    if isinstance(base, Const) and base.value == 0:
        source: Expr = s
    else:
        source = Binary("+", base, s if base.type == I32 else Cast(s, base.type), base.type)
    fill = If(Binary("<", s, stop, BOOL),
              Block((Store(array, s, Load(buffer, source, elem), loc=loc),)),
              Block((Store(array, s, zero, loc=loc),)), loc=loc)
    copy: Stmt = For(label, var, I32, Cast(Special("thread", "x"), I32),
                     Binary("<", s, Const(size, I32), BOOL),
                     Binary("+", s, Const(threads, I32), I32), Block((fill,)), loc=loc)
    if elem == F32 and size % (4 * threads) == 0:
        copy = _with_vector_copy(kernel, copy, buffer, array, base, stop, size, threads)
    staged = [Alloc(array, elem, size, "shared", loc=loc), copy, Barrier("block", loc=loc)]

    def visit(n: Node) -> Node | None:
        if isinstance(n, Load) and n.buffer == buffer:
            loop = _loop_of(n, reads)
            return Load(array, Var(loop.var, loop.type), n.type)
        return None
    body = transform(kernel.body, visit)
    assert isinstance(body, Block)
    body = dataclasses.replace(body, stmts=body.stmts[:at] + tuple(staged) + body.stmts[at:])
    # SIZE is the region's length at the spec's values: a longer region at other sizes would
    # read past the array, so unless the length is a constant of the kernel itself the
    # result is right only up to these sizes (validated at them; an MLX module runs it at
    # exactly them and falls back to the general kernel elsewhere).
    baked = eval_int(stop, {}, {}) is None
    launch = dataclasses.replace(kernel.launch,
                                 specialized=kernel.launch.specialized or baked)
    return dataclasses.replace(kernel, body=body, launch=launch)


def _with_vector_copy(kernel: Kernel, scalar_copy: For, buffer: str, array: str, base: Expr,
                      stop: Expr, size: int, threads: int) -> If:
    """The staging copy in 16-byte loads and stores (float4) when the region is whole and aligned:
    ``if (stop == SIZE && base % 4 == 0)`` each thread copies every (threads * 4)-th group of
    4 elements; else the scalar copy (which zero-fills past ``stop``). SIZE is a multiple of
    4 * threads, so the vector loop covers the region exactly. Like kir's other vector
    rules this assumes the buffer itself starts on a 16-byte boundary (MLX arrays do)."""
    loc = scalar_copy.loc
    taken = {array, scalar_copy.var}
    var = analysis.fresh_name(kernel, "sv", taken)
    vec = analysis.fresh_name(kernel, "sv_x4", taken | {var})
    label = analysis.next_loop_label(kernel, {scalar_copy.label})
    sv = Var(var, I32)
    at: Expr = sv if isinstance(base, Const) and base.value == 0 else \
        Binary("+", base, sv if base.type == I32 else Cast(sv, base.type), base.type)
    x4 = VectorType(F32, 4)
    # One 16-byte store a thread: four 4-byte stores of consecutive elements would hit each
    # shared-memory bank four times a warp (thread t writes words 4t + c).
    body = [Declare(vec, x4, Load(buffer, at, x4), loc=loc), Store(array, sv, Var(vec, x4),
                                                                    loc=loc)]
    loop = For(label, var, I32, Binary("*", Cast(Special("thread", "x"), I32), Const(4, I32), I32),
               Binary("<", sv, Const(size, I32), BOOL),
               Binary("+", sv, Const(threads * 4, I32), I32), Block(tuple(body)), loc=loc)
    whole: Expr = Binary("==", stop, Const(size, stop.type), BOOL)
    if not (isinstance(base, Const) and base.value == 0):
        whole = Binary("&&", whole, Binary("==", Binary("%", base, Const(4, base.type),
                                                          base.type),
                                           Const(0, base.type), BOOL), BOOL)
    return If(whole, Block((loop,)), Block((scalar_copy,)), loc=loc)


def _loop_of(load: Load, reads) -> For:
    """The loop whose variable indexes a (rebuilt) load: loads are compared structurally."""
    for original, _, c in reads:
        if original == load:
            return c.loop
    raise AssertionError("unmatched read")  # every load of the buffer was analysed


RULES = [StageInShared()]
