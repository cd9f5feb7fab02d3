"""Double-precision arithmetic computed in single precision, for targets without doubles.

C promotes ``x * 0.5`` and ``sqrt(x * x + 1.0)`` to double when ``x`` is a float, so most
real float kernels hold a few f64 operations their authors never meant (a literal without its
``f``). Metal has no 64-bit float: rather than refuse every such kernel, its emitter computes
those operations in f32 — what the author wrote the literal for — and every kernel kir
reports is validated on the target against the reference at the spec's tolerance, which
decides whether the lost precision matters (a ``double`` accumulator over many terms may not
pass). Buffers and scalar arguments of type f64 stay refused: their data cannot reach a GPU
without doubles.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kir import ir
from kir.errors import UnsupportedError
from kir.ir.types import F32, F64, PointerType, VectorType


def _single(t):
    """``t`` with f64 replaced by f32 (scalars and vectors); other types unchanged."""
    if t == F64:
        return F32
    if isinstance(t, VectorType) and t.elem == F64:
        return VectorType(F32, t.count)
    return t


def _demote_node(node: ir.Node) -> ir.Node | None:
    if isinstance(node, ir.Cast) and node.value.type == _single(node.type):
        return node.value  # f32(f64(x)) became f32(f32(x)): no conversion left
    changes = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if f.name in ("type", "elem") and _single(value) is not value:
            changes[f.name] = _single(value)
    if not changes:
        return None
    if isinstance(node, ir.Const) and isinstance(node.value, float):
        changes["value"] = float(np.float32(node.value))  # the literal as a float literal
    return dataclasses.replace(node, **changes)


def uses_f64(kernel: ir.Kernel) -> bool:
    """Whether any value, local or array in ``kernel`` is f64."""
    for n in kernel.walk():
        t = getattr(n, "type", None) or getattr(n, "elem", None)
        if isinstance(t, PointerType):
            t = t.elem
        if _single(t) is not t:
            return True
    return False


def demote_f64(kernel: ir.Kernel, target_title: str) -> ir.Kernel:
    """``kernel`` with its f64 arithmetic, locals and arrays in f32; an f64 parameter is
    refused (its data is doubles)."""
    for p in kernel.params:
        t = p.type.elem if isinstance(p.type, PointerType) else p.type
        if _single(t) is not t:
            raise UnsupportedError(f"{target_title} has no 64-bit float (double): parameter "
                                   f"{p.name!r} is {p.type}", p.loc,
                                   hint="use float (f32) for it in the kernel and the spec")
    for n in kernel.body.walk():
        if isinstance(n, ir.Call) and n.fn == "bitcast" and F64 in (n.type, n.args[0].type):
            raise UnsupportedError(f"{target_title} has no 64-bit float (double): the kernel "
                                   "reads the bits of a double", ir.stmt_loc(n)
                                   if isinstance(n, ir.Stmt) else None,
                                   hint="use float (f32) and its bits (__float_as_uint)")
    body = ir.transform(kernel.body, _demote_node)
    return dataclasses.replace(kernel, body=body)


__all__ = ["demote_f64", "uses_f64"]
