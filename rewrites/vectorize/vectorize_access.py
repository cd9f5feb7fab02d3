"""vectorize-access: move consecutive f32 elements as float4/float2 vectors in an element loop."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from kir.rewrites.vectorize.vector_loop import (
    VectorLoopRule,
    all_of,
    base_of,
    is_multiple,
    runtime_alignment,
    spec_ints,
    unit_loop_problem,
    vector_end,
    vector_start,
)

from kir import analysis
from kir.analysis import single_defs
from kir.analysis.affine import Poly, difference, substitute_values
from kir.analysis.memory import index_poly
from kir.ir import (
    Binary,
    Block,
    Const,
    Expr,
    For,
    If,
    Kernel,
    Load,
    MakeVector,
    Node,
    Stmt,
    Store,
    Var,
    transform,
)
from kir.ir.printer import print_expr
from kir.ir.types import BOOL, F32, VectorType
from kir.rules import NotApplicable

_ARITH = ("+", "-", "*", "/")


class VectorizeAccess(VectorLoopRule):
    """Rewrite an element-wise f32 loop into 4- (or 2-) wide vector loads, math and stores.

    CUDA practice: 128-bit loads and stores (``float4``, ``reinterpret_cast<float4*>``) cut
    the number of memory instructions by four and use the memory bus fully (NVIDIA blog
    "CUDA Pro Tip: Increase Performance with Vectorized Memory Access"; CUDA C++ Programming
    Guide, "Device Memory Accesses": size and alignment requirement). Metal has ``float4``
    loads from ``device float4*`` likewise.

    Shape required of loop ``L``: ``for x = 0; x < n; x = x + 1`` whose body is stores
    (possibly under ifs whose conditions do not involve x) ``buf[base + x] = f(...)`` with f
    built from loads ``src[base' + x]``, f32 constants, loop-invariant f32 locals and
    ``+ - * /``. Every base must be a multiple of the width: proved on the affine form with
    the spec's scalar values substituted (so the result is specialized to them, as the
    search's candidates are). A buffer both read and written must be accessed at one base
    (no dependence between elements). The vector loop covers ``n / w * w`` elements and a
    scalar remainder loop the rest, so any n is correct. Not checked: aliasing between
    distinct buffer parameters.
    """

    name = "vectorize-access"

    def plan_vector_loop(self, kernel: Kernel, loop: For) -> _Plan | NotApplicable:
        return _plan(kernel, loop)

    def misaligned(self, plan: _Plan, width: int,
                   scalars: Mapping[str, int | float]) -> NotApplicable | None:
        values = spec_ints(scalars)
        for buffer, index, base in plan.accesses:
            if not is_multiple(base, width, values):
                return NotApplicable(f"base of {buffer}[{print_expr(index)}] is not a "
                                     f"multiple of {width}")
        for buffer, bases in plan.stored_only:
            # Stores of one buffer at several bases must not overlap within a vector.
            for i, a in enumerate(bases):
                for b in bases[i + 1:]:
                    gap = substitute_values(difference(a, b), values)
                    if gap and (set(gap) != {()} or abs(gap[()]) < width):
                        return NotApplicable(f"stores to {buffer} may overlap within a vector")
        return None

    def vectorize(self, kernel: Kernel, plan: _Plan, width: int) -> Kernel:
        return _rewrite(kernel, plan, width)


@dataclass(frozen=True)
class _Plan:
    """A loop of the shape required, every access's base (in the order of the stores, each
    store's own access first), and the bases of the buffers only stored to."""

    loop: For
    accesses: list[tuple[str, Expr, Poly]]  # (buffer, index, base)
    stored_only: list[tuple[str, list[Poly]]]


def _stores(block: Block, var: str) -> list[Store] | NotApplicable:
    out: list[Store] = []
    for stmt in block.stmts:
        if isinstance(stmt, Store):
            out.append(stmt)
        elif isinstance(stmt, If) and var not in analysis.used_vars(stmt.cond):
            for part in (stmt.then, stmt.orelse):
                if part is not None:
                    inner = _stores(part, var)
                    if isinstance(inner, NotApplicable):
                        return inner
                    out.extend(inner)
        else:
            return NotApplicable("the body holds more than stores under x-invariant ifs")
    return out


def _value_nodes(expr: Expr) -> list[Node]:
    """The nodes of a stored value, not descending into load indices."""
    out: list[Node] = []
    stack: list[Node] = [expr]
    while stack:
        n = stack.pop()
        out.append(n)
        if not isinstance(n, Load):
            stack.extend(n.children())
    return out


def _plan(kernel: Kernel, loop: For) -> _Plan | NotApplicable:
    """The shape of ``loop`` checked at any width (alignment is the apply's question)."""
    problem = unit_loop_problem(loop)
    if problem is not None:
        return problem
    stores = _stores(loop.body, loop.var)
    if isinstance(stores, NotApplicable):
        return stores
    if not stores:
        return NotApplicable(f"{loop.label} stores nothing")
    defs = single_defs(kernel)
    declared_inside = analysis.declared_names(loop.body)
    planned: list[tuple[str, Expr, Poly]] = []
    bases: dict[str, list] = {}
    for store in stores:
        if store.value.type != F32:
            return NotApplicable("not an f32 store")
        accesses: list[tuple[str, Expr]] = [(store.buffer, store.index)]
        for n in _value_nodes(store.value):
            if isinstance(n, Load):
                if n.type != F32:
                    return NotApplicable("not an f32 load")
                accesses.append((n.buffer, n.index))
            elif isinstance(n, Var):
                if n.type != F32 or n.name in declared_inside or n.name == loop.var:
                    return NotApplicable(f"{n.name} is not a loop-invariant f32 value")
            elif not (isinstance(n, Const) and n.type == F32
                      or isinstance(n, Binary) and n.op in _ARITH and n.type == F32):
                return NotApplicable(f"cannot vectorize {type(n).__name__} in the stored value")
        for buffer, index in accesses:
            if analysis.used_vars(index) & declared_inside:
                return NotApplicable("an index uses a local declared in the loop")
            base = base_of(index_poly(index, defs), loop.var)
            if base is None:
                return NotApplicable(f"index {print_expr(index)} is not base + {loop.var}")
            planned.append((buffer, index, base))
            bases.setdefault(buffer, []).append(base)
    written = {s.buffer for s in stores}
    read = {n.buffer for s in stores for n in _value_nodes(s.value) if isinstance(n, Load)}
    for buffer in written & read:
        if any(b != bases[buffer][0] for b in bases[buffer]):
            return NotApplicable(f"{buffer} is read and written at different offsets")
    return _Plan(loop, planned, [(buffer, bases[buffer]) for buffer in sorted(written - read)])


def _vectorize(node: Node, vec: VectorType) -> Node:
    def visit(n: Node) -> Node | None:
        if isinstance(n, Load):
            return dataclasses.replace(n, type=vec)
        if isinstance(n, (Const, Var)) and n.type == F32:
            return MakeVector((n,) * vec.count, vec)
        if isinstance(n, Binary) and n.type == F32:
            return dataclasses.replace(n, type=vec)
        return None

    def stmt(n: Node) -> Node | None:
        if isinstance(n, Store):
            return dataclasses.replace(n, value=transform(n.value, visit))
        return None
    return transform(node, stmt)


def _apart(plan: _Plan, width: int) -> Expr | None:
    """Run-time checks that stores of one buffer at bases whose distance only the spec's
    values make a vector or more apart do not overlap within a vector."""
    loop = plan.loop
    starts = {index: vector_start(index, loop.var) for _, index, _ in plan.accesses}
    by_base = {}
    for buffer, index, base in plan.accesses:
        by_base.setdefault(buffer, {})[tuple(sorted(base.items()))] = starts[index]
    checks: list[Expr] = []
    for buffer, bases in plan.stored_only:
        for i, a in enumerate(bases):
            for b in bases[i + 1:]:
                gap = difference(a, b)
                if not gap or set(gap) == {()}:
                    continue  # a constant distance: checked in misaligned()
                x, y = (by_base[buffer][tuple(sorted(p.items()))] for p in (a, b))
                t = x.type
                checks.append(Binary(
                    "||", Binary(">=", Binary("-", x, y, t), Const(width, t), BOOL),
                    Binary(">=", Binary("-", y, x, t), Const(width, t), BOOL), BOOL))
    return all_of(checks)


def _rewrite(kernel: Kernel, plan: _Plan, width: int) -> Kernel:
    loop = plan.loop
    vec = VectorType(F32, width)
    x = Var(loop.var, loop.type)
    stop = loop.cond.right  # type: ignore[attr-defined]
    w = Const(width, loop.type)
    covered: Expr = Binary("*", Binary("/", stop, w, loop.type), w, loop.type)
    # Alignment and non-overlap that only the spec's values prove are checked at run time
    # (the scalar remainder loop then does all the work), so the kernel stays general.
    aligned = all_of([c for c in (runtime_alignment(plan.accesses, loop.var, width),
                                  _apart(plan, width)) if c is not None])
    covered = vector_end(covered, aligned)
    vector_loop = dataclasses.replace(
        loop, cond=Binary("<", x, covered, BOOL), update=Binary("+", x, w, loop.type),
        body=_vectorize(loop.body, vec), kind="serial", unroll=None)
    out: list[Stmt] = [vector_loop]
    if aligned is not None or not (isinstance(stop, Const) and stop.value % width == 0):
        rest = analysis.fresh_name(kernel, f"{loop.var}_rest")
        label = analysis.next_loop_label(kernel)
        out.append(dataclasses.replace(
            analysis.rename_var(loop, loop.var, rest), label=label,  # type: ignore[arg-type]
            init=covered))
    return analysis.replace_stmt(kernel, loop, out)


RULES = [VectorizeAccess()]
