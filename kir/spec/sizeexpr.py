"""The small expression language of specs and launch grids: ``ceil(N / T)``, ``1 / sqrt(D)``.

Names are spec sizes; operators are + - * / // % ** and unary -, with the functions
ceil, floor, sqrt, min, max, abs, log2, and the constants inf and nan. ``/`` is true
division (as a user writing a spec expects); ``ceil``/``floor`` return ``int``.
Parsed with Python's ``ast`` and walked with an explicit whitelist: nothing is ``eval``'d.

Bounded: an expression is at most ``MAX_EXPR_CHARS`` characters, and no integer along the
way may exceed ``MAX_INT_BITS`` bits (``10 ** 10 ** 10`` would otherwise compute a number of
33 billion bits): a power is refused before it is computed when its result would be larger.
"""

from __future__ import annotations

import ast
import math
import operator
import warnings

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
MAX_EXPR_CHARS = 1000
MAX_INT_BITS = 256  # far past any size (2^63 elements), far short of a slow computation


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
    if len(text) > MAX_EXPR_CHARS:
        raise KirError(f"size expression too long ({len(text)} characters, at most "
                       f"{MAX_EXPR_CHARS})")
    try:
        with warnings.catch_warnings():  # "invalid decimal literal" and such: the error says
            warnings.simplefilter("ignore")
            return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise KirError(f"malformed size expression {text!r}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # deep nesting, NUL bytes
        raise KirError(f"malformed size expression {text!r}: {type(exc).__name__}") from None


def _too_big(value: int | float, text: str) -> KirError | None:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        return KirError(f"size expression {text!r} is too large (a value of "
                        f"{value.bit_length()} bits along the way; at most {MAX_INT_BITS})")
    return None


def _power(base: int | float, exponent: int | float, text: str) -> int | float:
    """``base ** exponent``, refused before it is computed when the result would exceed
    MAX_INT_BITS (integers) or overflow (floats raise OverflowError, reported by the caller)."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 \
            and abs(base) > 1 and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
        raise KirError(f"size expression {text!r} is too large ({base} ** {exponent} has more "
                       f"than {MAX_INT_BITS} bits)")
    return base ** exponent


def _eval(node: ast.AST, sizes: dict[str, int | float], text: str) -> int | float:
    # Iteration depth is bounded by _parse's length limit, so recursion is safe here.
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        error = _too_big(node.value, text)
        if error:
            raise error
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
            if isinstance(node.op, ast.Pow):
                value = _power(left, right, text)
            else:
                value = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise KirError(f"division by zero in size expression {text!r}") from None
        except OverflowError:
            raise KirError(f"size expression {text!r} overflows") from None
        except TypeError:  # a complex number from a negative base's fractional power
            raise KirError(f"size expression {text!r} has no real value") from None
        error = _too_big(value, text) if not isinstance(value, complex) else \
            KirError(f"size expression {text!r} has no real value")
        if error:
            raise error
        return value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _FUNCS and not node.keywords:
        args = [_eval(a, sizes, text) for a in node.args]
        try:
            value = _FUNCS[node.func.id](*args)
        except (TypeError, ValueError, OverflowError) as exc:
            # ceil(1e400) is ceil(inf): OverflowError
            raise KirError(f"bad call in size expression {text!r}: {exc}") from None
        error = _too_big(value, text)
        if error:
            raise error
        return value
    raise KirError(f"unsupported construct in size expression {text!r}",
                   hint="use sizes, numbers, + - * / // % **, ceil floor sqrt min max abs log2")
