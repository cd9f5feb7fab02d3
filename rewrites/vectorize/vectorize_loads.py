"""vectorize-loads: a sequential loop reads consecutive f32 elements as one float4/float2 load."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kir.rewrites.vectorize.vector_loop import (
    VectorLoopRule,
    base_of,
    may_be_multiple,
    runtime_alignment,
    spec_ints,
    unit_loop_problem,
    vector_end,
)

from kir import analysis
from kir.analysis import single_defs
from kir.analysis.affine import Poly
from kir.analysis.loop_edits import Namer, copy_body, has_barrier, has_exit
from kir.analysis.memory import index_poly
from kir.ir import (
    Alloc,
    Assign,
    Binary,
    Block,
    Component,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Load,
    Node,
    Select,
    Stmt,
    Store,
    Var,
    transform,
)
from kir.ir.fold import fold_expr
from kir.ir.types import BOOL, F32, VectorType
from kir.rules import NotApplicable


class VectorizeLoads(VectorLoopRule):
    """Read the f32 elements a sequential loop walks one by one as float4 (float2) vectors.

    CUDA practice: 128-bit loads from shared memory in an inner product (every fast SGEMM
    and FlashAttention kernel reads its shared tiles as ``float4``; NVIDIA blog "CUDA Pro
    Tip: Increase Performance with Vectorized Memory Access"). A dot product ``for (x = 0;
    x < 64; x++) s += q[r * 68 + x] * k[y * 68 + x]`` issues 128 load instructions; read as
    vectors it issues 32, and where every lane of a warp reads the same address (a query
    row all lanes share) a vector load is one shared-memory transaction for four elements.
    Metal has ``float4`` loads from ``threadgroup``/``device`` pointers likewise.

    Shape required of loop ``L``: ``for x = 0; x < n; x = x + 1`` (i32, n not written in
    the loop), no barrier, ``break``, ``continue`` or ``return`` in the body. Vectorized: f32
    loads from global or shared buffers at ``[base + x]`` that every iteration runs (in a
    top-level statement of the body, not under an ``if``, a nested loop, a ``?:`` arm or
    the right side of ``&&``/``||``), whose base uses no local the loop writes or declares
    and whose buffer the loop does not write. At least one such load; other loads stay
    scalar. The rewrite is unroll-by-``w`` with those loads done first: the vector loop runs
    ``x = 0, w, ..`` while ``x < n / w * w`` and holds one vector load per distinct access
    then the ``w`` copies of the body (``x``, ``x + 1``, ..) reading its components; the
    original loop does the last ``n % w`` iterations (a loop of fewer than ``w`` iterations,
    a constant ``n``, is refused). Each base must be a multiple of ``w`` at the spec's
    scalars, or hold a local kir cannot value statically (a row's start); where only those
    values make it one, or nothing static can tell, a run-time check sends all iterations
    to the scalar loop instead (as vectorize-access does).

    Legality: each thread runs the same statements in the same order with the same values,
    only the vectorized loads move before the statements of their ``w`` iterations. No
    statement of the loop writes those buffers, and with no barrier in the loop no other
    thread of a race-free kernel writes them meanwhile; the loads move only within
    iterations that run (``x + w <= n``) and that would have read them unconditionally, so
    no address is read that the original did not read. Exact (no operation is reordered).
    Not checked: aliasing between distinct buffer parameters.
    """

    name = "vectorize-loads"

    def plan_vector_loop(self, kernel: Kernel, loop: For) -> _Plan | NotApplicable:
        return _plan(kernel, loop)

    def fitted(self, plan: _Plan, width: int,
               scalars: Mapping[str, int | float]) -> _Plan | NotApplicable:
        """The plan without the loads whose base cannot be a multiple of ``width`` at the
        spec's scalars (they stay scalar loads); refused when none is left. A base holding a
        local kir cannot value stays, its alignment checked at run time."""
        stop = plan.loop.cond.right  # type: ignore[attr-defined]
        if isinstance(stop, Const) and stop.value < width:
            return NotApplicable(f"{plan.loop.label} runs {stop.value} iterations, fewer than "
                                 f"the width {width}")
        values = spec_ints(scalars)
        fit = dataclasses.replace(plan, accesses=[
            a for a in plan.accesses if may_be_multiple(a[2], width, values)])
        if not fit.accesses:
            return NotApplicable(f"no vectorizable load of {plan.loop.label} starts at a "
                                 f"multiple of {width}")
        return fit

    def vectorize(self, kernel: Kernel, plan: _Plan, width: int) -> Kernel:
        return _rewrite(kernel, plan, width)


@dataclass(frozen=True)
class _Plan:
    """A loop of the shape required and its vectorizable loads (buffer, index, base), each
    distinct access once, in the order the body reads them."""

    loop: For
    accesses: list[tuple[str, Expr, Poly]]


def _unconditional_loads(stmt: Stmt) -> list[Load]:
    """Loads a top-level statement of the loop body always evaluates: not under an ``?:``
    arm or the right side of a short-circuit operator (C evaluates those only sometimes)."""
    if isinstance(stmt, (Declare, Assign)):
        roots: list[Expr] = [stmt.init] if isinstance(stmt, Declare) else [stmt.value]
    elif isinstance(stmt, Store):
        roots = [stmt.index, stmt.value]
    else:
        return []
    out: list[Load] = []
    stack: list[Node] = [r for r in roots if r is not None]
    while stack:
        n = stack.pop()
        if isinstance(n, Load):
            out.append(n)
        if isinstance(n, Select):
            stack.append(n.cond)
        elif isinstance(n, Binary) and n.op in ("&&", "||"):
            stack.append(n.left)
        else:
            stack.extend(reversed(list(n.children())))  # (source order, for readable dumps)
    return out


def _memory_buffers(kernel: Kernel) -> set[str]:
    """Buffers in global or shared memory (a vector load from a thread's own array would
    move it out of registers)."""
    shared = {n.name for n in kernel.body.walk() if isinstance(n, Alloc) and n.space == "shared"}
    return {p.name for p in kernel.params if p.is_buffer} | shared


def _plan(kernel: Kernel, loop: For) -> _Plan | NotApplicable:
    """The loop's shape and its vectorizable loads, at any width."""
    problem = unit_loop_problem(loop)
    if problem is not None:
        return problem
    if has_barrier(loop.body) or has_exit(loop.body):
        return NotApplicable(f"{loop.label} holds a barrier, break, continue or return")
    defs = single_defs(kernel)
    local = analysis.declared_names(loop.body) | analysis.assigned_vars(loop.body)
    written = analysis.buffers_written(loop.body)
    memory = _memory_buffers(kernel)
    accesses: list[tuple[str, Expr, Poly]] = []
    seen: set[tuple[str, Expr]] = set()
    for stmt in loop.body.stmts:
        for load in _unconditional_loads(stmt):
            key = (load.buffer, load.index)
            if (load.type != F32 or key in seen or load.buffer in written
                    or load.buffer not in memory
                    or analysis.used_vars(load.index) & (local - {loop.var})):
                continue
            # Locals that are not affine (``tx = thread.x / 32``) stay atoms.
            poly = index_poly(load.index, defs) or index_poly(load.index)
            base = base_of(poly, loop.var)
            if base is not None:
                seen.add(key)
                accesses.append((load.buffer, load.index, base))
    if not accesses:
        return NotApplicable(f"{loop.label} reads no f32 buffer at base + {loop.var} in "
                             "every iteration")
    return _Plan(loop, accesses)


def _rewrite(kernel: Kernel, plan: _Plan, width: int) -> Kernel:
    loop = plan.loop
    namer = Namer(kernel)
    vec = VectorType(F32, width)
    t = loop.type
    x = Var(loop.var, t)
    stop = loop.cond.right  # type: ignore[attr-defined]
    vectors: dict[tuple[str, Expr], str] = {}
    prologue: list[Stmt] = []
    for buffer, index, _base in plan.accesses:
        name = namer.name(f"{buffer}_v")
        vectors[(buffer, index)] = name
        prologue.append(Declare(name, vec, Load(buffer, index, vec), loc=loop.loc))
    copies: list[Stmt] = []
    for i in range(width):
        def component(n: Node, i: int = i) -> Node | None:
            if isinstance(n, Load) and (n.buffer, n.index) in vectors:
                return Component(Var(vectors[(n.buffer, n.index)], vec), i, F32)
            return None
        body = transform(loop.body, component)
        if i:  # (copy 0 keeps the names; the tail loop below gets fresh ones)
            body = copy_body(body, namer, {loop.var: Binary("+", x, Const(i, t), t)})
        copies += body.stmts  # type: ignore[union-attr]
    w = Const(width, t)
    # Bases that are multiples of the width only at the spec's values are checked at run
    # time (misaligned, the scalar loop does all the work), so the kernel stays general.
    aligned = runtime_alignment(plan.accesses, loop.var, width)
    covered = vector_end(fold_expr(Binary("*", Binary("/", stop, w, t), w, t)), aligned)
    end = namer.name(f"{loop.var}_vend")
    vector_loop = dataclasses.replace(
        loop, cond=Binary("<", x, Var(end, t), BOOL), update=Binary("+", x, w, t),
        body=Block(tuple(prologue + copies), loop.body.loc), kind="serial", unroll=None)
    out: list[Stmt] = [Declare(end, t, covered, loc=loop.loc), vector_loop]
    if aligned is not None or not (isinstance(stop, Const) and stop.value % width == 0):
        rest = namer.name(f"{loop.var}_rest")
        out.append(dataclasses.replace(
            loop, var=rest, label=namer.label(), init=Var(end, t),
            cond=analysis.substitute(loop.cond, loop.var, Var(rest, t)),
            update=analysis.substitute(loop.update, loop.var, Var(rest, t)),
            body=copy_body(loop.body, namer, {loop.var: Var(rest, t)})))
    return analysis.replace_stmt(kernel, loop, out)


RULES = [VectorizeLoads()]
