"""Lowering of casts, assignments and increments (a mixin of the Lowerer).

Pointer variables are assigned by updating their integer offset variable; a pointer's root
buffer is fixed by its first assignment and may not change afterwards.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.lower_expr import Value, scale
from kir.frontends.cuda.lower_cub import COLLECTIVE_KINDS
from kir.frontends.cuda.lower_view_struct import ViewStruct
from kir.frontends.cuda.values import (
    OFFSET_TYPE,
    ArraySym,
    ArrVal,
    CgType,
    CgVal,
    ComponentAddr,
    ComponentRef,
    ConstSym,
    FunctorStruct,
    FunctorVal,
    LocalAddr,
    MemRef,
    NullVal,
    PtrSym,
    PtrVal,
    RefSym,
    StructType,
    StructVal,
    count_of,
    struct_size,
)
from lark import Token, Tree

from kir.errors import UnsupportedError
from kir.ir import Assign, Component, Const, Declare, Expr, MakeVector, Select, Store, Var
from kir.ir.types import I8, I32, U8, U64, ScalarType, VectorType


class AssignMixin:
    """Casts, ``sizeof``, assignment, compound assignment and ``++``/``--``."""

    # ------------------------------------------------------------------------ casts

    def _cast_to(self, value: Value, target, tree) -> Value:
        """Apply a C/C++ cast to a resolved CType."""
        from kir.frontends.cuda.lower_expr import AddrVal

        if isinstance(target.base, StructType) and not target.pointers:
            if isinstance(value, StructVal) and value.type == target.base:
                return value
            raise self.error(f"cast to {target.base} not supported", tree, UnsupportedError)
        if isinstance(target.base, CgType) and not target.pointers:
            if isinstance(value, CgVal):
                return value
            raise self.error(f"cast to {target.base}", tree, UnsupportedError)
        if not target.pointers and isinstance(value, (PtrVal, ArrVal)) and isinstance(
                target.base, ScalarType) and target.base.is_int and target.base.bits == 64:
            p = self.as_pointer(value, tree)
            elem = self.buffers[p.root].elem
            offset = ct.binary("*", ct.convert(p.offset, U64), Const(elem.nbytes, U64))
            return AddrVal(offset)
        if not target.pointers and isinstance(value, NullVal) and isinstance(
                target.base, ScalarType) and target.base.is_int:
            return Const(0, target.base)
        if target.pointers and isinstance(value, NullVal):
            return value
        if target.pointers == 1 and isinstance(value, LocalAddr) and isinstance(
                value.target.type, VectorType) and target.base == value.target.type.elem:
            return ComponentAddr(value.target, Const(0, I32))  # (float*)&v of a float4
        if target.pointers:
            if isinstance(value, StructVal) and value.type.carries is not None:
                value = value.parts["bits"]  # (__half*)&v of a carrier: its elements
            p = self.as_pointer(value, tree)
            if p is None:
                raise self.error("cast of a non-pointer value to a pointer", tree,
                                 UnsupportedError)
            root_elem = self.buffers[p.root].elem
            if target.pointers > 1 or target.base is None:
                raise self.error("cast to a pointer of this type not supported", tree,
                                 UnsupportedError)
            if self.is_byte_pool(p.root) and ct.scalar_of(p.view) in (I8, U8) \
                    and ct.scalar_of(target.base) not in (I8, U8):
                return self.type_byte_pool(p, target.base, tree)
            if isinstance(target.base, StructType):
                return self.struct_pointer(p, target.base, root_elem, tree)
            retyped = self.retype_pool(p, target.base) \
                if ct.scalar_of(target.base) != root_elem else None
            if retyped is not None:
                return retyped
            wanted = ct.scalar_of(target.base)
            if self.atomic_operand is not None and ct.same_width_ints(wanted, root_elem):
                # atomicAdd((unsigned long long*)&int64_buffer[i], v): the same bits under
                # the other signedness, which the atomic reads back (_atomic)
                self.atomic_operand.append(wanted)
                return PtrVal(p.root, p.offset, root_elem)
            if ct.same_width_ints(target.base, root_elem):
                return PtrVal(p.root, p.offset, target.base)  # (const char*) over bytes
            if wanted != root_elem:  # int4 over floats: a carrier
                return self.reinterpreting_pointer(p, target.base, root_elem, tree)
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
        target = self.resolve_type_name(type_tree)
        return self._cast_to(self._cast_operand(value_tree, target), target, tree)

    def _x_cpp_cast(self, tree, discard) -> Value:
        _kw, type_tree, value_tree = tree.children
        target = self.resolve_type_name(type_tree)
        return self._cast_to(self._cast_operand(value_tree, target), target, tree)

    def _cast_operand(self, value_tree, target) -> Value:
        """What a cast converts: ``&array`` cast to a pointer is the array's first element
        (the same address; ``reinterpret_cast<Pack*>(&row_chunk)`` of a local array)."""
        named = value_tree.children[-1] if isinstance(value_tree, Tree) \
            and value_tree.data == "addr" else None
        if target.pointers and isinstance(named, Tree) and named.data == "name":
            inner = self.operand(named)
            if isinstance(inner, ArrVal):
                return inner
        return self.operand(value_tree)

    def _func_cast_type(self, type_tree):
        words = [str(t) for t in type_tree.children if isinstance(t, Token)]
        targs = next((t for t in type_tree.children if isinstance(t, Tree)), None)
        return self.resolve_words(words, type_tree, targs)

    def _x_func_cast(self, tree, discard) -> Value:
        type_tree, value_tree = tree.children
        base = self._func_cast_type(type_tree)
        if value_tree is None:  # T(): a value-initialized T
            return self._value_init(base, tree)
        if isinstance(base, CgType) and base.kind in COLLECTIVE_KINDS:
            return self.cub_construct(base, self.operand(value_tree), tree)
        if isinstance(base, StructType):  # S(a, b): its constructor (else, C++20, in order)
            items = self.constructor_arguments(value_tree)
            return self.construct(base, items, tree) if base.constructors \
                else self.struct_from_list(base, items, tree)
        return self._cast_to(self.operand(value_tree), ct.CType(base), tree)

    def _x_brace_cast(self, tree, discard) -> Value:
        """``T{a, b}``: a struct, a vector, a cooperative-groups operator, or a scalar."""
        type_tree, args = tree.children
        base = self._func_cast_type(type_tree)
        items = list(args.children) if args is not None else []
        if isinstance(base, StructType):
            return self.struct_from_list(base, items, tree)
        if not items:
            return self._value_init(base, tree)
        if isinstance(base, VectorType):
            return self._vector_init(base, Tree("init_list", items), tree)
        if len(items) != 1 or not isinstance(base, ScalarType):
            raise self.error(f"braced initializer for {base}", tree)
        return self.coerce(self.rvalue(items[0]), base, tree)

    def _value_init(self, base, tree) -> Value:
        if isinstance(base, CgType):
            return CgVal(base)
        if isinstance(base, ViewStruct):  # Pool<T>(): the pointer it converts to
            return self.view_struct_pointer(base, tree)
        if isinstance(base, FunctorStruct):  # MaxOp<T>(): a function object
            return FunctorVal(base)
        if isinstance(base, StructType):  # S(): its default constructor, else value-initialized
            return self.struct_from_list(base, [], tree)
        if isinstance(base, VectorType):
            return self._vector_init(base, Tree("init_list", []), tree)
        if isinstance(base, ScalarType):
            return ct.convert(Const(0, I32), base)
        raise self.error(f"value of type {base}", tree)

    def _x_sizeof_type(self, tree, discard) -> Expr:
        t = self.resolve_type_name(tree.children[-1])
        if t.pointers:
            return Const(8, U64)
        if t.base is None:
            raise self.error("sizeof(void)", tree)
        if isinstance(t.base, StructType):
            return Const(struct_size(t.base), U64)
        if isinstance(t.base, CgType):
            raise self.error(f"sizeof({t.base})", tree, UnsupportedError)
        return Const(t.base.nbytes, U64)

    def _x_sizeof_expr(self, tree, discard) -> Expr:
        stmts, value = self.capture(lambda: self.operand(tree.children[-1]))
        if isinstance(value, (Expr, MemRef)):
            return Const(value.type.nbytes, U64)
        if isinstance(value, StructVal):
            return Const(struct_size(value.type), U64)
        if isinstance(value, ArrVal):  # the array's (or a row's) bytes
            size = value.sym.elem.nbytes
            for n in value.sym.dims[value.used:]:
                size *= n
            return Const(size, U64)
        raise self.error("sizeof of a pointer", tree, UnsupportedError)

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
        member = self.pointer_member(lhs_tree)
        if member is not None:  # s.elements = ..., s.elements += n
            return self.assign_pointer(member, op, rhs_tree, tree)
        target = self.operand(lhs_tree)
        if isinstance(target, RefSym):
            target = target.target
        if op != "=":  # a += b: the file's operator+= where it defines one for the types
            rhs = self.operand(rhs_tree)
            if self.user_operator(op, [target, rhs], [lhs_tree, rhs_tree], tree) is not None:
                return target
            if isinstance(target, StructVal):
                raise self.error(f"operator '{op}' on {target.type}, which defines no "
                                 f"operator{op}", tree)
            value = self._apply_binary(op[:-1], target, rhs, tree)
            self.write(target, value, tree)
            return target
        if isinstance(target, StructVal):
            self.assign_struct(target, self.struct_value(target.type, rhs_tree), tree)
            return target
        value = self.rvalue(rhs_tree)
        self.write(target, value, tree)
        return target  # read again by whoever uses the value: it is the assigned one

    def assign_pointer(self, sym: PtrSym, op: str, rhs_tree, tree) -> PtrVal:
        """``p = q``, ``p += n``, ``p -= n`` on a pointer variable."""
        if op == "=":
            return self.set_pointer(sym, self.pointer(rhs_tree), tree)
        if op in ("+=", "-="):
            if sym.root is None:
                raise self.error("pointer arithmetic on an unset pointer", tree)
            n = self.rvalue(rhs_tree)
            step = scale(n, count_of(sym.view))
            current = Var(sym.offset_var, OFFSET_TYPE) if sym.offset_var else sym.offset_expr
            offset = ct.binary(op[0], current, step)
        else:
            raise self.error(f"operator '{op}' on a pointer", tree, UnsupportedError)
        return self._set_offset(sym, offset, tree)

    def set_pointer(self, sym: PtrSym, new: PtrVal, tree) -> PtrVal:
        """Point the pointer variable ``sym`` where ``new`` points (its buffer must stay the
        one it had, if any: kir knows every pointer's buffer statically)."""
        if sym.root is not None and sym.root != new.root:
            refused = self.error(f"pointer may point into two buffers ('{sym.root}' and "
                                 f"'{new.root}'); its buffer must be known statically", tree,
                                 UnsupportedError)
            self.moved_between_shared(sym.root, new.root, refused)  # (two shared arrays)
            raise refused
        sym.root = new.root
        return self._set_offset(sym, new.offset, tree)

    def _set_offset(self, sym: PtrSym, offset: Expr, tree) -> PtrVal:
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
            stored = self.coerce(value, target.type, tree)
            if info is not None and isinstance(stored.type, ScalarType) and info.elem != \
                    stored.type and stored.type.is_int and info.elem.is_int:
                stored = ct.convert(stored, info.elem)  # the other signedness of its width
            if self.in_lockstep(target.buffer):  # volatile shared memory
                self.lockstep_store(target, stored)
                return
            self.emit(Store(target.buffer, target.index, stored, loc=loc))
        elif isinstance(target, Var):
            self.emit(Assign(target.name, self.coerce(value, target.type, tree), loc=loc))
        elif isinstance(target, ComponentRef):
            vec, part = target.vector, self.coerce(value, target.type, tree)
            if not isinstance(part, (Var, Const)):
                name = self.fresh("part")
                self.emit(Declare(name, part.type, part, loc=loc))
                part = Var(name, part.type)
            elems = tuple(Select(ct.binary("==", target.index, Const(j, I32)), part,
                                 Component(vec, j, target.type), target.type)
                          for j in range(vec.type.count))
            self.emit(Assign(vec.name, MakeVector(elems, vec.type), loc=loc))
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
