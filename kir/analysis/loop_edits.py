"""Loop-rewriting helpers shared by the loop rules (unroll, tile, interchange, fuse, hoist).

``copy_body`` clones a loop body for one more use in the same kernel: every name declared in
it gets a fresh name, every nested loop a fresh label, and chosen variables are replaced by
expressions (the loop variable advanced by k steps). Source locations are kept.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from kir.analysis.walk import all_names, loop_labels
from kir.ir import (
    Alloc,
    Assign,
    Atomic,
    Barrier,
    Fence,
    Block,
    Break,
    Continue,
    Declare,
    Expr,
    For,
    Kernel,
    Load,
    MatrixFill,
    MatrixLoad,
    MatrixMultiplyAccumulate,
    MatrixStore,
    Node,
    Return,
    Stmt,
    Store,
    Var,
    While,
    transform,
)


class Namer:
    """Hands out fresh local names and loop labels for one rewrite of ``kernel``."""

    def __init__(self, kernel: Kernel) -> None:
        self.names = set(all_names(kernel))
        self.labels = set(loop_labels(kernel))

    def name(self, base: str) -> str:
        if base not in self.names:
            self.names.add(base)
            return base
        i = 1
        while f"{base}_{i}" in self.names:
            i += 1
        self.names.add(f"{base}_{i}")
        return f"{base}_{i}"

    def label(self) -> str:
        i = len(self.labels)
        while f"L{i}" in self.labels:
            i += 1
        self.labels.add(f"L{i}")
        return f"L{i}"


def copy_body(body: Block, namer: Namer, subst: Mapping[str, Expr]) -> Block:
    """A copy of ``body`` with declared names (locals, arrays, matrix fragments) renamed,
    nested loops relabelled and the variables in ``subst`` replaced."""
    renames: dict[str, str] = {}
    for n in body.walk():
        if isinstance(n, (Declare, Alloc, MatrixFill, MatrixLoad)):
            renames[n.name] = namer.name(n.name)
        elif isinstance(n, For):
            renames[n.var] = namer.name(n.var)
    labels = {n.label: namer.label() for n in body.walk() if isinstance(n, For)}

    def visit(n: Node) -> Node | None:
        if isinstance(n, Var):
            if n.name in subst:
                return subst[n.name]
            if n.name in renames:
                return dataclasses.replace(n, name=renames[n.name])
            return None
        if isinstance(n, (Declare, Assign, Alloc)) and n.name in renames:
            return dataclasses.replace(n, name=renames[n.name])
        if isinstance(n, (Load, Store, Atomic)) and n.buffer in renames:
            n = dataclasses.replace(n, buffer=renames[n.buffer])
            if isinstance(n, Atomic) and n.result in renames:
                n = dataclasses.replace(n, result=renames[n.result])
            return n
        if isinstance(n, Atomic) and n.result in renames:
            return dataclasses.replace(n, result=renames[n.result])
        if isinstance(n, MatrixMultiplyAccumulate):
            return dataclasses.replace(n, **{f: renames.get(getattr(n, f), getattr(n, f))
                                             for f in ("acc", "a", "b")})
        if isinstance(n, (MatrixFill, MatrixLoad, MatrixStore)):
            if n.name in renames:
                n = dataclasses.replace(n, name=renames[n.name])
            if not isinstance(n, MatrixFill) and n.buffer in renames:
                n = dataclasses.replace(n, buffer=renames[n.buffer])
            return n
        if isinstance(n, For):
            return dataclasses.replace(n, label=labels[n.label],
                                       var=renames.get(n.var, n.var))
        return None
    return transform(body, visit)  # type: ignore[return-value]


def contains(node: Node, kinds: tuple[type, ...]) -> bool:
    return any(isinstance(n, kinds) for n in node.walk())


def has_barrier(node: Node) -> bool:
    """Any barrier or memory fence under ``node``: points that order memory between threads,
    across which the rules that reorder a loop's statements (fuse, interchange, gather
    loads) do not move them."""
    return contains(node, (Barrier, Fence))


def has_exit(node: Node) -> bool:
    """Any return, break or continue (of any loop) under ``node``."""
    return contains(node, (Return, Break, Continue))


def parent_block(kernel: Kernel, stmt: Stmt) -> Block | None:
    """The block whose statement list holds ``stmt`` (by identity)."""
    for n in kernel.body.walk():
        if isinstance(n, Block) and any(s is stmt for s in n.stmts):
            return n
    return None


def int_assume(scalars: Mapping[str, object]) -> dict[str, int]:
    """The integer-valued spec scalars, as :mod:`kir.analysis.deps` takes them."""
    return {k: int(v) for k, v in scalars.items()
            if isinstance(v, int) and not isinstance(v, bool)}


__all__ = ["Namer", "copy_body", "has_barrier", "has_exit", "parent_block",
           "int_assume", "contains", "While"]
