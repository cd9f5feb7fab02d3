"""Operators a file defines for its own types (a mixin of the Lowerer).

CUDA has no arithmetic on ``float3`` or on structs; vendor samples and tutorials bring it
with ``helper_math.h``-style free functions (``float3 operator+(float3 a, float3 b)``,
``void operator+=(float3& a, float3 b)``) or member operators (``Complex
operator*(const Complex& o) const``). kir inlines such an operator where an operand is a
vector or a struct, exactly as C++ resolves it: a member operator of the left operand's
struct first, then the file's free overloads (``function_for`` picks among them); an
operand kir's own arithmetic covers never looks for one. ``a += b`` uses ``operator+=``
when the file defines it, else ``a = a + b`` through ``operator+`` (what helper_math.h
defines both ways). Free operators are registered under ``operator+`` and so on (the
scanner names their units so, ``program`` reads their text with the name as a plain
identifier); their inlined locals take C names (``struct_text.OPERATOR_WORDS``).
"""

from __future__ import annotations

from kir.frontends.cuda.values import MemRef, StructVal

from kir.ir import Expr
from kir.ir.types import VectorType

class OperatorMixin:
    """``a op b``, ``op a``, ``a op= b`` through the file's operators; relies on the
    Lowerer (inlining, member functions)."""

    def user_operator(self, op: str, values: list, trees: list, tree):
        """The value of operator ``op`` applied to evaluated ``values`` (written as
        ``trees``) through an operator the file defines, or None when an operand is not a
        vector or struct or no such operator exists."""
        if not any(_user_typed(v) for v in values):
            return None
        first = values[0]
        if isinstance(first, StructVal) and any(
                m.operator == op for m in self.struct_members(first.type.base)):
            return self.call_method(first, first.type, "operator" + op, trees[1:], tree,
                                    args=values[1:])
        if "operator" + op in self.functions:
            return self.inline_call("operator" + op, trees, tree, False, args=values)
        return None


def _user_typed(value) -> bool:
    if isinstance(value, StructVal):
        return True
    return isinstance(value, (Expr, MemRef)) and isinstance(value.type, VectorType)


__all__ = ["OperatorMixin"]
