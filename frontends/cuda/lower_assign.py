"""Lowering of casts, assignments and increments (a mixin of the Lowerer).

Pointer variables are assigned by updating their integer offset variable; a pointer's root
buffer is fixed by its first assignment and may not change afterwards.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_expr import Value, scale
from kir.frontends.cuda.values import (
    OFFSET_TYPE,
    ArraySym,
    ConstSym,
    MemRef,
    PtrSym,
    PtrVal,
    count_of,
)
from lark import Token, Tree

from kir.errors import UnsupportedError
from kir.ir import Assign, Component, Const, Declare, Expr, MakeVector, Store, Var
from kir.ir.types import I32, U64, ScalarType, VectorType


class AssignMixin:
    """Casts, ``sizeof``, assignment, compound assignment and ``++``/``--``."""

    # ------------------------------------------------------------------------ casts

    def _cast_to(self, value: Value, target, tree) -> Value:
        """Apply a C/C++ cast to a resolved CType."""
        if target.pointers:
            p = self.as_pointer(value, tree)
            if p is None:
                raise self.error("cast of a non-pointer value to a pointer", tree,
                                 UnsupportedError)
            root_elem = self.buffers[p.root].elem
            if target.pointers > 1 or target.base is None:
                raise self.error("cast to a pointer of this type not supported", tree,
                                 UnsupportedError)
            if ct.scalar_of(target.base) != root_elem:
                raise self.error(f"reinterpreting a {root_elem} buffer as "
                                 f"{ct.scalar_of(target.base)} not supported", tree,
                                 UnsupportedError)
            return PtrVal(p.root, p.offset, target.base)
        if target.base is None:
            self._value(value, tree)
            return Const(0, I32)
        expr = self._value(value, tree)
        if isinstance(target.base, VectorType) or isinstance(expr.type, VectorType):
            if expr.type == target.base:
                return expr
            raise self.error(f"conversion from {expr.type} to {target.base}", tree,
                             UnsupportedError)
        return ct.convert(expr, target.base)

    def _x_c_cast(self, tree, discard) -> Value:
        type_tree, value_tree = tree.children
        return self._cast_to(self.operand(value_tree), self.resolve_type_name(type_tree), tree)

    def _x_cpp_cast(self, tree, discard) -> Value:
        _kw, type_tree, value_tree = tree.children
        return self._cast_to(self.operand(value_tree), self.resolve_type_name(type_tree), tree)

    def _x_func_cast(self, tree, discard) -> Value:
        type_tree, value_tree = tree.children
        words = [str(t) for t in type_tree.children]
        base = self.resolve_words(words, type_tree)
        return self._cast_to(self.operand(value_tree), ct.CType(base), tree)

    def _x_sizeof_type(self, tree, discard) -> Expr:
        t = self.resolve_type_name(tree.children[-1])
        if t.pointers:
            return Const(8, U64)
        if t.base is None:
            raise self.error("sizeof(void)", tree)
        return Const(t.base.nbytes, U64)

    def _x_sizeof_expr(self, tree, discard) -> Expr:
        stmts, value = self.capture(lambda: self.operand(tree.children[-1]))
        if isinstance(value, (Expr, MemRef)):
            return Const(value.type.nbytes, U64)
        raise self.error("sizeof of a pointer or array", tree, UnsupportedError)

    # ------------------------------------------------------------------ side effects

    def _x_assign(self, tree, discard) -> Value:
        lhs_tree, op_tree, rhs_tree = tree.children
        op = str(op_tree.children[0])
        if isinstance(lhs_tree, Tree) and lhs_tree.data == "name":
            sym = self.lookup(str(lhs_tree.children[0]))
            if isinstance(sym, PtrSym):
                return self.assign_pointer(sym, op, rhs_tree, tree)
            if isinstance(sym, (ConstSym, ArraySym)) and (
                    not isinstance(sym, ArraySym) or sym.dims):
                raise self.error(f"cannot assign to '{lhs_tree.children[0]}'", lhs_tree)
        target = self.operand(lhs_tree)
        value = self.rvalue(rhs_tree)
        if op != "=":
            value = self._apply_binary(op[:-1], target, value, tree)
        self.write(target, value, tree)
        return target  # read again by whoever uses the value: it is the assigned one

    def assign_pointer(self, sym: PtrSym, op: str, rhs_tree, tree) -> PtrVal:
        """``p = q``, ``p += n``, ``p -= n`` on a pointer variable."""
        if op == "=":
            new = self.pointer(rhs_tree)
            if sym.root is not None and sym.root != new.root:
                raise self.error(f"pointer may point into two buffers ('{sym.root}' and "
                                 f"'{new.root}'); its buffer must be known statically", tree,
                                 UnsupportedError)
            sym.root = new.root
            offset = new.offset
        elif op in ("+=", "-="):
            if sym.root is None:
                raise self.error("pointer arithmetic on an unset pointer", tree)
            n = self.rvalue(rhs_tree)
            step = scale(n, count_of(sym.view))
            current = Var(sym.offset_var, OFFSET_TYPE) if sym.offset_var else sym.offset_expr
            offset = ct.binary(op[0], current, step)
        else:
            raise self.error(f"operator '{op}' on a pointer", tree, UnsupportedError)
        if sym.offset_var is None:
            raise self.error("this pointer cannot be reassigned", tree, UnsupportedError)
        self.emit(Assign(sym.offset_var, ct.convert(offset, OFFSET_TYPE), loc=self.cur_loc))
        return PtrVal(sym.root, Var(sym.offset_var, OFFSET_TYPE), sym.view)

    def write(self, target: Value, value: Expr, tree) -> None:
        """Store ``value`` (converted) into an lvalue."""
        loc = self.cur_loc
        if isinstance(target, MemRef):
            info = self.buffers.get(target.buffer)
            if info is not None and info.const:
                raise self.error(f"store into const buffer '{target.buffer}'", tree)
            self.emit(Store(target.buffer, target.index, self.coerce(value, target.type, tree),
                            loc=loc))
        elif isinstance(target, Var):
            self.emit(Assign(target.name, self.coerce(value, target.type, tree), loc=loc))
        elif isinstance(target, Component) and isinstance(target.vector, Var):
            vec = target.vector
            elems = tuple(self.coerce(value, target.type, tree) if j == target.index
                          else Component(vec, j, target.type) for j in range(vec.type.count))
            self.emit(Assign(vec.name, MakeVector(elems, vec.type), loc=loc))
        else:
            raise self.error("expression is not assignable", tree)

    def coerce(self, value: Expr, t, tree) -> Expr:
        """Implicit conversion of ``value`` to ``t`` (assignment, initialisation, argument)."""
        if value.type == t:
            return value
        if isinstance(t, VectorType) or isinstance(value.type, VectorType):
            raise self.error(f"cannot convert {value.type} to {t}", tree)
        return ct.convert(value, t)

    def _incdec(self, tree, delta: int, post: bool, discard: bool) -> Value:
        inner = tree.children[-1] if not post else tree.children[0]
        if isinstance(inner, Tree) and inner.data == "name":
            sym = self.lookup(str(inner.children[0]))
            if isinstance(sym, PtrSym):
                rhs = Tree("int_lit", [Token("INT_LIT", "1")])
                return self.assign_pointer(sym, "+=" if delta > 0 else "-=", rhs, tree)
        target = self.operand(inner)
        old = self._value(target, inner)
        if not isinstance(old.type, ScalarType):
            raise self.error(f"'++'/'--' on {old.type}", tree)
        saved = None
        if post and not discard:
            saved = self.fresh("old")
            self.emit(Declare(saved, old.type, old, loc=self.cur_loc))
            old = Var(saved, old.type)
        self.write(target, ct.binary("+" if delta > 0 else "-", old, Const(1, I32)), tree)
        if saved is not None:
            return Var(saved, old.type)
        return target

    def _x_pre_inc(self, tree, discard):
        return self._incdec(tree, 1, False, discard)

    def _x_pre_dec(self, tree, discard):
        return self._incdec(tree, -1, False, discard)

    def _x_post_inc(self, tree, discard):
        return self._incdec(tree, 1, True, discard)

    def _x_post_dec(self, tree, discard):
        return self._incdec(tree, -1, True, discard)
