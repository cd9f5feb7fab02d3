"""Which loads from shared memory every thread of a block reads alike.

A block often decides something once and tells every thread through shared memory: one
thread writes a flag (``is_last = ticket == gridDim.x - 1``), a barrier follows, and every
thread branches on the flag, barriers inside the branch included. The barrier check
(:mod:`kir.ir.verify`) counts every load as possibly different between threads; it asks
this module which loads it need not.

A load of a shared buffer reads alike in every thread when its index does (the barrier check
judges the index as any other expression) and no thread can write that buffer
between the block barrier before the load and the one after it: on every path from the last
barrier to the load no statement stores to it (so every thread reads what was there at the
barrier), and no store to it follows the load before the next barrier (else a fast thread
could store before a slow one loads). Branches merge by intersection, and a loop's body is
walked twice so that its end meets its start. Global memory is never uniform this way:
other blocks may write it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kir.ir.edit import own_exprs
from kir.ir.nodes import (
    Alloc,
    Atomic,
    Barrier,
    Block,
    Expr,
    For,
    If,
    Kernel,
    Load,
    MatrixFill,
    MatrixLoad,
    MatrixStore,
    Stmt,
    Store,
    While,
)

# Past this nesting depth the walk gives up and calls no load uniform (always sound).
MAX_DEPTH = 200


@dataclass
class _State:
    stable: frozenset[str]   # shared buffers no thread can have stored to since the barrier
    loaded: frozenset[str]   # buffers read as uniform since the barrier


@dataclass
class _Walk:
    shared: frozenset[str]
    candidates: dict[int, str] = field(default_factory=dict)  # id(load) -> buffer
    # Loads also met where their buffer was not stable: rules share unchanged subtrees, so
    # one Load object may stand in two places, and ids are all the barrier check sees.
    elsewhere: set[int] = field(default_factory=set)
    racy: set[str] = field(default_factory=set)

    def stmts(self, stmts: tuple[Stmt, ...], state: _State, depth: int) -> _State:
        if depth > MAX_DEPTH:
            raise RecursionError
        for stmt in stmts:
            state = self.stmt(stmt, state, depth)
        return state

    def stmt(self, stmt: Stmt, state: _State, depth: int) -> _State:
        if isinstance(stmt, Block):
            return self.stmts(stmt.stmts, state, depth + 1)
        if isinstance(stmt, Barrier):
            return _State(self.shared, frozenset()) if stmt.scope == "block" else state
        if isinstance(stmt, If):
            state = self.reads(stmt.cond, state)
            then = self.stmts(stmt.then.stmts, state, depth + 1)
            orelse = self.stmts(stmt.orelse.stmts, state, depth + 1) \
                if stmt.orelse is not None else state
            return _merge(then, orelse)
        if isinstance(stmt, (For, While)):
            if isinstance(stmt, For):
                state = self.reads(stmt.init, state)
            once = self.loop_pass(stmt, state, depth)
            twice = self.loop_pass(stmt, _merge(state, once), depth)
            return _merge(state, twice)
        for expr in _exprs(stmt):
            state = self.reads(expr, state)
        written = getattr(stmt, "buffer", None) \
            if isinstance(stmt, (Store, Atomic, MatrixStore)) else None
        if written in self.shared:
            if written in state.loaded:
                self.racy.add(written)
            state = _State(state.stable - {written}, state.loaded)
        return state

    def loop_pass(self, loop: For | While, state: _State, depth: int) -> _State:
        state = self.reads(loop.cond, state)
        state = self.stmts(loop.body.stmts, state, depth + 1)
        return self.reads(loop.update, state) if isinstance(loop, For) else state

    def reads(self, expr: Expr, state: _State) -> _State:
        for e in expr.walk():
            if isinstance(e, Load) and e.buffer in state.stable:
                self.candidates[id(e)] = e.buffer
                state = _State(state.stable, state.loaded | {e.buffer})
            elif isinstance(e, Load):
                self.elsewhere.add(id(e))
        return state


def uniform_shared_loads(kernel: Kernel) -> frozenset[int]:
    """The ids of the :class:`Load` nodes of ``kernel`` that every thread of a block reads
    alike (see the module docstring)."""
    shared = frozenset(n.name for n in kernel.body.walk()
                       if isinstance(n, Alloc) and n.space == "shared")
    if not shared:
        return frozenset()
    walk = _Walk(shared)
    try:
        walk.stmts(kernel.body.stmts, _State(frozenset(), frozenset()), 0)
    except RecursionError:
        return frozenset()
    return frozenset(i for i, buffer in walk.candidates.items()
                     if buffer not in walk.racy and i not in walk.elsewhere)


def _merge(a: _State, b: _State) -> _State:
    return _State(a.stable & b.stable, a.loaded | b.loaded)


def _exprs(stmt: Stmt) -> list[Expr]:
    """The expressions a statement evaluates (:func:`kir.ir.edit.own_exprs`, which leaves
    out a matrix statement's fill value, index and stride)."""
    if isinstance(stmt, (MatrixFill, MatrixLoad, MatrixStore)):
        return [stmt.value] if isinstance(stmt, MatrixFill) else [stmt.index, stmt.stride]
    return own_exprs(stmt)
