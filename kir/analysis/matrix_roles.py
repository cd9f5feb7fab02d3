"""Which fragments are the A and B operands of tensor-core (TF32) matrix products.

A TF32 product (:class:`kir.ir.MatrixMultiplyAccumulate` with ``precision`` ``"tf32"`` or
``"tf32x3"``) takes its operands in layouts of their own on CUDA's tensor cores (``mma.sync``
m16n8k8: A by rows, B by columns, both unlike the accumulator's), and a ``tf32x3`` operand is
held split in two (:data:`kir.ir.nodes.TF32_PRECISIONS`), so a fragment may be an operand of
such products in one role and one precision only, and nothing else. The CUDA back end loads
each operand in its role's layout; the TF32 rules ask the same question before they mark a
product.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir import ir
from kir.errors import UnsupportedError
from kir.ir.nodes import TF32_PRECISIONS


@dataclass(frozen=True)
class OperandRole:
    """``operand`` "a" or "b" of products of ``precision`` ("tf32" or "tf32x3")."""

    operand: str
    precision: str


def tf32_operand_roles(body: ir.Block) -> dict[str, OperandRole]:
    """Fragment name -> its role for every operand of a TF32 product. Raises
    :class:`UnsupportedError` for a fragment that also plays another part (the other operand,
    an operand at the other precision, an accumulator, a store, an f32 product): the operand
    layouts differ from the accumulator's and from each other."""
    roles: dict[str, OperandRole] = {}
    products = [s for s in body.walk() if isinstance(s, ir.MatrixMultiplyAccumulate)]
    for s in (s for s in products if s.precision in TF32_PRECISIONS):
        for name, operand in ((s.a, "a"), (s.b, "b")):
            role = OperandRole(operand, s.precision)
            if roles.setdefault(name, role) != role:
                raise UnsupportedError(f"fragment {name!r} is an operand of TF32 products in "
                                       "two roles or precisions", s.loc, hint="load it twice")
    for s in body.walk():
        other = ((s.acc,) + ((s.a, s.b) if s.precision not in TF32_PRECISIONS else ())
                 if isinstance(s, ir.MatrixMultiplyAccumulate)
                 else (s.name,) if isinstance(s, ir.MatrixStore) else ())
        clash = next((n for n in other if n in roles), None)
        if clash is not None:
            raise UnsupportedError(f"fragment {clash!r} is a tf32 operand and also an "
                                   "accumulator, a stored matrix or an f32 operand",
                                   ir.stmt_loc(s), hint="load it twice")
    return roles
