"""Memory-access helpers shared by the memory rules (promote, stage, pad, transpose, ...).

* :func:`single_defs` / :func:`inline_locals`: locals with exactly one definition (a
  ``Declare`` with an initializer, never assigned) and their transitive substitution, so an
  index such as ``o_idx`` (``let o_idx = off + row * d + x``) can be judged and rebuilt
  outside the loop that declares it.
* :func:`index_poly`: the affine form (:mod:`kir.analysis.affine`) of an index over loop
  variables, parameters, hardware indices and invariant locals.
* :func:`access_chains`: every load/store/atomic of a buffer under a statement, with the
  enclosing statements (and the branch taken through each ``if``) between there and it.
* :func:`shared_bytes`: the shared memory a kernel's block already uses, for rules that add
  shared arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kir.analysis.affine import Poly, special_atom, to_poly
from kir.analysis.walk import own_exprs
from kir.ir import (
    Alloc,
    Atomic,
    Block,
    Expr,
    For,
    If,
    Kernel,
    Load,
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
from kir.ir.types import PointerType, ScalarType


def inline_locals(expr: Expr, defs: Mapping[str, Expr], names: set[str] | None = None) -> Expr:
    """Substitute single-definition locals (only those in ``names`` when given) by their
    initializers, transitively."""
    for _ in range(64):  # definitions nest a few levels at most; the bound stops cycles
        hit = False

        def visit(n: Node) -> Node | None:
            nonlocal hit
            if isinstance(n, Var) and n.name in defs and (names is None or n.name in names):
                hit = True
                return defs[n.name]
            return None
        expr = transform(expr, visit)  # type: ignore[assignment]
        if not hit:
            break
    return expr


def index_poly(expr: Expr, defs: Mapping[str, Expr] | None = None) -> Poly | None:
    """The polynomial form of ``expr``: single-definition locals substituted (when ``defs``
    is given), every other variable an atom; None when not affine."""
    if defs:
        expr = inline_locals(expr, defs)
    return to_poly(expr, lambda name: {(name,): 1})


def thread_atoms(kernel: Kernel) -> list[str]:
    """The thread-index atoms (``%thread.x`` ...) of the axes with more than one thread."""
    return [f"%thread.{axis}" for axis, dim in zip("xyz", kernel.launch.block) if dim > 1]


def involves_all_threads(kernel: Kernel, poly: Poly) -> bool:
    """Whether every thread axis of the block appears (degree one) in ``poly``: the cheap
    sign that different threads of a block touch different elements."""
    for atom in thread_atoms(kernel):
        if not any(atom in mono and mono.count(atom) == 1 for mono in poly):
            return False
    return True


def uses_thread(expr: Expr) -> bool:
    return any(isinstance(n, Special) and n.kind in ("thread", "lane", "warp")
               for n in expr.walk())


def buffer_elem(kernel: Kernel, name: str) -> tuple[ScalarType, str] | None:
    """Element type and address space of a buffer parameter or an Alloc."""
    param = kernel.param(name)
    if param is not None and isinstance(param.type, PointerType):
        return param.type.elem, param.type.space  # type: ignore[return-value]
    for n in kernel.body.walk():
        if isinstance(n, Alloc) and n.name == name and isinstance(n.elem, ScalarType):
            return n.elem, n.space
    return None


def find_alloc(kernel: Kernel, name: str) -> Alloc | None:
    return next((n for n in kernel.body.walk() if isinstance(n, Alloc) and n.name == name),
                None)


@dataclass(frozen=True)
class Access:
    """One access of a buffer: the Load expression or the Store/Atomic statement, the
    statement holding it, and the enclosing statements from the root down, each paired with
    the branch taken ("then"/"else" for an If, "" otherwise)."""

    node: Node
    stmt: Stmt
    chain: tuple[tuple[Stmt, str], ...]

    @property
    def index(self) -> Expr:
        return self.node.index  # type: ignore[attr-defined]

    @property
    def is_write(self) -> bool:
        return isinstance(self.node, (Store, Atomic))


def access_chains(root: Stmt, buffer: str) -> list[Access]:
    """Every access of ``buffer`` under ``root`` (pre-order), with its enclosing chain."""
    out: list[Access] = []
    stack: list[tuple[Stmt, tuple[tuple[Stmt, str], ...]]] = [(root, ())]
    while stack:
        stmt, chain = stack.pop()
        for expr in own_exprs(stmt):
            for n in expr.walk():
                if isinstance(n, Load) and n.buffer == buffer:
                    out.append(Access(n, stmt, chain))
        if isinstance(stmt, (Store, Atomic)) and stmt.buffer == buffer:
            out.append(Access(stmt, stmt, chain))
        children: list[tuple[Stmt, tuple]] = []
        if isinstance(stmt, Block):
            children = [(s, chain) for s in stmt.stmts]
        elif isinstance(stmt, If):
            children = [(stmt.then, chain + ((stmt, "then"),))]
            if stmt.orelse is not None:
                children.append((stmt.orelse, chain + ((stmt, "else"),)))
        elif isinstance(stmt, (For, While)):
            children = [(stmt.body, chain + ((stmt, ""),))]
        stack.extend(reversed(children))
    return out


def special_atoms(kernel: Kernel) -> set[str]:
    """Atoms of hardware indices as :func:`index_poly` names them."""
    return {special_atom(n) for n in kernel.body.walk() if isinstance(n, Special)}


def matrix_buffers(node: Node) -> set[str]:
    """Buffers a MatrixLoad or MatrixStore under ``node`` accesses: rules that change a
    buffer's layout or indices must leave these alone (or rewrite the fragment's index and
    stride too)."""
    return {n.buffer for n in node.walk() if isinstance(n, (MatrixLoad, MatrixStore))}


def shared_bytes(kernel: Kernel) -> int:
    """Bytes of shared memory the kernel's block uses: its static shared arrays and the
    launch's dynamic bytes."""
    total = kernel.launch.shared_bytes
    for n in kernel.body.walk():
        if isinstance(n, Alloc) and n.space == "shared" and not n.dynamic:
            total += n.size * n.elem.nbytes
    return total
