"""The small expression language of specs and launch grids: ``ceil(N / T)``, ``1 / sqrt(D)``.

Names are spec sizes; operators are + - * / // % ** and unary -, with the functions
ceil, floor, sqrt, min, max, abs, log2, and the constants inf and nan. ``/`` is true
division (as a user writing a spec expects); ``ceil``/``floor`` return ``int``.
Parsed with Python's ``ast`` and walked with an explicit whitelist: nothing is ``eval``'d.
"""

from __future__ import annotations

import ast
import math
import operator

from kir.errors import KirError

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS = {
    "ceil": math.ceil, "floor": math.floor, "sqrt": math.sqrt, "min": min, "max": max,
    "abs": abs, "log2": math.log2,
}
_CONSTS = {"inf": math.inf, "nan": math.nan}


def size_names(text: str) -> set[str]:
    """The size names an expression refers to."""
    tree = _parse(str(text))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS) - set(_CONSTS)


def eval_size_expr(text: str | int | float, sizes: dict[str, int | float]) -> int | float:
    """Evaluate ``text`` with ``sizes`` bound; raises KirError naming the unknown size or the
    malformed expression."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return text
    tree = _parse(str(text))
    return _eval(tree.body, sizes, str(text))


def _parse(text: str) -> ast.Expression:
    if len(text) > 1000:
        raise KirError(f"size expression too long ({len(text)} characters)")
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise KirError(f"malformed size expression {text!r}: {exc.msg}") from None


def _eval(node: ast.AST, sizes: dict[str, int | float], text: str) -> int | float:
    # Iteration depth is bounded by _parse's length limit, so recursion is safe here.
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in sizes:
            return sizes[node.id]
        if node.id in _CONSTS:
            return _CONSTS[node.id]
        known = ", ".join(sorted(sizes)) or "none"
        raise KirError(f"unknown size {node.id!r} in expression {text!r} (sizes: {known})")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, sizes, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _eval(node.left, sizes, text)
        right = _eval(node.right, sizes, text)
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise KirError(f"division by zero in size expression {text!r}") from None
        except OverflowError:
            raise KirError(f"size expression {text!r} overflows") from None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _FUNCS and not node.keywords:
        args = [_eval(a, sizes, text) for a in node.args]
        try:
            return _FUNCS[node.func.id](*args)
        except (TypeError, ValueError) as exc:
            raise KirError(f"bad call in size expression {text!r}: {exc}") from None
    raise KirError(f"unsupported construct in size expression {text!r}",
                   hint="use sizes, numbers, + - * / // % **, ceil floor sqrt min max abs log2")
