"""Small analyses and tree edits over kir IR that rules share.

Everything here is a pure function of its inputs and walks trees iteratively where a deep
tree could appear. Rules should reach for these before writing their own.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterator

from kir.ir import (
    MATRIX_STMTS,
    Alloc,
    Assign,
    Atomic,
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
    MatrixFill,
    MatrixLoad,
    MatrixStore,
    Node,
    Special,
    Stmt,
    Store,
    Var,
    While,
    transform,
)
from kir.ir.nodes import WARP
from kir.ir.edit import (  # noqa: F401 - part of this module's interface
    map_stmts,
    own_exprs,
    rename_var,
    replace_stmt,
    substitute,
)

# ---------------------------------------------------------------------------- navigation


def loops(kernel: Kernel) -> list[For]:
    """All for loops in pre-order (source order)."""
    return [n for n in kernel.body.walk() if isinstance(n, For)]


def loop_labels(kernel: Kernel) -> list[str]:
    return [loop.label for loop in loops(kernel)]


def find_loop(kernel: Kernel, label: str) -> For | None:
    return next((loop for loop in loops(kernel) if loop.label == label), None)


def replace_loop(kernel: Kernel, label: str, new: Stmt | list[Stmt]) -> Kernel:
    """Replace the loop labelled ``label`` with ``new``."""
    loop = find_loop(kernel, label)
    if loop is None:
        raise ValueError(f"no loop {label}")
    return replace_stmt(kernel, loop, new)


# ------------------------------------------------------------------------------- names


def declared_names(node: Node) -> set[str]:
    """Every name a Declare, For, Alloc or matrix fragment introduces under ``node``."""
    names: set[str] = set()
    for n in node.walk():
        if isinstance(n, (Declare, Alloc, MatrixFill, MatrixLoad)):
            names.add(n.name)
        elif isinstance(n, For):
            names.add(n.var)
    return names


def all_names(kernel: Kernel) -> set[str]:
    return declared_names(kernel.body) | {p.name for p in kernel.params}


def fresh_name(kernel: Kernel, base: str, taken: set[str] | None = None) -> str:
    """``base`` or ``base_1``, ``base_2``... not used anywhere in ``kernel`` (nor in ``taken``)."""
    used = all_names(kernel) | (taken or set())
    if base not in used:
        return base
    return next(f"{base}_{i}" for i in itertools.count(1) if f"{base}_{i}" not in used)


def next_loop_label(kernel: Kernel, taken: set[str] | None = None) -> str:
    """A loop label not yet used (labels are L<number>)."""
    used = set(loop_labels(kernel)) | (taken or set())
    return next(f"L{i}" for i in itertools.count(len(used)) if f"L{i}" not in used)


def used_vars(node: Node) -> set[str]:
    """Names read (as Var) under ``node``."""
    return {n.name for n in node.walk() if isinstance(n, Var)}


def assigned_vars(node: Node) -> set[str]:
    """Names written by Assign, Declare, For headers or Atomic results under ``node``."""
    names: set[str] = set()
    for n in node.walk():
        if isinstance(n, (Assign, Declare)):
            names.add(n.name)
        elif isinstance(n, For):
            names.add(n.var)
        elif isinstance(n, Atomic) and n.result:
            names.add(n.result)
    return names


def buffers_read(node: Node) -> set[str]:
    return {n.buffer for n in node.walk() if isinstance(n, (Load, Atomic, MatrixLoad))}


def buffers_written(node: Node) -> set[str]:
    return {n.buffer for n in node.walk() if isinstance(n, (Store, Atomic, MatrixStore))}


def has_matrix_stmts(node: Node) -> bool:
    """Whether warp-wide matrix statements occur under ``node``: rules that re-index
    element accesses must leave such code alone (a MatrixLoad reads a whole tile at once)."""
    return any(isinstance(n, MATRIX_STMTS) for n in node.walk())


# ------------------------------------------------------------------------------- loops


@dataclasses.dataclass(frozen=True)
class CanonicalLoop:
    """``for (var = start; var < stop; var = var + step)`` with ``step`` a positive constant
    and ``stop`` not written in the body."""

    loop: For
    start: Expr
    stop: Expr
    step: int
    inclusive: bool = False  # var <= stop


def canonical(loop: For) -> CanonicalLoop | None:
    """Recognize the counted-loop form most rules need, or None."""
    cond, update = loop.cond, loop.update
    if not (isinstance(cond, Binary) and cond.op in ("<", "<=")
            and isinstance(cond.left, Var) and cond.left.name == loop.var):
        return None
    if not (isinstance(update, Binary) and update.op == "+" and isinstance(update.left, Var)
            and update.left.name == loop.var and isinstance(update.right, Const)
            and isinstance(update.right.value, int) and update.right.value > 0):
        return None
    written = assigned_vars(loop.body)
    if loop.var in written or used_vars(cond.right) & written:
        return None
    return CanonicalLoop(loop, loop.init, cond.right, int(update.right.value), cond.op == "<=")


def launch_step(kernel: Kernel, e: Expr) -> int | None:
    """A loop step as a number: a constant, a block dimension (concrete in the kernel's
    launch) or the warp size; None for anything else."""
    e = strip_casts(e)
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Special) and e.kind == "block_dim":
        return kernel.launch.block["xyz".index(e.axis)]
    if isinstance(e, Special) and e.kind == "warp_size":
        return WARP
    return None


def counted_loop(kernel: Kernel, loop: For) -> CanonicalLoop | None:
    """:func:`canonical`, with a step the launch fixes (``i += blockDim.x``, ``i +=
    warpSize``) read as its number: the block-stride loops of kernels written for any
    block size. A rule that relies on that number ties the kernel to this launch."""
    found = canonical(loop)
    if found is not None:
        return found
    update = loop.update
    if not (isinstance(update, Binary) and update.op == "+" and isinstance(update.left, Var)
            and update.left.name == loop.var):
        return None
    step = launch_step(kernel, update.right)
    if step is None:
        return None
    counted = canonical(dataclasses.replace(
        loop, update=Binary("+", update.left, Const(step, loop.type), loop.type)))
    return None if counted is None else dataclasses.replace(counted, loop=loop)


def constant_trip_count(loop: For) -> int | None:
    """The trip count when start and stop are constants."""
    c = canonical(loop)
    if c is None or not isinstance(c.start, Const) or not isinstance(c.stop, Const):
        return None
    stop = c.stop.value + (1 if c.inclusive else 0)
    return max(0, -(-(stop - c.start.value) // c.step))


# ------------------------------------------------------------------------------ uniformity


THREAD_VARYING = ("thread", "lane", "warp")


def thread_dependent_vars(kernel: Kernel) -> set[str]:
    """Variables whose value may differ between threads of a block (a conservative taint:
    anything computed from thread indices, lanes, loads, atomics, or assigned under a
    thread-dependent condition)."""
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for stmt, varying_context in _stmts_with_context(kernel.body, tainted):
            targets: list[tuple[str, Expr | None]] = []
            if isinstance(stmt, Declare):
                targets.append((stmt.name, stmt.init))
            elif isinstance(stmt, Assign):
                targets.append((stmt.name, stmt.value))
            elif isinstance(stmt, For):
                targets.append((stmt.var, stmt.init))
                targets.append((stmt.var, stmt.update))
            elif isinstance(stmt, Atomic) and stmt.result:
                targets.append((stmt.result, None))
            for name, value in targets:
                if name in tainted:
                    continue
                if varying_context or value is None or is_thread_dependent(value, tainted):
                    tainted.add(name)
                    changed = True
    return tainted


def is_thread_dependent(expr: Expr, tainted: set[str]) -> bool:
    for n in expr.walk():
        if isinstance(n, Special) and n.kind in THREAD_VARYING:
            return True
        if isinstance(n, Load):
            return True
        if isinstance(n, Var) and n.name in tainted:
            return True
    return False


def _stmts_with_context(body: Block, tainted: set[str]) -> Iterator[tuple[Stmt, bool]]:
    """Statements with whether they sit under thread-dependent control flow."""
    stack: list[tuple[Stmt, bool]] = [(body, False)]
    while stack:
        stmt, varying = stack.pop()
        yield stmt, varying
        if isinstance(stmt, Block):
            stack.extend((s, varying) for s in reversed(stmt.stmts))
        elif isinstance(stmt, If):
            inner = varying or is_thread_dependent(stmt.cond, tainted)
            stack.append((stmt.then, inner))
            if stmt.orelse is not None:
                stack.append((stmt.orelse, inner))
        elif isinstance(stmt, For):
            inner = varying or is_thread_dependent(stmt.cond, tainted) \
                or is_thread_dependent(stmt.init, tainted)
            stack.append((stmt.body, inner))
        elif isinstance(stmt, While):
            stack.append((stmt.body, varying or is_thread_dependent(stmt.cond, tainted)))


def has_own_exit(loop: For) -> bool:
    """Whether a ``break``/``continue`` binding to ``loop`` itself (not to a nested loop)
    appears in its body."""
    from kir.ir import Break, Continue

    stack: list[Stmt] = list(loop.body.stmts)
    while stack:
        s = stack.pop()
        if isinstance(s, (Break, Continue)):
            return True
        if isinstance(s, If):
            stack.extend(s.then.stmts)
            stack.extend(s.orelse.stmts if s.orelse is not None else ())
        elif isinstance(s, Block):
            stack.extend(s.stmts)
    return False


def net_effect(block: Block) -> dict[str, Expr] | None:
    """What straight-line lets and assignments leave in the variables they assign and do
    not declare, as expressions of those variables' values before the block (the block's
    own lets substituted, so an inlined helper's temporaries are seen through); None when
    the block holds any other statement."""
    env: dict[str, Expr] = {}
    final: dict[str, Expr] = {}
    declared = declared_names(block)

    def substituted(e: Expr) -> Expr:
        return transform(e, lambda n: env.get(n.name) if isinstance(n, Var) else None)

    for stmt in block.stmts:
        if isinstance(stmt, Declare):
            if stmt.init is not None:
                env[stmt.name] = substituted(stmt.init)
        elif isinstance(stmt, Assign):
            env[stmt.name] = substituted(stmt.value)
            if stmt.name not in declared:
                final[stmt.name] = env[stmt.name]
        else:
            return None
    return final


def single_defs(kernel: Kernel) -> dict[str, Expr]:
    """Locals declared once with an initializer and never written again: name -> initializer
    (the values a rule may substitute for the name anywhere)."""
    declared: dict[str, Expr | None] = {}
    assigned: set[str] = set()
    for n in kernel.body.walk():
        if isinstance(n, Declare):
            declared[n.name] = n.init if n.name not in declared else None
        elif isinstance(n, Assign):
            assigned.add(n.name)
        elif isinstance(n, For):
            assigned.add(n.var)
        elif isinstance(n, Atomic) and n.result:
            assigned.add(n.result)
    return {k: v for k, v in declared.items() if v is not None and k not in assigned}


def accumulation(value: Expr, acc: Expr) -> tuple[str, Expr] | None:
    """``(op, term)`` when ``value`` accumulates into ``acc``: ``acc + term``, ``term + acc``,
    ``max(acc, term)``, ``max(term, acc)`` or the same with ``min``; op is ``"+"``, ``"max"``
    or ``"min"``. The shape every reduction rule recognizes (``acc = <value>``)."""
    if isinstance(value, Binary) and value.op == "+":
        op, pair = "+", (value.left, value.right)
    elif isinstance(value, Call) and value.fn in ("max", "min") and len(value.args) == 2:
        op, pair = value.fn, tuple(value.args)
    else:
        return None
    if pair[0] == acc:
        return op, pair[1]
    if pair[1] == acc:
        return op, pair[0]
    return None


def strip_casts(e: Expr) -> Expr:
    """``e`` under every conversion wrapped around it (``i32(u32(x))`` -> ``x``)."""
    while isinstance(e, Cast):
        e = e.value
    return e


def chain_operands(expr: Expr, op: str) -> list[Expr]:
    """The operands of a chain of ``op`` (``a + b + c`` → ``[a, b, c]``), left to right."""
    out: list[Expr] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op == op:
            stack += [e.right, e.left]
        else:
            out.append(e)
    return out


def sum_terms(expr: Expr) -> list[Expr]:
    """The operands of a chain of ``+``, left to right."""
    return chain_operands(expr, "+")


def conjuncts(expr: Expr) -> list[Expr]:
    """The conditions of a chain of ``&&`` (``a && b && c`` → ``[a, b, c]``)."""
    return chain_operands(expr, "&&")

