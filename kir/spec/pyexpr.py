"""Size expressions as Python source, for the generated MLX module (which carries no kir).

``ceil(N / T)`` becomes ``_ceil(S["N"] / S["T"])``: names read from a dict of sizes, the
functions from a small table the module defines (:data:`PRELUDE`). Only what
:mod:`kir.spec.sizeexpr` accepts is translated, so the text is as safe as the spec was.
"""

from __future__ import annotations

import ast

from kir.errors import KirError
from kir.spec.sizeexpr import size_names

# What the module defines for the translated expressions (math is imported there).
FUNCTIONS = {"ceil": "_ceil", "floor": "_floor", "sqrt": "math.sqrt", "min": "min",
             "max": "max", "abs": "abs", "log2": "math.log2"}
CONSTANTS = {"inf": "math.inf", "nan": "math.nan"}
PRELUDE = '''\
def _ceil(value):
    return math.ceil(value)


def _floor(value):
    return math.floor(value)
'''


def size_expr_to_python(text: str | int | float, size: str = "S") -> str:
    """``text`` (a checked size expression) as Python over the dict named ``size``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return repr(text)
    text = str(text).strip()
    size_names(text)  # the same whitelist check the spec made
    tree = ast.parse(text, mode="eval")

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in CONSTANTS:
                return ast.parse(CONSTANTS[node.id], mode="eval").body
            return ast.Subscript(ast.Name(size, ast.Load()), ast.Constant(node.id), ast.Load())

        def visit_Call(self, node: ast.Call) -> ast.AST:
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise KirError(f"unsupported call in size expression {text!r}")
            node.args = [self.visit(a) for a in node.args]
            node.func = ast.parse(FUNCTIONS[node.func.id], mode="eval").body
            return node

    return ast.unparse(Rename().visit(tree))
