"""Lane analyses for vectorize-strided (what it shares with vectorize-access is in
:mod:`kir.rewrites.vectorize.vector_loop`).

* :func:`index_base`: an index ``base + x`` split into its base, on the affine form. Unlike
  :func:`kir.analysis.memory.index_poly`, a local whose definition is not affine (``row =
  blockIdx.x * 4 + threadIdx.x / 32``) stays an atom instead of making the whole index
  unknown: only the coefficients' divisibility by the width matters, and an atom stands for
  some integer.
* :func:`lane_combine`: recognize a butterfly that combines a value over the 32 lanes of a
  warp (``for (o = 16; o > 0; o /= 2) v += __shfl_xor_sync(m, v, o)``, or max/min, or the
  ``__shfl_down_sync`` sweep that leaves the total on lane 0).
* :func:`lane_uniform`: whether a value is the same on all lanes of a warp at a point,
  knowing that such a butterfly (or a broadcast from one lane) makes it so.
"""

from __future__ import annotations

from typing import Mapping

from kir.rewrites.vectorize.vector_loop import base_of

from kir import analysis
from kir.analysis import strip_casts
from kir.analysis.affine import Poly, to_poly
from kir.analysis.parallel import Position, is_lane_varying, lane_varying_context, position_of
from kir.ir import (
    Assign,
    Binary,
    Const,
    Declare,
    Expr,
    For,
    Kernel,
    Node,
    Shuffle,
    Stmt,
    Var,
    transform,
)
from kir.ir.nodes import WARP
from kir.ir.types import I32



def affine_poly(expr: Expr, defs: Mapping[str, Expr]) -> Poly | None:
    """The polynomial form of ``expr`` with single-definition locals inlined where their
    definition is affine and kept as atoms where it is not."""
    memo: dict[str, Poly] = {}

    def lookup(name: str) -> Poly | None:
        if name in memo:
            return memo[name]
        memo[name] = {(name,): 1}  # a guard against cycles while the definition is read
        if name in defs:
            inner = to_poly(defs[name], lookup)
            if inner is not None:
                memo[name] = inner
        return memo[name]
    return to_poly(expr, lookup)


def index_base(kernel: Kernel, index: Expr, var: str) -> Poly | str:
    """The base of ``index = base + var`` (a polynomial without ``var``), or why not."""
    base = base_of(affine_poly(index, analysis.single_defs(kernel)), var)
    return f"the index is not base + {var}" if base is None else base


def _offsets(loop: For) -> list[int] | None:
    """The values the counter of ``for (o = c0; o CMP k; o = o OP k')`` takes (at most 64)."""
    o = Var(loop.var, loop.type)
    cond, update = loop.cond, loop.update
    if not (isinstance(strip_casts(loop.init), Const) and isinstance(cond, Binary)
            and cond.left == o and isinstance(strip_casts(cond.right), Const)
            and isinstance(update, Binary) and update.left == o
            and isinstance(strip_casts(update.right), Const)):
        return None
    value, bound, k = strip_casts(loop.init).value, strip_casts(cond.right).value, \
        strip_casts(update.right).value
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (value, bound, k)):
        return None
    tests = {"<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__,
             "!=": int.__ne__}
    steps = {"/": lambda v: int(v / k) if k else None, ">>": lambda v: v >> k,
             "*": lambda v: v * k, "<<": lambda v: v << k}
    if cond.op not in tests or update.op not in steps or k <= 0:
        return None
    out: list[int] = []
    while tests[cond.op](value, bound):
        out.append(value)
        value = steps[update.op](value)
        if value is None or len(out) > 64:
            return None
    return out


def lane_combine(stmt: Stmt) -> tuple[str, str, str] | None:
    """``(v, mode, op)`` when ``stmt`` is a butterfly over a full warp: a loop over offsets
    16, 8, 4, 2, 1 (or 1, 2, ... 16) whose body is only ``v = v op shuffle(v, offset)``
    with op ``+``, ``max`` or ``min``. mode ``xor`` leaves the total on every lane, ``down``
    on lane 0 (only the monotone orders are accepted for it)."""
    if not isinstance(stmt, For) or len(stmt.body.stmts) != 1:
        return None
    assign = stmt.body.stmts[0]
    if not isinstance(assign, Assign):
        return None
    v = Var(assign.name, assign.value.type)
    found = analysis.accumulation(assign.value, v)
    if found is None:
        return None
    op, shuffle = found
    if not (isinstance(shuffle, Shuffle) and shuffle.value == v and shuffle.width == WARP
            and shuffle.mode in ("xor", "down")
            and strip_casts(shuffle.lane) == Var(stmt.var, stmt.type)):
        return None
    offsets = _offsets(stmt)
    halving, doubling = [16, 8, 4, 2, 1], [1, 2, 4, 8, 16]
    if offsets is None or not (offsets in (halving, doubling) or (
            shuffle.mode == "xor" and sorted(offsets) == doubling)):
        return None
    return assign.name, shuffle.mode, op


def lane_uniform(kernel: Kernel, expr: Expr, at: Position, tainted: set[str],
                 depth: int = 0) -> bool:
    """Whether ``expr``, evaluated at ``at``, is the same on all lanes of a warp. Finer than
    :func:`kir.analysis.parallel.is_lane_varying` (whose taint is flow-insensitive) in two
    ways: a broadcast ``shuffle.idx(v, k)`` (k constant) is uniform, and so is a variable
    whose last write before ``at`` in its block is an xor butterfly over the whole warp
    (every lane adds the same values in a commutative order: bit-identical). A local with
    one definition is judged by its initializer at its own position."""
    defs = analysis.single_defs(kernel)

    def proven(n: Node) -> Node | None:
        if isinstance(n, Shuffle) and n.mode == "idx" and n.width == WARP \
                and isinstance(strip_casts(n.lane), Const):
            return Const(0, I32)  # a broadcast from one lane
        if isinstance(n, Var) and n.name in tainted and depth < 16:
            if n.name in defs:
                decl = next(d for d in kernel.body.walk()
                            if isinstance(d, Declare) and d.name == n.name)
                pos = position_of(kernel, decl)
                if pos is not None and lane_uniform(kernel, defs[n.name], pos, tainted,
                                                    depth + 1):
                    return Const(0, I32)
            elif _combined_before(kernel, at, n.name, tainted, depth):
                return Const(0, I32)
        return None
    probe = transform(expr, proven)
    return not is_lane_varying(probe, tainted, kernel.launch.block)  # type: ignore[arg-type]


def _combined_before(kernel: Kernel, at: Position, name: str, tainted: set[str],
                     depth: int) -> bool:
    """The last write of ``name`` before ``at`` in its block is an xor butterfly that the
    whole warp runs, or an assignment of a value uniform where it is made (a warp
    reduction's result, a block reduction's total: ``v = reduce.sum(v)``, ``v = total``)."""
    for i in range(at.index - 1, -1, -1):
        stmt = at.block.stmts[i]
        if name in analysis.assigned_vars(stmt):
            if isinstance(stmt, Assign):
                return depth < 16 and lane_uniform(
                    kernel, stmt.value, Position(at.block, i, at.ancestors), tainted, depth + 1)
            comb = lane_combine(stmt)
            return comb is not None and comb[:2] == (name, "xor") \
                and not lane_varying_context(kernel, stmt)
    return False
