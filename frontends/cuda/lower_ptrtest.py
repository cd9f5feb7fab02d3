"""Pointer tests kir decides when it lowers a kernel (a mixin of the Lowerer).

A kernel's pointers are its buffers, arrays in it, or null arguments (``bias = { null =
true }`` in the spec, or a parameter defaulting to ``nullptr``), so ``p == nullptr``,
``p != NULL``, ``!p`` and a pointer used as a condition are constants; ``null_folds``
counts them, and a branch a pointer test decides is the only one lowered (the other may
read through the null pointer). A pointer converted to an integer (``(uintptr_t)p``) is an
:class:`AddrVal`: its byte offset in its buffer, usable only in alignment tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.values import ArrVal, NullVal, PtrVal

from kir.errors import UnsupportedError
from kir.ir import Const, Expr
from kir.ir.types import BOOL, U64, ScalarType

Value = object  # an Expr, pointer, array or memory reference (see lower_expr)

#: kir assumes every buffer starts at an address aligned to this many bytes (MLX's and
#: cudaMalloc's allocations are), so `(uintptr_t)p % 16` is known from p's offset.
BUFFER_ALIGNMENT = 16


@dataclass
class AddrVal:
    """A pointer converted to an integer (``reinterpret_cast<uintptr_t>(p)``): the byte
    offset from its buffer's start. Only alignment tests (``% k``, ``& (k - 1)`` with k a
    power of two up to :data:`BUFFER_ALIGNMENT`) can use it."""

    offset_bytes: Expr


def pointerish(value) -> bool:
    return isinstance(value, (PtrVal, ArrVal, NullVal))


class PointerTestMixin:
    """Pointer truth, null tests and alignment tests; relies on the Lowerer."""

    def truth(self, value: Value, tree) -> Expr:
        """C truthiness of ``value``. A pointer's is known statically: a buffer is never
        null, a null argument always is (counted in ``null_folds``)."""
        if isinstance(value, (PtrVal, ArrVal, NullVal)):
            self.null_folds += 1
            return Const(not isinstance(value, NullVal), BOOL)
        return ct.to_bool(self._value(value, tree))

    def truth_of(self, tree) -> tuple[Expr, bool]:
        """``tree`` as a condition, and whether a pointer test decided it (then only the
        branch it selects is lowered: the other may use a null pointer)."""
        before = self.null_folds
        cond = self.truth(self.operand(tree), tree)
        return cond, isinstance(cond, Const) and self.null_folds != before

    def _pointer_test(self, op: str, a: Value, b: Value, tree) -> Expr:
        """``p == nullptr``, ``p != NULL``, ``p == 0``: known statically."""
        def null(v) -> bool:
            return isinstance(v, NullVal) or (isinstance(v, Const) and v.value == 0
                                              and isinstance(v.type, ScalarType)
                                              and v.type.is_int)
        if not (null(a) and pointerish(b) or null(b) and pointerish(a)):
            raise self.error(f"operator '{op}' on pointers not supported (only tests "
                             "against nullptr / NULL)", tree, UnsupportedError)
        self.null_folds += 1
        equal = null(a) and null(b)
        return Const(equal if op == "==" else not equal, BOOL)

    def _address_test(self, op: str, a: Value, b: Value, tree) -> Expr:
        addr, other = (a, b) if isinstance(a, AddrVal) else (b, a)
        k = other.value if isinstance(other, Const) and isinstance(other.value, int) else None
        modulus = k if op == "%" and addr is a else (k + 1 if op == "&" and k is not None
                                                      else None)
        if modulus is None or modulus <= 0 or modulus & (modulus - 1) \
                or modulus > BUFFER_ALIGNMENT:
            raise self.error("a pointer's address used beyond an alignment test (kir knows "
                             f"addresses modulo {BUFFER_ALIGNMENT} bytes only)", tree,
                             UnsupportedError)
        return ct.binary(op, addr.offset_bytes, ct.convert(other, U64))
