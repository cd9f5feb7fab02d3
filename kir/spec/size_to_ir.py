"""Size expressions (:mod:`kir.spec.sizeexpr`) as kir IR over a kernel's own scalar parameters.

A rule that needs a launch size at run time (coarsen-threads' guard ``b < old grid``) can
compute it from the scalar arguments the spec derives from the sizes, instead of baking in
the number for the spec's sizes: with ``n = { value = "n" }`` the grid ``ceil(n / 512)``
becomes ``(u32(n) + 511_u32) / 512_u32``, right at every size.

Supported (everything a grid in ``examples/*.kir.toml`` uses, and what rules write back):
non-negative integer literals, size names that are exactly the spec expression of a scalar
integer parameter, ``+ - * // %``, parentheses, ``ceil(a / b)`` (= ``(a + b - 1) / b``),
``floor(a / b)`` (= ``a / b``), ``ceil(x)``/``floor(x)`` of an integer ``x``, and two-argument
``min``/``max``. Values are assumed non-negative, as launch sizes are, and arithmetic is done
in the requested integer type (u32 by default: the type of the block and grid indices).
Anything else (true division outside ceil/floor, float literals, ``**``, ``sqrt`` ...) gives
``None``: the caller falls back to the value at the spec's sizes.
"""

from __future__ import annotations

import ast
from typing import Mapping

from kir.errors import KirError
from kir.ir import Assign, Binary, Cast, Const, Expr, Kernel, Select, Var, transform
from kir.ir.fold import fold_expr
from kir.ir.types import BOOL, I32, I64, U32, U64, ScalarType
from kir.spec.sizeexpr import eval_size_expr, size_names

INT_TYPES = (I32, U32, I64, U64)

_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}


class _Refuse(Exception):
    pass


def size_params(kernel: Kernel, scalar_exprs: Mapping[str, str]) -> dict[str, str]:
    """Size name -> the scalar parameter of ``kernel`` whose spec expression is exactly that
    name (``n_rows = { value = "rows" }`` gives ``{"rows": "n_rows"}``). Only integer
    parameters the kernel never assigns count; the first in parameter order wins."""
    assigned = {n.name for n in kernel.body.walk() if isinstance(n, Assign)}
    found: dict[str, str] = {}
    for p in kernel.params:
        expr = str(scalar_exprs.get(p.name, "")).strip()
        if p.is_buffer or p.type not in INT_TYPES or p.name in assigned:
            continue
        if expr.isidentifier() and expr not in found:
            found[expr] = p.name
    return found


def size_expr_to_ir(text: str, names: Mapping[str, Expr],
                    type: ScalarType = U32) -> Expr | None:
    """``text`` as an IR expression of ``type`` with each size name replaced by
    ``names[name]`` (cast to ``type`` when needed); None when ``text`` uses a name not in
    ``names`` or a construct outside the supported subset (see the module doc)."""
    if type not in INT_TYPES:
        raise ValueError(f"size expressions become integer IR, not {type}")
    text = str(text).strip()
    if len(text) > 1000:
        return None
    try:
        tree = ast.parse(text, mode="eval")
        return fold_expr(_Builder(names, type).build(tree.body))
    except (_Refuse, SyntaxError, RecursionError):
        return None


def grid_to_ir(kernel: Kernel, text: str, scalar_exprs: Mapping[str, str],
               type: ScalarType = U32, check: Mapping[str, int | float] | None = None
               ) -> Expr | None:
    """The size expression ``text`` (a launch grid dimension) computed at run time from the
    scalar parameters of ``kernel`` (see :func:`size_params`), or None when it cannot be.

    With ``check`` (the spec's sizes), the IR is also evaluated with each parameter bound to
    its size and must give the same number as ``text``, or the answer is None."""
    params = size_params(kernel, scalar_exprs)
    try:
        needed = size_names(str(text))
    except KirError:
        return None
    if not needed <= set(params):
        return None
    names = {size: Var(params[size], kernel.param(params[size]).type) for size in needed}
    expr = size_expr_to_ir(text, names, type)
    if expr is None or check is None:
        return expr
    try:
        want = eval_size_expr(text, dict(check))
        bound = {params[s]: int(check[s]) for s in needed}
    except (KirError, KeyError, TypeError, ValueError):
        return None
    got = fold_expr(transform(expr, lambda n: Const(bound[n.name], n.type)
                              if isinstance(n, Var) and n.name in bound else None))
    if not isinstance(got, Const) or float(got.value) != float(want):
        return None
    return expr


class _Builder:
    def __init__(self, names: Mapping[str, Expr], type: ScalarType):
        self.names = names
        self.type = type

    def _cast(self, e: Expr) -> Expr:
        return e if e.type == self.type else Cast(e, self.type)

    def _bin(self, op: str, a: Expr, b: Expr) -> Expr:
        return Binary(op, a, b, self.type)

    def build(self, node: ast.AST) -> Expr:
        t = self.type
        if isinstance(node, ast.Constant):
            v = node.value
            bits = 32 if t in (I32, U32) else 64
            limit = 2 ** (bits - 1) if t in (I32, I64) else 2 ** bits
            if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < limit:
                return Const(v, t)
            raise _Refuse
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise _Refuse
            return self._cast(self.names[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
            return self.build(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return self._bin(_OPS[type(node.op)], self.build(node.left), self.build(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and not node.keywords:
            fn, args = node.func.id, node.args
            if fn in ("ceil", "floor") and len(args) == 1:
                arg = args[0]
                if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div):
                    a, b = self.build(arg.left), self.build(arg.right)
                    if fn == "floor":
                        return self._bin("/", a, b)
                    # ceil(a / b) = (a + (b - 1)) / b for a >= 0, b > 0.
                    return self._bin("/", self._bin("+", a, self._bin("-", b, Const(1, t))), b)
                return self.build(arg)  # ceil/floor of an integer is itself
            if fn in ("min", "max") and len(args) == 2:
                a, b = self.build(args[0]), self.build(args[1])
                op = "<" if fn == "min" else ">"
                return Select(Binary(op, a, b, BOOL), a, b, t)
        raise _Refuse
