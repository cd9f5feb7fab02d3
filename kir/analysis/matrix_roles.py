"""Which fragments are the A and B operands of TF32 matrix products.

A TF32 product (:class:`kir.ir.MatrixMultiplyAccumulate` with ``precision == "tf32"``) takes
its operands in layouts of their own on CUDA's tensor cores (``mma.sync`` m16n8k8: A by rows,
B by columns, both unlike the accumulator's), so a fragment may be an operand of such
products in one role only and nothing else. The CUDA back end loads each operand in its role's
layout; the ``tf32-matrix`` rule asks the same question before it marks a product.
"""

from __future__ import annotations

from kir import ir
from kir.errors import UnsupportedError


def tf32_operand_roles(body: ir.Block) -> dict[str, str]:
    """Fragment name -> "a" / "b" for every operand of a ``tf32`` product. Raises
    :class:`UnsupportedError` for a fragment that also plays another part (the other operand,
    an accumulator, a store, an f32 product): the two operand layouts differ from the
    accumulator's and from each other."""
    roles: dict[str, str] = {}
    products = [s for s in body.walk() if isinstance(s, ir.MatrixMultiplyAccumulate)]
    for s in (s for s in products if s.precision == "tf32"):
        for name, role in ((s.a, "a"), (s.b, "b")):
            if roles.setdefault(name, role) != role:
                raise UnsupportedError(f"fragment {name!r} is both operands of tf32 products",
                                       s.loc, hint="load it twice")
    for s in body.walk():
        other = ((s.acc,) + ((s.a, s.b) if s.precision != "tf32" else ())
                 if isinstance(s, ir.MatrixMultiplyAccumulate)
                 else (s.name,) if isinstance(s, ir.MatrixStore) else ())
        clash = next((n for n in other if n in roles), None)
        if clash is not None:
            raise UnsupportedError(f"fragment {clash!r} is a tf32 operand and also an "
                                   "accumulator, a stored matrix or an f32 operand",
                                   ir.stmt_loc(s), hint="load it twice")
    return roles
