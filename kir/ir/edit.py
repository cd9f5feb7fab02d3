"""Edits of kir IR trees that rules, folding and analyses share: replace a statement, map
statements, substitute or rename a variable, and the expressions a statement evaluates itself.

Pure functions: each returns a new tree (the IR is immutable) and walks it iteratively.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from kir.ir.nodes import (
    Assert,
    Assign,
    Atomic,
    Block,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Node,
    Stmt,
    Store,
    Var,
    While,
    transform,
)


def replace_stmt(kernel: Kernel, old: Stmt, new: Stmt | list[Stmt]) -> Kernel:
    """Replace the statement ``old`` (matched by identity) with ``new`` (one statement, or
    several spliced into the enclosing block)."""
    replacement = list(new) if isinstance(new, list) else [new]

    def visit(node: Node) -> Node | None:
        if isinstance(node, Block) and any(s is old for s in node.stmts):
            stmts: list[Stmt] = []
            for s in node.stmts:
                stmts.extend(replacement if s is old else [s])
            return dataclasses.replace(node, stmts=tuple(stmts))
        return None

    # transform rebuilds parents bottom-up, so identity of `old` must be checked before its
    # block is rebuilt: blocks are visited after their children, and `old` itself is kept
    # unchanged by transform unless a descendant changed (it has none that we change).
    body = transform(kernel.body, visit)
    if body is kernel.body:
        raise ValueError("statement to replace not found")
    return dataclasses.replace(kernel, body=body)


def map_stmts(node: Node, fn: Callable[[Stmt], Stmt | list[Stmt] | None]) -> Node:
    """Rewrite statements bottom-up; ``fn`` may return one statement, a list spliced into
    the enclosing block, or None to keep the statement."""
    def visit(n: Node) -> Node | None:
        if isinstance(n, Block):
            out: list[Stmt] = []
            changed = False
            for s in n.stmts:
                r = fn(s)
                if r is None:
                    out.append(s)
                else:
                    changed = True
                    out.extend(r if isinstance(r, list) else [r])
            return dataclasses.replace(n, stmts=tuple(out)) if changed else None
        return None
    return transform(node, visit)


def own_exprs(stmt: Stmt) -> list[Expr]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(stmt, Declare):
        return [stmt.init] if stmt.init is not None else []
    if isinstance(stmt, Assign):
        return [stmt.value]
    if isinstance(stmt, (Store, Atomic)):
        return [stmt.index, stmt.value]
    if isinstance(stmt, For):
        return [stmt.init, stmt.cond, stmt.update]
    if isinstance(stmt, (If, While, Assert)):
        return [stmt.cond]
    return []


def substitute(node: Node, name: str, value: Expr) -> Node:
    """Replace reads of variable ``name`` with ``value``."""
    return transform(node, lambda n: value if isinstance(n, Var) and n.name == name else None)


def rename_var(node: Node, old: str, new: str) -> Node:
    """Rename a variable everywhere it is read, written or declared."""
    def visit(n: Node) -> Node | None:
        if isinstance(n, Var) and n.name == old:
            return dataclasses.replace(n, name=new)
        if isinstance(n, (Assign, Declare)) and n.name == old:
            return dataclasses.replace(n, name=new)
        if isinstance(n, For) and n.var == old:
            return dataclasses.replace(n, var=new)
        if isinstance(n, Atomic) and n.result == old:
            return dataclasses.replace(n, result=new)
        return None
    return transform(node, visit)
