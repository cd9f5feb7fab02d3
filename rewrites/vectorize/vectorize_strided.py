"""vectorize-strided: a lane-strided f32 loop reads float4/float2 vectors, one per lane."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kir.rewrites.vectorize.lanes import index_base, lane_combine, lane_uniform
from kir.rewrites.vectorize.vector_loop import (
    VectorLoopRule,
    is_multiple,
    runtime_alignment,
    spec_ints,
    vector_end,
)

from kir import analysis
from kir.analysis import strip_casts
from kir.analysis.affine import Poly
from kir.analysis.loop_edits import Namer, copy_body
from kir.analysis.memory import inline_locals
from kir.analysis.parallel import is_thread_x, lane_varying_context, lane_varying_vars, position_of
from kir.ir import (
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Component,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Load,
    MakeVector,
    Node,
    Shuffle,
    Special,
    Stmt,
    Store,
    Var,
    WarpReduce,
    transform,
)
from kir.ir.printer import print_expr
from kir.ir.nodes import WARP
from kir.ir.types import BOOL, F32, I32, PointerType, VectorType
from kir.rules import NotApplicable



class VectorizeStrided(VectorLoopRule):
    """Give each lane of a lane-strided f32 loop one float4 (float2) load per iteration.

    CUDA practice: 128-bit vector loads (NVIDIA blog "CUDA Pro Tip: Increase Performance
    with Vectorized Memory Access"): in warp-per-row kernels (layer norm, softmax, row
    reductions) ``for (c = lane; c < n; c += 32)`` becomes ``for (c = lane * 4; c < n / 4 *
    4; c += 128) { float4 v = *(float4*)&xr[c]; body(c + 0..3) }`` plus a scalar tail for
    the last ``n % 4`` indices. Metal has ``float4`` loads from ``device float4*`` likewise.

    Shape required of loop ``L``: ``for c = s; c < n; c = c + S`` with S a constant (or
    ``blockDim``/``warpSize``) that is a multiple of 32, s the lane (``threadIdx.x % 32``) or
    ``threadIdx.x`` (block width a multiple of 32 and at most S), n and the loop reached by
    every lane of the warp alike. The body holds only f32 lets, stores ``buf[base + c] = f``
    and reductions ``acc = acc + f`` / ``acc = max(acc, f)`` / min, where f reads f32
    buffers only at ``[base' + c]``. Every base is the same on all lanes of a warp and a
    multiple of the width, proved on the affine form with the spec's scalars substituted
    (so the result is specialized to them, as for vectorize-access). No barrier, shuffle,
    atomic or control flow in the body.

    Legality: the rewrite moves elements between the lanes of a warp (it keeps each warp's
    set of elements, chunks of 32 at ``W + S*k``), so (1) a buffer the loop writes is not
    touched anywhere else in the kernel, and a buffer it reads is not written elsewhere;
    (2) a buffer both read and written is accessed at one base, all reads before the first
    store (the vector loads come first, the vector stores last); (3) each reduction's
    per-lane partial is read after the loop only by a butterfly over the 32 lanes with the
    same operator (``__shfl_xor_sync`` leaves the warp total on every lane; a
    ``__shfl_down_sync`` sweep leaves it on lane 0, which must then be read only through
    ``__shfl_sync(v, 0)``), possibly through a copy.

    Coverage: lane ``l`` of the warp at ``W`` (``s = W + l``) reads the vector at ``W + S *
    (w*K + l / (32/w)) + w * (l % (32/w))``, K = 0, 1, ... while it is below ``n / w * w``
    (with S = 32: ``w*l + w*S*K``), so each warp's vectors cover exactly its own elements
    below ``n / w * w``; the tail is the original loop started at the first index ``>= n / w
    * w`` congruent to s modulo S (at most one iteration), so every index is visited once,
    by a lane of the same warp, for any n (also n < 32, n = 0). Sums are added in a
    different order (each lane adds its elements c..c+3 in order), so they equal the
    original within float tolerance, not bit for bit; max/min are exact. Not checked:
    aliasing between distinct buffer parameters.
    """

    name = "vectorize-strided"

    def plan_vector_loop(self, kernel: Kernel, loop: For) -> _Plan | NotApplicable:
        return _plan(kernel, loop)

    def misaligned(self, plan: _Plan, width: int,
                   scalars: Mapping[str, int | float]) -> NotApplicable | None:
        values = spec_ints(scalars, plan.assigned)  # an assigned scalar loses its spec value
        for buffer, index, base in plan.accesses:
            if not is_multiple(base, width, values):
                return NotApplicable(f"{buffer}[{print_expr(index)}]: the base is not a "
                                     f"multiple of {width}")
        return None

    def vectorize(self, kernel: Kernel, plan: _Plan, width: int) -> Kernel:
        return _rewrite(kernel, plan, width)


@dataclass(frozen=True)
class _Plan:
    loop: For
    start: Expr
    stop: Expr
    step: int
    lane_start: bool  # s is the lane itself (W = 0); else s is thread.x
    accesses: list[tuple[str, Expr, Poly]]  # every access's (buffer, index, base), in order
    assigned: frozenset[str]  # the names the kernel assigns


def _start_form(kernel: Kernel, start: Expr, step: int) -> bool | NotApplicable:
    """True when the start is the lane, False when it is thread.x: either way the lanes of
    a warp start at W + 0..31 with W a multiple of 32 in [0, S - 32]."""
    e = strip_casts(inline_locals(start, analysis.single_defs(kernel)))
    block = kernel.launch.block
    if block[0] % WARP:
        return NotApplicable("the block width is not a multiple of 32 (warps straddle rows)")
    if isinstance(e, Special) and e.kind == "lane":
        return True
    if isinstance(e, Binary) and e.op == "%" and is_thread_x(e.left) \
            and isinstance(e.right, Const) and e.right.value == WARP:
        return True
    if is_thread_x(e) and block[0] <= step:
        return False
    return NotApplicable(f"start {print_expr(start)} is not the lane (or thread.x with "
                         f"the step at least the block width)")


def _header(kernel: Kernel, loop: For) -> tuple[Expr, Expr, int] | NotApplicable:
    cond, update, c = loop.cond, loop.update, loop.var
    if loop.type != I32:
        return NotApplicable("the loop counter is not i32")
    if not (isinstance(cond, Binary) and cond.op == "<" and cond.left == Var(c, I32)
            and cond.right.type == I32):
        return NotApplicable(f"{loop.label}'s condition is not `{c} < n`")
    if not (isinstance(update, Binary) and update.op == "+" and update.left == Var(c, I32)):
        return NotApplicable(f"{loop.label}'s update is not `{c} = {c} + step`")
    step = analysis.launch_step(kernel, update.right)
    if step is None:
        return NotApplicable(f"the step {print_expr(update.right)} is not a constant")
    if step <= 0 or step % WARP:
        return NotApplicable(f"the step {step} is not a positive multiple of 32")
    written = analysis.assigned_vars(loop.body)
    if c in written or analysis.used_vars(cond.right) & written:
        return NotApplicable(f"{loop.label} writes its counter or bound")
    return loop.init, cond.right, step


def _body(kernel: Kernel, loop: For, tainted: set[str],
          planned: list[tuple[str, Expr, Poly]]) -> dict[str, str] | NotApplicable:
    """Check the body; the reductions' accumulators and operators. Every access's base goes
    to ``planned``."""
    for n in loop.body.walk():
        if isinstance(n, Barrier):
            return NotApplicable(f"{loop.label} holds a barrier")
        if isinstance(n, (Shuffle, WarpReduce)):
            return NotApplicable(f"{loop.label} holds a warp shuffle")
        if isinstance(n, Atomic):
            return NotApplicable(f"{loop.label} holds an atomic")
    inside = analysis.declared_names(loop.body)
    at = position_of(kernel, loop)
    assert at is not None
    reductions: dict[str, str] = {}
    first_store: dict[str, int] = {}
    bases: dict[str, list] = {}
    for k, stmt in enumerate(loop.body.stmts):
        if isinstance(stmt, Declare):
            if stmt.type != F32 or stmt.init is None:
                return NotApplicable(f"let {stmt.name} is not an initialized f32")
            exprs = [stmt.init]
        elif isinstance(stmt, Assign):
            if stmt.name in inside:
                exprs = [stmt.value]
            else:
                red = _reduction(stmt)
                if red is None or stmt.name in reductions:
                    return NotApplicable(f"{stmt.name} is not reduced as `{stmt.name} = "
                                         f"{stmt.name} + f` (or max/min) once")
                reductions[stmt.name] = red[0]
                exprs = [red[1]]
        elif isinstance(stmt, Store):
            if stmt.value.type != F32:
                return NotApplicable("not an f32 store")
            exprs = [stmt.value]
            first_store.setdefault(stmt.buffer, k)
        else:
            return NotApplicable(f"{loop.label} holds {type(stmt).__name__} (only lets, "
                                 "stores and reductions)")
        loads = [n for e in exprs for n in e.walk() if isinstance(n, Load)]
        # An element moves to another lane: what it computes may depend on c and on values
        # all lanes share, never on the lane itself.
        own = inside | set(reductions) | {loop.var}
        for e in exprs:
            probe = transform(e, lambda n: Const(0, I32) if isinstance(n, Var)
                              and n.name in own else None)
            if not lane_uniform(kernel, probe, at, tainted):  # type: ignore[arg-type]
                return NotApplicable(f"{print_expr(e)} may differ between lanes")
        accesses = [(n.buffer, n.index, n.type) for n in loads]
        if isinstance(stmt, Store):
            accesses.append((stmt.buffer, stmt.index, stmt.value.type))
        for buffer, index, t in accesses:
            param = kernel.param(buffer)
            if t != F32 or param is None or not isinstance(param.type, PointerType) \
                    or param.type.elem != F32:
                return NotApplicable(f"{buffer} is not a global f32 buffer")
            if buffer in first_store and first_store[buffer] < k and \
                    any(n.buffer == buffer for n in loads):
                return NotApplicable(f"{buffer} is read after it is stored in the loop")
            if analysis.used_vars(index) & inside:
                return NotApplicable("an index uses a local declared in the loop")
            if not lane_uniform(kernel, analysis.substitute(index, loop.var, Const(0, I32)),
                                at, tainted):  # type: ignore[arg-type]
                return NotApplicable(f"base of {buffer}[{print_expr(index)}] may differ "
                                     "between lanes")
            base = index_base(kernel, index, loop.var)
            if isinstance(base, str):
                return NotApplicable(f"{buffer}[{print_expr(index)}]: {base}")
            planned.append((buffer, index, base))
            bases.setdefault(buffer, []).append(base)
    for name in reductions:
        # The accumulator may appear only in its own reduction statement.
        uses = sum(1 for n in loop.body.walk() if isinstance(n, Var) and n.name == name)
        if uses != 1:
            return NotApplicable(f"{name} is read in the loop besides its reduction")
    for buffer in first_store:
        if any(b != bases[buffer][0] for b in bases[buffer]):
            return NotApplicable(f"{buffer} is accessed at different offsets in the loop")
    return reductions


def _reduction(stmt: Assign) -> tuple[str, Expr] | None:
    """``acc = acc + f`` / ``f + acc`` / ``max(acc, f)`` / min: (operator, f)."""
    if stmt.value.type != F32:
        return None
    found = analysis.accumulation(stmt.value, Var(stmt.name, F32))
    if found is None or stmt.name in analysis.used_vars(found[1]):
        return None
    return found


def _isolated(kernel: Kernel, loop: For) -> NotApplicable | None:
    """Elements change lanes, so nothing else in the kernel may touch what the loop writes
    or write what it reads (it would race with, or miss, the new owner lane)."""
    outside_reads: set[str] = set()
    outside_writes: set[str] = set()
    stack: list[Node] = [kernel.body]
    while stack:
        n = stack.pop()
        if n is loop:
            continue
        if isinstance(n, Load):
            outside_reads.add(n.buffer)
        elif isinstance(n, (Store, Atomic)):
            outside_writes.add(n.buffer)
        stack.extend(n.children())
    written = analysis.buffers_written(loop)
    read = analysis.buffers_read(loop)
    for buffer in sorted(written & (outside_reads | outside_writes)):
        return NotApplicable(f"{buffer} is also accessed outside {loop.label}")
    for buffer in sorted(read & outside_writes):
        return NotApplicable(f"{buffer} is also written outside {loop.label}")
    return None


def _combined(kernel: Kernel, loop: For, reductions: dict[str, str]) -> NotApplicable | None:
    """Each partial is only read after the loop through a lane combine of its operator."""
    if not reductions:
        return None
    pos = position_of(kernel, loop)
    assert pos is not None
    # Declared (and initialized) in the loop's block: no partial survives into a later pass
    # of an enclosing loop.
    before = {s.name for s in pos.block.stmts[:pos.index]
              if isinstance(s, Declare) and s.init is not None}
    for name in reductions:
        if name not in before:
            return NotApplicable(f"{name} is not declared with a value in the block of "
                                 f"{loop.label}")
    state = {name: "partial" for name in reductions}  # or "lane0" after a down-sweep
    ops = dict(reductions)
    for stmt in pos.block.stmts[pos.index + 1:]:
        touched = (analysis.used_vars(stmt) | analysis.assigned_vars(stmt)) & set(state)
        if not touched:
            continue
        if isinstance(stmt, Declare) and isinstance(stmt.init, Var) \
                and state.get(stmt.init.name) == "partial":
            state[stmt.name], ops[stmt.name] = "partial", ops[stmt.init.name]  # a copy
            continue
        comb = lane_combine(stmt) or _reduced(stmt)
        if comb is not None and state.get(comb[0]) == "partial" and ops[comb[0]] == comb[2]:
            if lane_varying_context(kernel, stmt):
                return NotApplicable(f"the combine of {comb[0]} is not run by the whole warp")
            if comb[1] == "reduce" and not (isinstance(stmt, Assign) and stmt.name == comb[0]):
                continue  # the total went to another name; the partial stays unread
            if comb[1] in ("xor", "reduce"):
                del state[comb[0]]  # every lane holds the warp's total
            else:
                state[comb[0]] = "lane0"
            continue
        bad = _partial_reads(stmt, state)
        if bad:
            return NotApplicable(f"{bad} is read after {loop.label} before it is combined "
                                 "across the warp")
        if isinstance(stmt, Assign) and stmt.name in state:
            del state[stmt.name]  # overwritten by a combined value
        elif analysis.assigned_vars(stmt) & set(state):
            return NotApplicable("a partial reduction is written conditionally")
    return None


def _reduced(stmt: Stmt) -> tuple[str, str, str] | None:
    """``(v, "reduce", op)`` when ``stmt`` is ``v = reduce.op(v)`` or ``let t = reduce.op(v)``:
    a warp reduction (or the first level of a block reduction, ``widen-warps``) leaves the
    total of every lane's partial on every lane, as an xor butterfly does."""
    value = stmt.value if isinstance(stmt, Assign) else \
        stmt.init if isinstance(stmt, Declare) else None
    if not (isinstance(value, WarpReduce) and isinstance(value.value, Var)):
        return None
    return value.value.name, "reduce", "+" if value.op == "sum" else value.op


def _partial_reads(stmt: Stmt, state: dict[str, str]) -> str | None:
    """A partial name read other than as ``shuffle.idx(v, 0)`` of a down-swept v."""
    stack: list[Node] = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, Shuffle) and n.mode == "idx" and n.width == WARP \
                and isinstance(n.value, Var) and state.get(n.value.name) == "lane0" \
                and isinstance(strip_casts(n.lane), Const) and strip_casts(n.lane).value == 0:
            continue  # lane 0 holds the warp's total: a broadcast of it is combined
        if isinstance(n, Var) and n.name in state:
            return n.name
        stack.extend(n.children())
    return None


def _plan(kernel: Kernel, loop: For) -> _Plan | NotApplicable:
    """The shape and legality of ``loop`` at any width (alignment is the apply's question)."""
    header = _header(kernel, loop)
    if isinstance(header, NotApplicable):
        return header
    start, stop, step = header
    form = _start_form(kernel, start, step)
    if isinstance(form, NotApplicable):
        return form
    tainted = lane_varying_vars(kernel)
    at = position_of(kernel, loop)
    if at is None or not lane_uniform(kernel, stop, at, tainted):
        return NotApplicable(f"the bound {print_expr(stop)} may differ between lanes")
    if lane_varying_context(kernel, loop):
        return NotApplicable(f"{loop.label} is not reached by all lanes of a warp together")
    planned: list[tuple[str, Expr, Poly]] = []
    reductions = _body(kernel, loop, tainted, planned)
    if isinstance(reductions, NotApplicable):
        return reductions
    if not reductions and not analysis.buffers_written(loop):
        return NotApplicable(f"{loop.label} neither stores nor reduces")
    for problem in (_isolated(kernel, loop), _combined(kernel, loop, reductions)):
        if problem is not None:  # (NotApplicable is falsy: no `or` chain here)
            return problem
    return _Plan(loop, start, stop, step, form, planned,
                 frozenset(analysis.assigned_vars(kernel.body)))


def _i(value: int) -> Const:
    return Const(value, I32)


def _bin(op: str, a: Expr, b: Expr) -> Binary:
    return Binary(op, a, b, I32)


def _rewrite(kernel: Kernel, plan: _Plan, width: int) -> Kernel:
    loop, s, step = plan.loop, plan.start, plan.step
    namer = Namer(kernel)
    vec = VectorType(F32, width)
    c = Var(loop.var, I32)
    chunk = width * step  # elements one vector iteration of the lanes sharing s % S covers
    end = namer.name(f"{loop.var}_vend")
    # Lane l = 32j/w... : lanes l (P = 32/w per 32-chunk) read chunk W + S*(w*K + l/P) at
    # offset w*(l%P), so each warp keeps its own chunks; with S = 32 this is w*l + w*S*K.
    if plan.lane_start and step == WARP:
        init: Expr = _bin("*", _i(width), s)
    else:
        lanes_per_chunk = WARP // width
        lane = _bin("%", s, _i(WARP))
        init = _bin("+", _bin("+", _bin("-", s, lane),
                              _bin("*", _i(step), _bin("/", lane, _i(lanes_per_chunk)))),
                    _bin("*", _i(width), _bin("%", lane, _i(lanes_per_chunk))))
    # One vector load per distinct access, before any element's math (reads precede stores).
    vectors: dict[tuple[str, Expr], str] = {}
    prologue: list[Stmt] = []
    for n in loop.body.walk():
        if isinstance(n, Load) and (n.buffer, n.index) not in vectors:
            name = namer.name(f"{n.buffer}_v")
            vectors[(n.buffer, n.index)] = name
            prologue.append(Declare(name, vec, Load(n.buffer, n.index, vec), loc=loop.loc))
    stores = [st for st in loop.body.stmts if isinstance(st, Store)]
    values: list[list[Expr]] = [[] for _ in stores]
    elements: list[Stmt] = []
    for i in range(width):
        def component(n: Node, i: int = i) -> Node | None:
            if isinstance(n, Load):
                return Component(Var(vectors[(n.buffer, n.index)], vec), i, F32)
            return None
        body = transform(loop.body, component)
        subst = {loop.var: c if i == 0 else _bin("+", c, _i(i))}
        copied = copy_body(body, namer, subst)  # type: ignore[arg-type]
        k = 0
        for st in copied.stmts:
            if isinstance(st, Store):  # the element's value; stored as a vector below
                name = namer.name(f"{st.buffer}_e")
                elements.append(Declare(name, F32, st.value, loc=st.loc))
                values[k].append(Var(name, F32))
                k += 1
            else:
                elements.append(st)
    epilogue = [dataclasses.replace(st, value=MakeVector(tuple(values[k]), vec))
                for k, st in enumerate(stores)]
    vector_loop = dataclasses.replace(
        loop, init=init, cond=Binary("<", c, Var(end, I32), BOOL),
        update=_bin("+", c, _i(chunk)), kind="serial", unroll=None,
        body=Block(tuple(prologue + elements + epilogue), loop.body.loc))
    # The tail: the original loop over [n / w * w, n) (fewer than w <= S indices), each
    # index on its old lane: the first index >= n / w * w congruent to s modulo S.
    rest = namer.name(f"{loop.var}_rest")
    s_mod = _bin("%", _bin("+", _bin("%", _bin("-", s, Var(end, I32)), _i(step)), _i(step)),
                 _i(step))
    tail = dataclasses.replace(
        analysis.rename_var(loop, loop.var, rest), label=namer.label(),  # type: ignore[arg-type]
        init=_bin("+", Var(end, I32), s_mod))
    covered = _bin("*", _bin("/", plan.stop, _i(width)), _i(width))
    covered = vector_end(covered, runtime_alignment(plan.accesses, loop.var, width))
    return analysis.replace_stmt(kernel, loop, [Declare(end, I32, covered, loc=loop.loc),
                                                vector_loop, tail])


RULES = [VectorizeStrided()]
