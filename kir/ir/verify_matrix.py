"""Verifier checks for matrix-fragment statements (:class:`kir.ir.MatrixFill` and friends).

Two concerns: types and shapes agree (fragments are declared before use, never twice, ``acc =
a · b + acc`` has matching shapes and element types, loads and stores name a buffer of the
fragment's element type with integer index and stride), and — in :func:`lane_varying` — which
values may differ between the lanes of one warp, for the check that no matrix statement sits
under lane-divergent control flow (a fragment belongs to the whole warp).
"""

from __future__ import annotations

from typing import Callable

from kir.ir.nodes import (
    Binary,
    Cast,
    Const,
    Expr,
    Load,
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    Shuffle,
    Special,
    Stmt,
    Var,
)
from kir.ir.nodes import TF32_PRECISIONS, WARP
from kir.ir.types import MatrixType, ScalarType, Type

MATRIX_STMTS = (MatrixFill, MatrixLoad, MatrixMultiplyAccumulate, MatrixStore)
PRECISIONS = frozenset({"f32"}) | TF32_PRECISIONS  # MatrixMultiplyAccumulate.precision


def _is_int(t: Type) -> bool:
    return isinstance(t, ScalarType) and t.is_int


def matrix_problem(stmt: Stmt, fragments: dict[str, Type], buffers: dict,
                   vars_: dict) -> tuple[str, str | None] | None:
    """What is wrong with one matrix statement (message, hint), or None. Records the
    fragments it declares in ``fragments``."""
    if isinstance(stmt, (MatrixFill, MatrixLoad)):
        t = stmt.type
        if not isinstance(t, MatrixType) or t.rows <= 0 or t.cols <= 0:
            return f"fragment {stmt.name!r} needs a matrix type, not {t}", "e.g. f32m8x8"
        if stmt.name in fragments or stmt.name in vars_:
            return f"fragment {stmt.name!r} is declared twice", "give it a fresh name"
        if isinstance(stmt, MatrixFill) and stmt.value.type != t.elem:
            return (f"fragment {stmt.name!r} of {t} filled with {stmt.value.type}",
                    "insert a cast")
        if isinstance(stmt, MatrixLoad):
            problem = _memory_problem(stmt.buffer, stmt.index, stmt.stride, t, buffers, False)
            if problem:
                return problem
        fragments[stmt.name] = t
        return None
    if isinstance(stmt, MatrixMultiplyAccumulate):
        for name in (stmt.acc, stmt.a, stmt.b):
            if name not in fragments:
                return f"unknown matrix fragment {name!r}", "declare it with fill or mload"
        acc, a, b = (fragments[n] for n in (stmt.acc, stmt.a, stmt.b))
        ok = (a.rows == acc.rows and b.cols == acc.cols and a.cols == b.rows  # type: ignore
              and a.elem == b.elem == acc.elem)  # type: ignore[union-attr]
        if not ok:
            return f"matrix product {a} · {b} does not fit accumulator {acc}", None
        if stmt.precision not in PRECISIONS:
            return (f"unknown matrix product precision {stmt.precision!r}",
                    f"one of {', '.join(sorted(PRECISIONS))}")
        if stmt.precision in TF32_PRECISIONS and acc.elem.name != "f32":  # type: ignore
            return f"a {stmt.precision} product needs f32 fragments, not {acc}", None
        return None
    if isinstance(stmt, MatrixStore):
        if stmt.name not in fragments:
            return f"unknown matrix fragment {stmt.name!r}", "declare it with fill or mload"
        return _memory_problem(stmt.buffer, stmt.index, stmt.stride, fragments[stmt.name],
                               buffers, True)
    return None


def _memory_problem(buffer: str, index: Expr, stride: Expr, t: Type, buffers: dict,
                    write: bool) -> tuple[str, str | None] | None:
    if buffer not in buffers:
        return f"matrix {'store to' if write else 'load from'} unknown buffer {buffer!r}", None
    elem, const = buffers[buffer]
    if write and const:
        return f"write to const buffer {buffer!r}", None
    if elem != t.elem:  # type: ignore[union-attr]
        return f"matrix of {t} {'into' if write else 'from'} {buffer!r} of {elem}", None
    for what, expr in (("index", index), ("stride", stride)):
        if not _is_int(expr.type):
            return f"matrix {what} into {buffer!r} has type {expr.type}", "cast it to i32"
    return None


def lane_varying(block: tuple[int, int, int], thread_x: frozenset[str] = frozenset(),
                 uniform_loads: frozenset[int] = frozenset()
                 ) -> Callable[[Expr, set[str]], str | None]:
    """A ``varying(expr, tainted)`` for the divergence walker that asks whether ``expr`` may
    differ between lanes of one warp: ``warp`` and ``block.*`` do not; ``thread.y`` does not
    when a warp never spans two rows of the block (block.x a multiple of 32), likewise
    ``thread.z``; warp reductions give every lane the same value. Where a warp is a run of
    32 consecutive ``thread.x`` (a one-dimensional block, or block.x a multiple of 32),
    comparing ``thread.x`` (or a local in ``thread_x`` holding it, or either plus a uniform
    multiple of 32) with a multiple of 32 and dividing it by 32 give every lane of a warp the
    same value too (``if (tid < 32)``, ``(blockIdx.x * blockDim.x + threadIdx.x) / 32``).
    A load whose id is in ``uniform_loads`` reads alike in every thread of the block (a flag
    one thread wrote before a barrier: :func:`kir.ir.uniform_loads.uniform_shared_loads`)."""
    bx, by, bz = block
    uniform_axes = {"y"} if bx % WARP == 0 else set()
    if (bx * by) % WARP == 0:
        uniform_axes.add("z")
    runs = bx % WARP == 0 or by == bz == 1  # a warp: 32 consecutive thread.x of one row

    def is_thread_x(e: Expr) -> bool:
        while isinstance(e, Cast):
            e = e.value
        return isinstance(e, Special) and e.kind == "thread" and e.axis == "x" or \
            isinstance(e, Var) and e.name in thread_x

    def uniform_multiple(e: Expr, tainted: set[str]) -> bool:
        """``e`` a multiple of 32, the same for every lane of a warp."""
        while isinstance(e, Cast):
            e = e.value
        if isinstance(e, Const):
            return isinstance(e.value, int) and e.value % WARP == 0
        if isinstance(e, Special) and e.kind == "block_dim" and e.axis == "x":
            return bx % WARP == 0
        return isinstance(e, Binary) and e.op == "*" and any(
            uniform_multiple(a, tainted) and varying(b, tainted) is None
            for a, b in ((e.left, e.right), (e.right, e.left)))

    def warp_run(e: Expr, tainted: set[str]) -> bool:
        """``e`` thread.x, or thread.x plus a multiple of 32 the same for the whole warp
        (``blockIdx.x * blockDim.x + threadIdx.x``): 32 consecutive values from a multiple
        of 32 over each warp."""
        while isinstance(e, Cast):
            e = e.value
        if is_thread_x(e):
            return True
        return isinstance(e, Binary) and e.op == "+" and (
            is_thread_x(e.left) and uniform_multiple(e.right, tainted)
            or is_thread_x(e.right) and uniform_multiple(e.left, tainted))

    def per_warp(e: Expr, tainted: set[str]) -> bool:
        """``e`` a function of thread.x's warp alone."""
        if not (runs and isinstance(e, Binary) and warp_run(e.left, tainted)):
            return False
        right = e.right
        while isinstance(right, Cast):
            right = right.value
        if isinstance(right, Special) and right.kind == "warp_size":  # (warpSize)
            c = WARP
        elif isinstance(right, Const) and isinstance(right.value, int):
            c = right.value
        else:
            return False
        if e.op in ("<", ">="):
            return c % WARP == 0
        if e.op in ("<=", ">"):
            return (c + 1) % WARP == 0
        return e.op == ">>" and c >= 5 or e.op == "/" and c > 0 and c % WARP == 0

    def varying(expr: Expr, tainted: set[str]) -> str | None:
        stack = [expr]
        while stack:
            e = stack.pop()
            if per_warp(e, tainted):
                continue
            if isinstance(e, Special) and (e.kind == "lane" or (
                    e.kind == "thread" and e.axis not in uniform_axes)):
                return f"depends on {e.kind}{'.' + e.axis if e.axis else ''}"
            if isinstance(e, Load) and id(e) not in uniform_loads:
                return f"depends on data loaded from {e.buffer!r}"
            if isinstance(e, Shuffle):
                return "depends on a warp shuffle"
            if isinstance(e, Var) and e.name in tainted:
                return f"depends on {e.name!r}, which varies between the lanes of a warp"
            stack.extend(e.children())
        return None

    return varying


def thread_x_locals(body) -> frozenset[str]:
    """Locals declared as ``thread.x`` (through casts, or another such local) and never
    assigned again: ``unsigned tid = threadIdx.x``."""
    from kir.ir.nodes import Assign, Declare

    assigned = {n.name for n in body.walk() if isinstance(n, Assign)}
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n in body.walk():
            if isinstance(n, Declare) and n.name not in found and n.name not in assigned \
                    and n.init is not None:
                e = n.init
                while isinstance(e, Cast):
                    e = e.value
                if isinstance(e, Special) and e.kind == "thread" and e.axis == "x" or \
                        isinstance(e, Var) and e.name in found:
                    found.add(n.name)
                    changed = True
    return frozenset(found)


__all__ = ["MATRIX_STMTS", "matrix_problem", "lane_varying", "thread_x_locals"]
