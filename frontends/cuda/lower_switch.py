"""Lowering C ``switch`` statements into an ``if`` / ``else if`` chain.

kir's IR has no ``switch``; the common form — every case ends in ``break`` (or ``return`` /
``continue``), the last may simply end — is an ``if`` chain on the value, evaluated once:

    switch (v % 3) {                 let switch_value: i32 = v % 3
      case 0: a(); break;      =>    if switch_value == 0 { a() }
      case 1: case 2: b(); break;    else if switch_value == 1 || switch_value == 2 { b() }
      default: c();                  else { c() }
    }

A case that falls through into the next (a hash's tail: ``case 3: k ^= t[2] << 16; case 2:
...``) makes the switch a run of ``if`` statements on the case it enters at instead: each
case runs when the entry lies between the case after the last one that ended (``break``,
``return``, ``continue``) and itself.

Refused with an error naming the place: a ``break`` of the switch anywhere but at the end
of its case, statements before the first label, a label that is not an integer constant,
a label given twice.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import Binary, Block, Const, Declare, If, Select, Var
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
        cases, ending = [], []
        for k, (labels, stmts, where) in enumerate(groups):
            last, ends = _without_final_break(stmts[-1]) if stmts else (None, False)
            stmts = stmts[:-1] + ([last] if last is not None else [])
            for stmt in stmts:
                stray = _breaks_of_the_switch(stmt)
                if stray:
                    raise self.error("break inside a case of a switch is supported only as "
                                     "the case's last statement", stray[0], UnsupportedError)
            cases.append((labels, stmts, where))
            ending.append(ends or k + 1 == len(groups))
        if all(ending):
            self._lower_case_chain(value_tree, cases)
        else:
            self._lower_falling_cases(value_tree, cases, ending)

    def _switch_value(self, value_tree) -> Var:
        value = self.rvalue(value_tree)
        t = ct.promote(value.type)
        if not t.is_int:
            raise self.error(f"switch on a {value.type} value (C needs an integer)",
                             value_tree)
        name = self.fresh("switch_value")  # `switch` itself is a C keyword
        self.emit(Declare(name, t, ct.convert(value, t), loc=self.cur_loc))
        return Var(name, t)

    def _label_tests(self, value: Var, labels: list, seen: dict) -> list:
        """``value == label`` for each label of a case (None, ``default``, has none)."""
        tests = []
        for label in labels:
            if label is None:
                continue
            number = self.constant(label, "a case label")
            if not isinstance(number, int) or isinstance(number, bool):
                raise self.error("a case label must be an integer constant", label)
            if number in seen:
                raise self.error(f"case {number} appears twice in this switch", label)
            seen[number] = label
            tests.append(ct.binary("==", value, ct.convert(Const(number, I32), value.type)))
        return tests

    def _lower_falling_cases(self, value_tree, cases, ending) -> None:
        """A switch whose cases fall through: the index of the case it enters at, then each
        case under ``start <= entry <= k``, ``start`` the case after the last that ended
        before it."""
        loc = self.cur_loc
        value = self._switch_value(value_tree)
        seen: dict[int, object] = {}
        default = next((k for k, (labels, _s, _w) in enumerate(cases) if None in labels),
                       len(cases))
        entry_expr = Const(default, I32)
        tests = [self._label_tests(value, labels, seen) for labels, _s, _w in cases]
        for k in range(len(cases) - 1, -1, -1):
            for test in tests[k]:
                entry_expr = Select(test, Const(k, I32), entry_expr, I32)
        entry = Var(self.fresh("switch_entry"), I32)
        self.emit(Declare(entry.name, I32, entry_expr, loc=loc))
        start = 0
        for k, (_labels, stmts, _where) in enumerate(cases):
            runs = ct.binary("&&", ct.binary("<=", Const(start, I32), entry),
                             ct.binary("<=", entry, Const(k, I32)))
            self.emit(If(runs, self._case_block(stmts), loc=loc))
            if ending[k]:
                start = k + 1

    def _lower_case_chain(self, value_tree, cases) -> None:
        loc = self.cur_loc
        value = self._switch_value(value_tree)
        seen: dict[int, object] = {}
        branches, default = [], None
        for labels, stmts, where in cases:
            if None in labels:
                default = stmts
            tests = self._label_tests(value, labels, seen)
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
