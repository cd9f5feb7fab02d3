"""A pointer chosen at run time between two buffers (a mixin of the Lowerer).

vLLM's fused q/k norm writes through ``T* p = is_q ? q + a : k + b;``. kir's IR has no pointer
values: while lowering, a pointer is a buffer and an offset into it, so a choice between two
buffers has no IR of its own. It is lowered by choosing once, where the source chooses, and
lowering what follows once per buffer::

    bool chosen = is_q;
    if (chosen) { T* p = q + a; <the rest of the block> }
    else        { T* p = k + b; <the rest of the block> }

Each copy reads and writes the one buffer the source does on that path, and, as in C, the
condition is evaluated once and only the chosen arm after it. Refused with the original
error where this would not be the same program: arms with side effects, a choice made
outside a statement list (a global initializer), and copies holding a barrier (each copy's
barrier would be reached by part of the block). Each choice doubles the code after it, so
at most ``MAX_CHOICES`` are nested.
"""

from __future__ import annotations

import copy

import dataclasses

from kir.errors import UnsupportedError
from kir.ir import (
    Assign,
    Barrier,
    Binary,
    Block,
    Cast,
    Const,
    Declare,
    Expr,
    For,
    If,
    Kernel,
    Special,
    Unary,
    Var,
)
from kir.ir.types import BOOL
from kir.ir.edit import map_stmts
from kir.ir.verify import exchanges_lanes, lane_varying_locals
from kir.ir.verify_matrix import MATRIX_STMTS

MAX_CHOICES = 3


class PointerChoice(UnsupportedError):
    """Raised by a ``?:`` whose arms point into different buffers; the statement list being
    lowered catches it (:meth:`PointerChoiceMixin.choose_pointer`). Uncaught, or where the
    choice cannot be lowered, it is the located refusal it always was."""

    def __init__(self, error: UnsupportedError, tree) -> None:
        super().__init__(error.message, error.loc, hint=error.hint,
                         source_line=error.source_line)
        self.tree = tree
        self.tried = False


class PointerChoiceMixin:
    pointer_choices = 0  # choices being lowered around the current statement

    def choose_pointer(self, stmts: list, k: int, choice: PointerChoice) -> bool:
        """Lower ``stmts[k:]`` (``stmts[k]`` holds ``choice``) as two copies under one
        condition; False (nothing emitted) where that would not keep the program's meaning."""
        choice.tried = True
        path = _path_to(stmts[k], choice.tree)
        if path is None or self.pointer_choices >= MAX_CHOICES:
            return False
        cond_tree, a_tree, b_tree = choice.tree.children
        before, (cond, _decided) = self.capture(lambda: self.truth_of(cond_tree))
        chosen = self.fresh("chosen")
        branches = []
        self.pointer_choices += 1
        try:
            for arm in (a_tree, b_tree):
                first = _replaced(stmts[k], path, arm)
                branches.append(self.scoped_block(
                    lambda first=first: self.lower_stmt_list([first, *stmts[k + 1:]])))
        finally:
            self.pointer_choices -= 1
        if any(isinstance(s, Barrier) for branch in branches for s in branch.walk()):
            return False
        self.out.extend(before)
        self.emit(Declare(chosen, BOOL, cond, loc=self.loc_of(stmts[k])))
        self.emit(If(Var(chosen, BOOL), branches[0], branches[1]))
        self.__dict__.setdefault("pointer_choices_made", {})[chosen] = (cond, choice)
        return True

    def settle_choices(self, kernel: Kernel) -> Kernel:
        """``kernel`` once lowered: a choice nested in another on the same condition (``p``
        and then ``w`` chosen by ``is_q``) keeps only its branch that can run; and where a
        copy exchanges values between the lanes of a warp (shuffles, warp reductions, tensor
        core tiles), the condition must be the same for the whole warp, or the lanes of one
        warp would run different copies of the exchange: the refusal then stands."""
        made = self.__dict__.get("pointer_choices_made")
        if not made:
            return kernel
        assigned = {n.name for n in kernel.body.walk() if isinstance(n, Assign)} | \
            {n.var for n in kernel.body.walk() if isinstance(n, For)}
        folded: set[str] = set()
        body = _fold(kernel.body, made, assigned, (), folded)
        if folded:  # their flags are read nowhere now
            body = map_stmts(body, lambda s: [] if isinstance(s, Declare)
                             and s.name in folded else None)
        kernel = dataclasses.replace(kernel, body=body)
        exchanging = {name for name, _ in _choice_exchanges(body, made)}
        differing = sorted(exchanging & lane_varying_locals(kernel)) if exchanging else ()
        if differing:
            refused = made[differing[0]][1]
            raise UnsupportedError(
                refused.message + ", and the code after it exchanges values between the "
                "lanes of a warp while the condition may differ between them", refused.loc,
                source_line=refused.source_line,
                hint="index one buffer with offsets where you can, or make the condition "
                     "the same for every lane of a warp (a warp per head)")
        return kernel


def _stable(e: Expr, assigned: set[str]) -> bool:
    """``e`` computed from locals never assigned again, constants and hardware indices only:
    the same wherever in the kernel a thread evaluates it."""
    if isinstance(e, Var):
        return e.name not in assigned
    if isinstance(e, (Const, Special)):
        return True
    if isinstance(e, (Binary, Unary, Cast)):
        return all(_stable(c, assigned) for c in e.children())
    return False


def _fold(block: Block, made: dict, assigned: set[str], known: tuple, folded: set[str]
          ) -> Block:
    """``block`` with each choice whose condition an enclosing choice already decided
    replaced by its branch that runs (``known``: (condition, value) pairs; the choices
    replaced are added to ``folded``)."""
    out = []
    for stmt in block.stmts:
        if isinstance(stmt, If) and isinstance(stmt.cond, Var) and stmt.cond.name in made:
            cond = made[stmt.cond.name][0]
            value = next((v for c, v in known if c == cond), None) \
                if _stable(cond, assigned) else None
            if value is not None:
                folded.add(stmt.cond.name)
                taken = stmt.then if value else stmt.orelse
                out.extend(_fold(taken, made, assigned, known, folded).stmts)
                continue
            then = _fold(stmt.then, made, assigned, ((cond, True), *known), folded)
            orelse = _fold(stmt.orelse, made, assigned, ((cond, False), *known), folded)
            out.append(If(stmt.cond, then, orelse, loc=stmt.loc))
            continue
        kids = stmt.children()
        if any(isinstance(k, Block) for k in kids):
            stmt = stmt.with_children([_fold(k, made, assigned, known, folded)
                                       if isinstance(k, Block) else k for k in kids])
        out.append(stmt)
    return Block(tuple(out), loc=block.loc)


def _choice_exchanges(body: Block, made: dict):
    """(choice, statement) for each statement under a choice that exchanges values between
    lanes: a shuffle or warp reduction in it, a warp barrier, a tensor-core tile step."""
    for node in body.walk():
        if not (isinstance(node, If) and isinstance(node.cond, Var)
                and node.cond.name in made):
            continue
        for branch in (node.then, node.orelse):
            for s in branch.walk():
                if isinstance(s, Barrier) and s.scope == "warp" or \
                        isinstance(s, MATRIX_STMTS) or \
                        not isinstance(s, Block) and exchanges_lanes(s):
                    yield node.cond.name, s


def _path_to(tree, target) -> list[int] | None:
    """Child indices leading from ``tree`` to the node ``target`` (by identity), or None."""
    if tree is target:
        return []
    for i, child in enumerate(getattr(tree, "children", ())):
        found = _path_to(child, target)
        if found is not None:
            return [i, *found]
    return None


def _replaced(tree, path: list[int], arm):
    """A copy of ``tree`` with the node at ``path`` replaced by (a copy of) ``arm`` (a subtree
    keeps its own grouping: no parentheses are needed)."""
    if not path:
        return copy.deepcopy(arm)
    made = copy.deepcopy(tree)
    parent = made
    for i in path[:-1]:
        parent = parent.children[i]
    parent.children[path[-1]] = copy.deepcopy(arm)
    return made

