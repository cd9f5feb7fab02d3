"""Is the end of a reduction kernel a *linear* block combine of per-thread values?

A reduction kernel usually has two phases: each thread *produces* a few scalars from its
block's share of the input (``v = in[i] + in[i + blockDim.x]``), then the block *combines*
them — a shared-memory tree, warp shuffles, a ``WarpReduce`` — and one thread adds the
block's result to the output atomically. When the combine phase is a linear map from the
threads' produced values to what it adds (it only adds, subtracts, moves and scales them by
values that do not depend on them, under control flow that does not depend on them either),
the sum over many blocks of the combine equals the combine of the per-thread sums:

    sum_b C(v_b) = C(sum_b v_b)

so a thread may add up its values over many former blocks first and the block combine once.
:func:`linear_combine` checks exactly that property of the combine phase; the rule
``grid-stride-reduce`` uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from kir.analysis import buffers_written, declared_names
from kir.ir import (
    Alloc,
    Assert,
    Assign,
    Atomic,
    Barrier,
    Binary,
    Block,
    Break,
    Call,
    Cast,
    Const,
    Continue,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Load,
    Select,
    Shuffle,
    Special,
    Stmt,
    Store,
    Unary,
    Var,
    WarpReduce,
    While,
)
from kir.ir.types import ScalarType


@dataclass(frozen=True)
class Combine:
    """What the analysis found: the variables the combine phase reads linearly (``seeds``),
    the locals and shared arrays it computes linearly, and the global buffers it adds to."""

    seeds: frozenset[str]
    linear_vars: frozenset[str]
    linear_arrays: frozenset[str]
    outputs: frozenset[str]


class NotLinear(Exception):
    """Why the combine phase is not a linear map of the seeds."""


def linear_combine(kernel: Kernel, combine: Iterable[Stmt], seeds: set[str],
                   outer: Mapping[str, Declare]) -> Combine:
    """Check that the statements ``combine`` are a linear map from ``seeds`` (scalar locals
    each thread produced before) to the values they add atomically to global memory; raise
    :class:`NotLinear` saying why not. Every other value they read must not depend on the
    seeds (nor on the block index: the caller removes those uses first). ``outer`` are the
    declarations before the combine that it may give a linear value: one that starts with
    a value other than zero would add that value once per block instead of once per
    former block, so it is refused."""
    stmts = list(combine)
    shared = {a.name for a in kernel.body.walk() if isinstance(a, Alloc) and a.space == "shared"}
    local = {a.name for a in kernel.body.walk() if isinstance(a, Alloc) and a.space != "shared"}
    written = buffers_written(kernel.body)
    linear_vars, linear_arrays = _propagate(stmts, set(seeds), shared)
    declared_here = declared_names(Block(tuple(stmts)))
    for name in sorted(linear_vars - seeds - declared_here):
        start = outer.get(name)
        if start is None:
            raise NotLinear(f"{name} is given a reduced value but is not declared in the "
                            "kernel body")
        if start.init is not None and not (isinstance(start.init, Const)
                                           and not start.init.value):
            raise NotLinear(f"{name} starts at a value other than zero and then takes a "
                            "reduced value")
    checker = _Checker(linear_vars, linear_arrays, shared, local, written)
    outputs: set[str] = set()
    for stmt in stmts:
        checker.stmt(stmt, outputs)
    if not outputs:
        raise NotLinear("the block combine adds nothing to global memory atomically")
    for n in kernel.body.walk():
        if isinstance(n, (Load, Store)) and n.buffer in outputs:
            raise NotLinear(f"{n.buffer} is also read or written directly: partial sums "
                            "would show")
        if isinstance(n, Atomic) and n.buffer in outputs and n.op != "add":
            raise NotLinear(f"an atomic {n.op} on {n.buffer} (only adds commute with the sum)")
    return Combine(frozenset(seeds), frozenset(linear_vars), frozenset(linear_arrays),
                   frozenset(outputs))


def _propagate(stmts: list[Stmt], linear: set[str], shared: set[str]
               ) -> tuple[set[str], set[str]]:
    """The locals and shared arrays that take a value computed from the seeds (to a fixed
    point: a tree loop reads what an earlier pass of it wrote)."""
    arrays: set[str] = set()
    changed = True
    while changed:
        changed = False
        for stmt in stmts:
            for n in stmt.walk():
                if isinstance(n, (Declare, Assign)):
                    value = n.init if isinstance(n, Declare) else n.value
                    if value is not None and n.name not in linear and \
                            _touches(value, linear, arrays):
                        linear.add(n.name)
                        changed = True
                elif isinstance(n, (Store, Atomic)) and n.buffer in shared and \
                        n.buffer not in arrays and _touches(n.value, linear, arrays):
                    arrays.add(n.buffer)
                    changed = True
    return linear, arrays


def _touches(expr: Expr, linear: set[str], arrays: set[str]) -> bool:
    return any((isinstance(n, Var) and n.name in linear)
               or (isinstance(n, Load) and n.buffer in arrays) for n in expr.walk())


class _Checker:
    """Walks the combine phase: every linear value is a linear expression, everything else
    (conditions, indices, loop headers, other locals) is independent of the seeds."""

    def __init__(self, linear_vars: set[str], linear_arrays: set[str], shared: set[str],
                 local: set[str], written: set[str]) -> None:
        self.linear_vars = linear_vars
        self.linear_arrays = linear_arrays
        self.shared = shared
        self.local = local
        self.written = written

    # ----------------------------------------------------------------------- statements

    def stmt(self, stmt: Stmt, outputs: set[str]) -> None:
        if isinstance(stmt, Block):
            for s in stmt.stmts:
                self.stmt(s, outputs)
        elif isinstance(stmt, (Declare, Assign)):
            value = stmt.init if isinstance(stmt, Declare) else stmt.value
            if value is None:  # given a value before it is read (or the input kernel is wrong)
                return
            self.value(value, stmt.name in self.linear_vars, f"the value of {stmt.name}")
        elif isinstance(stmt, Store):
            self.invariant(stmt.index, f"the index of a store to {stmt.buffer}")
            if stmt.buffer in self.local:
                raise NotLinear(f"the block combine writes the local array {stmt.buffer}")
            if stmt.buffer not in self.shared:
                raise NotLinear(f"the block combine stores to global {stmt.buffer} (only "
                                "atomic adds are summed)")
            self.value(stmt.value, stmt.buffer in self.linear_arrays,
                       f"the value stored to {stmt.buffer}")
        elif isinstance(stmt, Atomic):
            self.atomic(stmt, outputs)
        elif isinstance(stmt, If):
            self.invariant(stmt.cond, "a branch condition")
            self.stmt(stmt.then, outputs)
            if stmt.orelse is not None:
                self.stmt(stmt.orelse, outputs)
        elif isinstance(stmt, For):
            if stmt.var in self.linear_vars:
                raise NotLinear(f"loop variable {stmt.var} depends on the reduced values")
            for part in (stmt.init, stmt.cond, stmt.update):
                self.invariant(part, f"the header of loop {stmt.label}")
            self.stmt(stmt.body, outputs)
        elif isinstance(stmt, While):
            self.invariant(stmt.cond, "a while condition")
            self.stmt(stmt.body, outputs)
        elif isinstance(stmt, Assert):
            self.invariant(stmt.cond, "an assertion")
        elif not isinstance(stmt, (Barrier, Break, Continue)):
            raise NotLinear(f"the block combine holds a {type(stmt).__name__} statement")

    def atomic(self, stmt: Atomic, outputs: set[str]) -> None:
        self.invariant(stmt.index, f"the index of an atomic on {stmt.buffer}")
        if stmt.op != "add" or stmt.result is not None:
            raise NotLinear(f"an atomic {stmt.op} on {stmt.buffer}"
                            + (" whose old value is used" if stmt.result else ""))
        if stmt.buffer in self.local:
            raise NotLinear(f"an atomic on the local array {stmt.buffer}")
        if stmt.buffer in self.shared:
            self.value(stmt.value, stmt.buffer in self.linear_arrays,
                       f"the value added to {stmt.buffer}")
            return
        self.value(stmt.value, True, f"the value added to {stmt.buffer}")
        outputs.add(stmt.buffer)

    # ---------------------------------------------------------------------- expressions

    def value(self, expr: Expr, linear: bool, what: str) -> None:
        if linear:
            if not self.is_linear(expr):
                raise NotLinear(f"{what} is not a sum or scaling of the reduced values")
        else:
            self.invariant(expr, what)

    def invariant(self, expr: Expr, what: str) -> None:
        """``expr`` must not depend on the reduced values (nor read memory they change)."""
        for n in expr.walk():
            if isinstance(n, Var) and n.name in self.linear_vars:
                raise NotLinear(f"{what} depends on the reduced value {n.name}")
            if isinstance(n, Load):
                if n.buffer in self.linear_arrays:
                    raise NotLinear(f"{what} reads {n.buffer}, which holds reduced values")
                if n.buffer in self.shared or n.buffer in self.local:
                    raise NotLinear(f"{what} reads {n.buffer}, which the combine never fills")
                if n.buffer in self.written:
                    raise NotLinear(f"{what} reads {n.buffer}, which the kernel writes")
            if isinstance(n, Special) and n.kind in ("block", "grid_dim"):
                raise NotLinear(f"{what} uses the block index or grid size")

    def is_linear(self, e: Expr) -> bool:
        """A sum, difference, negation, invariant scaling, uniform selection, shuffle or
        warp sum of the reduced values (or zero)."""
        if isinstance(e, Var):
            return e.name in self.linear_vars
        if isinstance(e, Const):
            return not e.value
        if isinstance(e, Load):
            if e.buffer not in self.linear_arrays:
                return False
            self.invariant(e.index, f"the index of a read of {e.buffer}")
            return True
        if isinstance(e, Binary):
            if e.op in ("+", "-"):
                return self.is_linear(e.left) and self.is_linear(e.right)
            if e.op == "*":
                return (self.is_linear(e.left) and self._scale(e.right)) or \
                    (self._scale(e.left) and self.is_linear(e.right))
            if e.op == "/":
                return self.is_linear(e.left) and self._scale(e.right) and \
                    isinstance(e.type, ScalarType) and e.type.is_float
            return False
        if isinstance(e, Unary):
            return e.op == "-" and self.is_linear(e.operand)
        if isinstance(e, Select):
            self.invariant(e.cond, "a selection's condition")
            return self.is_linear(e.if_true) and self.is_linear(e.if_false)
        if isinstance(e, Shuffle):
            self.invariant(e.lane, "a shuffle's lane")
            return self.is_linear(e.value)
        if isinstance(e, WarpReduce):
            return e.op in ("sum", "add") and self.is_linear(e.value)
        if isinstance(e, Cast):
            return e.type == e.value.type and self.is_linear(e.value)
        if isinstance(e, Call):
            return False
        return False

    def _scale(self, e: Expr) -> bool:
        try:
            self.invariant(e, "a scale factor")
        except NotLinear:
            return False
        return True
