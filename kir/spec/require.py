"""Size constraints: a spec's ``require = ["M % BM == 0", "N >= 32 and N <= 4096"]``.

A constraint compares size expressions (:mod:`kir.spec.sizeexpr`) with ``== != < <= > >=``
(chains such as ``1 <= K <= 8`` too), joined by ``and`` / ``or`` / ``not``. Kernels without
bounds checks are right only at such sizes; the spec says so once and every size set kir uses
(defaults, ``--size``, ragged and check sizes, the generated module's call-time sizes) is held
to it. Parsed with ``ast`` and walked with a whitelist, never ``eval``'d.
"""

from __future__ import annotations

import ast
import operator
from typing import Mapping

from kir.errors import KirError
from kir.spec.sizeexpr import eval_size_expr, size_names

_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_COMPARE_TEXT = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
                 ast.GtE: ">="}


def _parse(text: str) -> ast.AST:
    if not isinstance(text, str) or not text.strip():
        raise KirError(f"a constraint must be a non-empty string, got {text!r}",
                       hint='e.g. "M % BM == 0"')
    if len(text) > 1000:
        raise KirError(f"constraint too long ({len(text)} characters)")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise KirError(f"malformed constraint {text!r}: {exc.msg}") from None
    _check(tree, text)
    return tree


def _check(node: ast.AST, text: str) -> None:
    """Raise unless ``node`` is a comparison, a boolean combination of them, or ``not``."""
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check(node.operand, text)
    elif isinstance(node, ast.Compare):
        if not all(type(op) in _COMPARE for op in node.ops):
            raise KirError(f"constraint {text!r}: only == != < <= > >= compare sizes")
        for side in (node.left, *node.comparators):
            size_names(ast.unparse(side))  # a malformed side fails here, with its reason
    else:
        raise KirError(f"constraint {text!r} is not a comparison",
                       hint='compare size expressions: "M % BM == 0", "N >= 64"')


def constraint_names(text: str) -> set[str]:
    """The size names a constraint refers to (it is checked on the way)."""
    tree = _parse(text)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                names |= size_names(ast.unparse(side))
    return names


def holds(text: str, sizes: Mapping[str, int | float]) -> bool:
    """Whether the constraint holds at ``sizes``."""
    return _holds(_parse(text), dict(sizes), text)


def _holds(node: ast.AST, sizes: dict, text: str) -> bool:
    if isinstance(node, ast.BoolOp):
        results = (_holds(v, sizes, text) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        return not _holds(node.operand, sizes, text)
    assert isinstance(node, ast.Compare)
    left = eval_size_expr(ast.unparse(node.left), sizes)
    for op, side in zip(node.ops, node.comparators):
        right = eval_size_expr(ast.unparse(side), sizes)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def broken(constraints: tuple[str, ...], sizes: Mapping[str, int | float]) -> list[str]:
    """The constraints that do not hold at ``sizes``, in order."""
    return [c for c in constraints if not holds(c, sizes)]


def to_python(text: str, size: str = "S") -> str:
    """The constraint as a Python expression over ``S["name"]`` (for the generated module,
    which carries no kir): only the whitelisted constructs survive :func:`_parse`."""
    from kir.spec.pyexpr import size_expr_to_python as expr_to_python

    tree = _parse(text)

    def render(node: ast.AST) -> str:
        if isinstance(node, ast.BoolOp):
            joiner = " and " if isinstance(node.op, ast.And) else " or "
            return "(" + joiner.join(render(v) for v in node.values) + ")"
        if isinstance(node, ast.UnaryOp):
            return f"(not {render(node.operand)})"
        assert isinstance(node, ast.Compare)
        parts = [expr_to_python(ast.unparse(node.left), size)]
        for op, side in zip(node.ops, node.comparators):
            parts += [_COMPARE_TEXT[type(op)], expr_to_python(ast.unparse(side), size)]
        return "(" + " ".join(parts) + ")"

    return render(tree)
