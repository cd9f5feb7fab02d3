"""The values and operators of CUB's collectives (a mixin of the Lowerer).

A collective reduces one value per thread: a scalar, or a struct of scalars — CUB's own
``cub::KeyValuePair<K, V>`` (``key``, ``value``), which argmax reductions carry with
``cub::ArgMax()`` / ``cub::ArgMin()``, or a struct of the file's. The lowering moves such a
value as its *parts* (:data:`Parts`: one expression per scalar field, in order), each
shuffled and stored on its own, and rebuilds the value at the end.

The operator is a name (``"sum"``, ``"max"``, ``"min"``: CUB's, libcu++'s and cooperative
groups' plus/maximum/minimum, on scalars) or a function of two values: ArgMax/ArgMin (the
pair with the larger / smaller value, on a tie the smaller key, as CUB picks), or a function
object or lambda of the file's, inlined at every step. ArgMax and ArgMin are also called
directly (``arg_max(a, b)``), as kernels fold their own items before reducing.
"""

from __future__ import annotations

from typing import Callable

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_cg import OPERATORS
from kir.frontends.cuda.lower_lambda import LambdaVal
from kir.frontends.cuda.values import CgType, CgVal, FunctorVal, StructType, StructVal

from kir.errors import UnsupportedError
from kir.ir import Expr
from kir.ir.types import BOOL, ScalarType

#: One expression per scalar part of a value (a scalar: itself; a struct: its fields)
Parts = tuple[Expr, ...]
#: An operator argument: "sum", "max", "min", or a function combining two values
Operator = str | Callable[[object, object], object]
#: CUB's pair-picking operators, by the CgType kind they are held as
PICKERS = {"cub::ArgMax": "argmax", "cub::ArgMin": "argmin"}
OPERATOR_KINDS = frozenset(OPERATORS) | frozenset(PICKERS.values())


def key_value_pair(key, value) -> StructType:
    """``cub::KeyValuePair<K, V>``: a struct of ``key`` and ``value``."""
    return StructType(f"cub::KeyValuePair<{key}, {value}>", (("key", key), ("value", value)),
                      base="cub::KeyValuePair")


class CubOperatorMixin:
    """Values and operators of CUB's collectives; relies on the Lowerer."""

    def cub_element(self, name: str, elem, tree):
        """A collective's element type: a scalar (not bool) or a struct of scalars."""
        fine = isinstance(elem, ScalarType) and elem != BOOL or isinstance(
            elem, StructType) and all(isinstance(t, ScalarType) for _n, t in elem.fields)
        if not fine:
            raise self.error(f"{name} of {elem} not supported (a scalar, or a struct of "
                             "scalars such as cub::KeyValuePair)", tree, UnsupportedError)
        return elem

    def cub_parts(self, tree, elem, name: str) -> Parts:
        """The value ``tree`` gives a collective of ``elem`` values, as parts."""
        if isinstance(elem, StructType):
            value = self.operand(tree)
            if not (isinstance(value, StructVal) and value.type == elem):
                raise self.error(f"{name} of {elem} is given something else", tree)
            return tuple(self._cub_temp(self.value_of(value.parts[n], tree))
                         for n, _t in elem.fields)
        value = self.rvalue(tree)
        if not isinstance(value.type, ScalarType):
            raise self.error(f"{name} of something other than one scalar per thread (reduce "
                             "a thread's items first)", tree, UnsupportedError)
        return (self._cub_temp(ct.convert(value, elem)),)

    def cub_value(self, parts: Parts, elem):
        """The value ``parts`` make: the scalar, or a struct of ``elem``."""
        if isinstance(elem, StructType):
            return StructVal(elem, {n: p for (n, _t), p in zip(elem.fields, parts)})
        return parts[0]

    def _cub_operator(self, tree) -> Operator:
        """The operator argument of a reduction or scan (see the module doc)."""
        value = self.operand(tree)
        if isinstance(value, CgVal) and value.type.kind in OPERATORS:
            return OPERATORS[value.type.kind]
        if isinstance(value, CgVal) and value.type.kind in PICKERS.values():
            return lambda a, b: self.cub_pick(value.type.kind, a, b, tree)
        if isinstance(value, (FunctorVal, LambdaVal)):
            call = self.call_lambda if isinstance(value, LambdaVal) else self.call_functor
            return lambda a, b: call(value, [tree, tree], tree, False, args=[a, b])
        raise self.error("CUB's operator must be cub::Sum(), cub::Max(), cub::Min() (or "
                         "libcu++'s plus, maximum, minimum), cub::ArgMax(), cub::ArgMin(), a "
                         "function object or a lambda", tree, UnsupportedError)

    def _cub_combine(self, op: Operator, a: Parts, b: Parts, elem) -> Parts:
        """``a`` and ``b`` combined by an operator of :meth:`_cub_operator`."""
        if not callable(op):
            if isinstance(elem, StructType):
                raise self.error(f"a {op} of {elem} (give an operator taking two of them)",
                                 None, UnsupportedError)
            return (self._combine(op, a[0], b[0]),)
        made = op(self.cub_value(a, elem), self.cub_value(b, elem))
        if isinstance(elem, StructType):
            if not (isinstance(made, StructVal) and made.type == elem):
                raise self.error(f"the operator of a reduction of {elem} returns something "
                                 "else", None, UnsupportedError)
            return tuple(self.value_of(made.parts[n], None) for n, _t in elem.fields)
        return (ct.convert(self.rvalue_of(made, None), elem),)

    def cub_pick(self, kind: str, a, b, tree) -> StructVal:
        """``cub::ArgMax()(a, b)`` (``ArgMin``): ``b`` when its value is larger (smaller), or
        equal with a smaller key, else ``a``."""
        if not (isinstance(a, StructVal) and isinstance(b, StructVal) and a.type == b.type
                and {n for n, _t in a.type.fields} >= {"key", "value"}):
            raise self.error(f"cub::{'ArgMax' if kind == 'argmax' else 'ArgMin'} compares two "
                             "key-value pairs", tree, UnsupportedError)
        ka, va = (self.value_of(a.parts[n], tree) for n in ("key", "value"))
        kb, vb = (self.value_of(b.parts[n], tree) for n in ("key", "value"))
        better = ct.binary(">" if kind == "argmax" else "<", vb, va)
        tie = ct.binary("&&", ct.binary("==", vb, va), ct.binary("<", kb, ka))
        return self.struct_select(ct.binary("||", better, tie), b, a, tree)

    def cub_apply(self, operator: CgType, arg_trees: list, tree):
        """A call of an operator object: ``arg_max(a, b)``, ``cub::Max()(a, b)``."""
        self._arity(str(operator), arg_trees, 2, 2, tree)
        if operator.kind in PICKERS.values():
            return self.cub_pick(operator.kind, self.operand(arg_trees[0]),
                                 self.operand(arg_trees[1]), tree)
        a, b = (self.rvalue(t) for t in arg_trees)
        t = ct.binary("+", a, b).type  # the usual arithmetic conversions
        return self._combine(OPERATORS[operator.kind], ct.convert(a, t), ct.convert(b, t))
