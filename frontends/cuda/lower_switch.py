"""Lowering C ``switch`` statements into an ``if`` / ``else if`` chain.

kir's IR has no ``switch``; the common form — every case ends in ``break`` (or ``return`` /
``continue``), the last may simply end — is an ``if`` chain on the value, evaluated once:

    switch (v % 3) {                 let switch_value: i32 = v % 3
      case 0: a(); break;      =>    if switch_value == 0 { a() }
      case 1: case 2: b(); break;    else if switch_value == 1 || switch_value == 2 { b() }
      default: c();                  else { c() }
    }

Refused with an error naming the place: a case that falls through into the next one, a
``break`` of the switch anywhere but at the end of its case, statements before the first
label, a label that is not an integer constant, a label given twice.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import Binary, Block, Const, Declare, If, Var
from kir.ir.types import BOOL, I32

_ENDS_CASE = ("break_stmt", "return_stmt", "continue_stmt")
_OWN_BREAKS = ("for_stmt", "while_stmt", "do_stmt", "switch_stmt")  # breaks inside are theirs


def _labels_and_first(tree) -> tuple[list, object]:
    """``case 1: case 2: stmt`` -> ([label trees or None for default], stmt)."""
    labels = []
    while isinstance(tree, Tree) and tree.data == "case_stmt":
        keyword, *rest = tree.children
        labels.append(None if str(keyword) == "default" else rest[0])
        tree = rest[-1]
    return labels, tree


def _breaks_of_the_switch(tree) -> list:
    """``break`` statements in ``tree`` that would leave the switch (not an inner loop's)."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, Tree):
            continue
        if node.data == "break_stmt":
            found.append(node)
        elif node.data not in _OWN_BREAKS or node is tree:
            stack.extend(node.children)
    return found


def _without_final_break(stmt) -> tuple[object, bool]:
    """``stmt`` without the ``break`` that ends its case (also at the end of a ``{...}``
    block), and whether the case ends there (break, return or continue) instead of falling
    through."""
    if not isinstance(stmt, Tree):
        return stmt, False
    if stmt.data == "break_stmt":
        return None, True
    if stmt.data in _ENDS_CASE:
        return stmt, True
    if stmt.data == "compound" and stmt.children:
        last, ends = _without_final_break(stmt.children[-1])
        kept = stmt.children[:-1] + ([last] if last is not None else [])
        return Tree("compound", kept, stmt.meta), ends
    return stmt, False


class SwitchMixin:
    """``_s_switch_stmt`` for the statement lowerer."""

    def _s_switch_stmt(self, tree) -> None:
        _kw, value_tree, body_tree = tree.children
        items = body_tree.children if isinstance(body_tree, Tree) and \
            body_tree.data == "compound" else [body_tree]
        groups: list[tuple[list, list, object]] = []  # (labels, statements, first tree)
        for item in items:
            if isinstance(item, Tree) and item.data == "case_stmt":
                labels, first = _labels_and_first(item)
                groups.append((labels, [first], item))
            elif groups:
                groups[-1][1].append(item)
            elif not (isinstance(item, Tree) and item.data == "empty_stmt"):
                raise self.error("statements before the first case label of a switch are "
                                 "never run", item, UnsupportedError)
        cases = []
        for k, (labels, stmts, where) in enumerate(groups):
            last, ends = _without_final_break(stmts[-1]) if stmts else (None, False)
            if not ends and k + 1 < len(groups):
                raise self.error("a case falling through into the next is not supported: end "
                                 "it with break", where, UnsupportedError)
            stmts = stmts[:-1] + ([last] if last is not None else [])
            for stmt in stmts:
                stray = _breaks_of_the_switch(stmt)
                if stray:
                    raise self.error("break inside a case of a switch is supported only as "
                                     "the case's last statement", stray[0], UnsupportedError)
            cases.append((labels, stmts, where))
        self._lower_case_chain(value_tree, cases)

    def _lower_case_chain(self, value_tree, cases) -> None:
        loc = self.cur_loc
        value = self.rvalue(value_tree)
        t = ct.promote(value.type)
        if not t.is_int:
            raise self.error(f"switch on a {value.type} value (C needs an integer)",
                             value_tree)
        name = self.fresh("switch_value")  # `switch` itself is a C keyword
        self.emit(Declare(name, t, ct.convert(value, t), loc=loc))
        seen: dict[int, object] = {}
        branches, default = [], None
        for labels, stmts, where in cases:
            tests = []
            for label in labels:
                if label is None:
                    default = stmts
                    continue
                number = self.constant(label, "a case label")
                if not isinstance(number, int) or isinstance(number, bool):
                    raise self.error("a case label must be an integer constant", label)
                if number in seen:
                    raise self.error(f"case {number} appears twice in this switch", label)
                seen[number] = label
                tests.append(ct.binary("==", Var(name, t), ct.convert(Const(number, I32), t)))
            if tests:
                cond = tests[0]
                for test in tests[1:]:
                    cond = Binary("||", cond, test, BOOL)
                branches.append((cond, stmts))
        orelse = self._case_block(default) if default is not None else None
        for cond, stmts in reversed(branches):
            orelse = Block((If(cond, self._case_block(stmts), orelse, loc=loc),))
        if orelse is not None:
            self.out.extend(orelse.stmts)

    def _case_block(self, stmts: list) -> Block:
        return self.scoped_block(lambda: self.lower_stmt_list(stmts))
