"""Lowering of CUDA expressions to kir expressions (a mixin of the Lowerer).

kir expressions have no side effects, so a C expression with side effects (``x[i++]``,
``a = b``, a call to an inlined ``__device__`` function, an atomic whose old value is used)
emits statements into the current statement list before the statement that uses its value.
Short-circuit operators and ``?:`` keep C's evaluation rules by turning into ``if``s when
their right side has such statements.

Left-leaning operator chains (``a+a+...+a``) are lowered iteratively along their left
spine, so a 5,000-term expression does not touch Python's recursion limit.
"""

from __future__ import annotations


from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.pointer_choice import PointerChoice
from kir.frontends.cuda.lower_cg import Dim3Val
from kir.frontends.cuda.lower_cub import COLLECTIVE_KINDS
from kir.frontends.cuda.lower_cub_ops import OPERATOR_KINDS
from kir.frontends.cuda.lower_ptrtest import (
    BUFFER_ALIGNMENT,
    AddrVal,
    PointerTestMixin,
    pointerish,
)
from kir.frontends.cuda.lower_lambda import LambdaVal
from kir.frontends.cuda.lower_methods import MethodRef
from kir.frontends.cuda.lower_struct import StructArrVal
from kir.frontends.cuda.parser import normalize_name, qualified_suffixes
from kir.frontends.cuda.values import (
    ComponentAddr,
    ComponentRef,
    LocalAddr,
    not_a_number,
    FunctorVal,
    NULL_POINTER,
    OFFSET_TYPE,
    ArraySym,
    ArrVal,
    CgVal,
    ConstSym,
    MemRef,
    NullVal,
    PtrSym,
    PtrVal,
    RefSym,
    StructArraySym,
    StructType,
    StructVal,
    TypeSym,
    VarSym,
    count_of,
)
from lark import Token, Tree

from kir.errors import UnsupportedError
from kir.ir import Assign, Block, Component, Const, Declare, Expr, If, Load, Select, Special, Var
from kir.ir.types import BOOL, I32, ScalarType, VectorType, common_type

BINOPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%", "shl": "<<", "shr": ">>",
          "band": "&", "bor": "|", "bxor": "^", "eq": "==", "ne": "!=", "lt": "<", "gt": ">",
          "le": "<=", "ge": ">=", "land": "&&", "lor": "||"}
SPECIAL_OBJECTS = {"threadIdx": "thread", "blockIdx": "block", "blockDim": "block_dim",
                   "gridDim": "grid_dim"}
COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3}
Value = Expr | PtrVal | ArrVal | MemRef
def add_offsets(a: Expr, b: Expr) -> Expr:
    """``a + b`` for element offsets, skipping additions of zero."""
    if isinstance(a, Const) and a.value == 0:
        return b
    if isinstance(b, Const) and b.value == 0:
        return a
    return ct.binary("+", a, b)


def scale(e: Expr, factor: int) -> Expr:
    return e if factor == 1 else ct.binary("*", e, Const(factor, I32))


class ExprMixin(PointerTestMixin):
    """Expression lowering; relies on the Lowerer for symbols, errors and emission."""

    # ------------------------------------------------------------------ entry points

    def rvalue(self, tree) -> Expr:
        """Lower ``tree`` to a kir value expression (memory references become loads)."""
        return self.rvalue_of(self.operand(tree), tree)

    def rvalue_of(self, value, tree) -> Expr:
        """``value``, lowered from ``tree`` already, as a kir value expression."""
        if isinstance(value, MemRef):
            return self.load_ref(value)
        if isinstance(value, (PtrVal, ArrVal)):
            raise self.error("a pointer or array is used where a value is expected", tree)
        if isinstance(value, StructVal) and _readable_carrier(value.type):
            return self.carrier_scalar(value, tree)  # an int read over four int8 values
        if isinstance(value, ComponentRef):
            return _component_value(value)
        if not isinstance(value, Expr):  # a struct, a group, a function object ...
            raise self.error(f"a {not_a_number(value)} is used where a number is expected",
                             tree, UnsupportedError)
        return value

    def pointer(self, tree) -> PtrVal:
        """Lower ``tree`` to a pointer value (arrays decay to pointers)."""
        return self.pointer_value(self.operand(tree), tree)

    def pointer_value(self, operand, tree) -> PtrVal:
        """``operand`` (lowered from ``tree``) as a pointer value, else a located error."""
        value = self.as_pointer(operand, tree)
        if value is None and isinstance(operand, StructVal):
            raise self.error(f"{operand.type} used as a pointer (a struct with data members "
                             "converts to nothing in kir: conversion operators are read on "
                             "structs without data only)", tree, UnsupportedError)
        if value is None and isinstance(operand, LocalAddr):
            raise self.error("address of a local variable kept in a pointer (kir passes a "
                             "local's address to a helper that writes through it, nothing "
                             "more)", tree, UnsupportedError)
        if value is None:
            raise self.error("expected a pointer into a buffer or array", tree)
        return value

    def as_pointer(self, value: Value, tree) -> PtrVal | None:
        if isinstance(value, PtrVal):
            return value
        if isinstance(value, StructVal) and value.address is not None:
            return value.address  # &blocks[i], a struct over bytes, passed as a pointer
        if isinstance(value, ArrVal):
            sym = value.sym
            rest = 1
            for d in sym.dims[value.used:]:
                rest *= d
            index = value.index if value.index is not None else Const(0, I32)
            return PtrVal(sym.name, scale(index, rest * count_of(sym.elem)), sym.elem)
        return None

    def operand(self, tree, discard: bool = False) -> Value:
        """Lower ``tree`` to a value, pointer, array or memory reference."""
        if isinstance(tree, Token):
            raise self.error(f"unexpected {tree.value!r}", tree)
        kind = tree.data
        if kind in BINOPS:
            return self._binary_chain(tree)
        handler = getattr(self, "_x_" + kind, None)
        if handler is None:
            raise self.error(f"unsupported expression ({kind})", tree, UnsupportedError)
        return handler(tree, discard)

    # ---------------------------------------------------------------------- operators

    def _binary_chain(self, tree) -> Value:
        spine = []
        node = tree
        while isinstance(node, Tree) and node.data in BINOPS:
            spine.append(node)
            node = node.children[0]
        folds = self.null_folds
        acc = self.operand(node)
        for t in reversed(spine):
            op = BINOPS[t.data]
            if op in ("&&", "||"):
                left = self.truth(acc, node)
                if isinstance(left, Const) and self.null_folds != folds \
                        and bool(left.value) == (op == "||"):
                    acc = left  # decided by a pointer test: the right side is not lowered
                    continue
                acc = self._short_circuit(op, left, t.children[-1])
            else:
                acc = self._apply_binary(op, acc, self.operand(t.children[-1]), t)
        return acc

    def load_ref(self, ref: MemRef) -> Expr:
        """The value of buffer element ``ref``: a load, converted when the code sees the
        element as the other signedness of its width (``(const char*)`` over bytes)."""
        info = self.buffers.get(ref.buffer)
        elem = info.elem if info is not None else ref.type
        if ct.same_width_ints(ref.type, elem):
            return ct.convert(Load(ref.buffer, ref.index, elem), ref.type)
        return Load(ref.buffer, ref.index, ref.type)

    def _value(self, value: Value, tree) -> Expr:
        if isinstance(value, MemRef):
            return self.load_ref(value)
        if isinstance(value, (PtrVal, ArrVal)):
            raise self.error("pointer used as a value (pointer comparisons and "
                             "conversions are not supported)", tree, UnsupportedError)
        if isinstance(value, NullVal):
            raise self.error("null pointer used as a value", tree, UnsupportedError)
        if isinstance(value, StructVal) and _readable_carrier(value.type):
            return self.carrier_scalar(value, tree)
        if isinstance(value, StructVal):
            raise self.error(f"{value.type} used where a scalar is expected", tree)
        if isinstance(value, (CgVal, Dim3Val)):
            raise self.error("a cooperative group used as a value", tree, UnsupportedError)
        if isinstance(value, AddrVal):
            raise self.error("a pointer's address used beyond an alignment test (kir knows "
                             f"addresses modulo {BUFFER_ALIGNMENT} bytes only)", tree,
                             UnsupportedError)
        if isinstance(value, StructArrVal):
            raise self.error("an array of structs used as a value", tree)
        if isinstance(value, ComponentRef):
            return _component_value(value)
        if isinstance(value, ComponentAddr):
            raise self.error("a pointer into a local vector used as a value", tree,
                             UnsupportedError)
        return value

    def vector_component(self, p: ComponentAddr, index: Expr, tree):
        """Component ``p.offset + index`` of a local vector: a Component when the index is a
        constant (checked against the vector's size), else a :class:`ComponentRef`."""
        at = ct.binary("+", ct.convert(p.offset, I32), ct.convert(index, I32))
        count = p.vector.type.count
        if isinstance(at, Const):
            if not 0 <= at.value < count:
                raise self.error(f"component {at.value} of a {p.vector.type} (it has {count})",
                                 tree)
            return Component(p.vector, at.value, p.vector.type.elem)
        return ComponentRef(p.vector, at)

    def _apply_binary(self, op: str, a: Value, b: Value, tree) -> Value:
        if op in ("==", "!=") and (pointerish(a) or pointerish(b)):
            return self._pointer_test(op, a, b, tree)
        if isinstance(a, AddrVal) or isinstance(b, AddrVal):
            return self._address_test(op, a, b, tree)
        pa, pb = self.as_pointer(a, tree), self.as_pointer(b, tree)
        if pa is not None or pb is not None:
            if op == "+" and pa is not None and pb is None:
                return self._ptr_add(pa, self._value(b, tree), tree)
            if op == "+" and pb is not None and pa is None:
                return self._ptr_add(pb, self._value(a, tree), tree)
            if op == "-" and pa is not None and pb is None:
                return self._ptr_add(pa, ct.unary("-", self._value(b, tree)), tree)
            what = "pointer difference" if op == "-" else f"operator '{op}' on pointers"
            raise self.error(f"{what} not supported", tree, UnsupportedError)
        made = self.user_operator(op, [a, b], [tree.children[0], tree.children[-1]], tree)
        if made is not None:
            return made
        a, b = self._value(a, tree), self._value(b, tree)
        made = self.half2_operator(op, [a, b])
        if made is not None:
            return made
        try:
            return ct.binary(op, self._value(a, tree), self._value(b, tree))
        except TypeError as exc:
            raise self.error(str(exc), tree, UnsupportedError) from None

    def _ptr_add(self, p: PtrVal, n: Expr, tree) -> PtrVal:
        if not ct.index_type_ok(n.type):
            raise self.error(f"pointer arithmetic with a {n.type} value", tree)
        return PtrVal(p.root, add_offsets(p.offset, scale(n, count_of(p.view))), p.view)

    def _short_circuit(self, op: str, left: Expr, right_tree) -> Expr:
        stmts, right = self.capture(lambda: self.rvalue(right_tree))
        if not stmts:
            return ct.binary(op, left, right)
        # The right side has effects: evaluate it only when C would.
        tmp = self.fresh("cond")
        self.emit(Declare(tmp, BOOL, ct.to_bool(left)))
        guard = Var(tmp, BOOL) if op == "&&" else ct.unary("!", Var(tmp, BOOL))
        body = stmts + [Assign(tmp, ct.to_bool(right), loc=self.cur_loc)]
        self.emit(If(guard, Block(tuple(body))))
        return Var(tmp, BOOL)

    def _x_ternary(self, tree, discard: bool) -> Value:
        cond_tree, a_tree, b_tree = tree.children
        cond, decided = self.truth_of(cond_tree)
        if decided:
            return self.operand(a_tree if cond.value else b_tree, discard)
        s1, a = self.capture(lambda: self.operand(a_tree))
        s2, b = self.capture(lambda: self.operand(b_tree))
        if isinstance(a, StructVal) or isinstance(b, StructVal):
            if not (isinstance(a, StructVal) and isinstance(b, StructVal) and a.type == b.type):
                raise self.error("'?:' arms of different types", tree)
            if s1 or s2:  # arms with effects: evaluate each into its own copy first
                self.out.extend(s1)
                a = self.struct_local(a.type, "sel", a, tree)
                self.out.extend(s2)
                b = self.struct_local(b.type, "sel", b, tree)
            return self.struct_select(cond, a, b, tree)
        pa, pb = self.as_pointer(a, a_tree), self.as_pointer(b, b_tree)
        if pa is not None or pb is not None:
            if pa is None or pb is None or pa.root != pb.root or s1 or s2:
                refused = self.error("pointer whose buffer depends on a condition", tree,
                                     UnsupportedError)
                if pa is None or pb is None or s1 or s2:
                    raise refused
                raise PointerChoice(refused, tree)  # two buffers: see pointer_choice.py
            off_t = common_type(pa.offset.type, pb.offset.type)
            return PtrVal(pa.root, Select(cond, ct.convert(pa.offset, off_t),
                                          ct.convert(pb.offset, off_t), off_t), pa.view)
        a, b = self._value(a, a_tree), self._value(b, b_tree)
        if a.type == b.type:
            t = a.type
        elif isinstance(a.type, VectorType) or isinstance(b.type, VectorType):
            raise self.error(f"'?:' arms of types {a.type} and {b.type}", tree)
        else:
            t = common_type(a.type, b.type)
        if not s1 and not s2:
            return Select(cond, ct.convert(a, t), ct.convert(b, t), t)
        tmp = self.fresh("sel")
        self.emit(Declare(tmp, t))
        then = Block(tuple(s1 + [Assign(tmp, ct.convert(a, t), loc=self.cur_loc)]))
        orelse = Block(tuple(s2 + [Assign(tmp, ct.convert(b, t), loc=self.cur_loc)]))
        self.emit(If(cond, then, orelse))
        return Var(tmp, t)

    def _unary(self, op: str, tree) -> Expr:
        value = self.operand(tree.children[-1])
        made = self.user_operator(op, [value], [tree.children[-1]], tree)
        if made is not None:
            return made
        made = self.half2_operator(op, [self._value(value, tree)])
        if made is not None:
            return made
        try:
            return ct.unary(op, self._value(value, tree))
        except TypeError as exc:
            raise self.error(str(exc), tree, UnsupportedError) from None

    def _x_neg(self, tree, discard):
        return self._unary("-", tree)

    def _x_lnot(self, tree, discard):
        value = self.operand(tree.children[-1])
        if pointerish(value):
            return Const(not self.truth(value, tree).value, BOOL)
        try:
            return ct.unary("!", self._value(value, tree))
        except TypeError as exc:
            raise self.error(str(exc), tree, UnsupportedError) from None

    def _x_bnot(self, tree, discard):
        return self._unary("~", tree)

    def _x_pos(self, tree, discard):
        value = self.rvalue(tree.children[-1])
        return ct.convert(value, ct.promote(value.type)) if isinstance(value.type,
                                                                        ScalarType) else value

    def _x_deref(self, tree, discard) -> MemRef:
        value = self.operand(tree.children[-1])
        if isinstance(value, StructVal):  # *this inside a member function
            return value
        if isinstance(value, LocalAddr):  # *out, out pointing to the caller's local
            return value.target
        if isinstance(value, ComponentAddr):
            return self.vector_component(value, Const(0, I32), tree)
        if isinstance(value, NullVal):
            raise self.error("a null pointer is read or written here (the spec gives it as "
                             "null, or it defaults to null)", tree, UnsupportedError)
        p = self.as_pointer(value, tree.children[-1])
        if p is None:
            raise self.error("expected a pointer into a buffer or array", tree.children[-1])
        self.byte_pool_used(p.root, tree, p.view)
        if isinstance(p.view, StructType):  # *reinterpret_cast<const S*>(p)
            return self.struct_in_memory(p.root, p.offset, p.view)
        return MemRef(p.root, p.offset, p.view)

    def _x_addr(self, tree, discard) -> PtrVal:
        target = self.operand(tree.children[-1])
        if isinstance(target, StructVal):  # &local_struct: the struct itself (*p, p->m)
            return target
        if isinstance(target, MemRef):
            return PtrVal(target.buffer, target.index, target.type)
        if isinstance(target, Var):  # &local: a helper's output parameter
            return LocalAddr(target)
        if isinstance(target, (PtrVal, ArrVal)):
            raise self.error("address of a pointer or of a whole array", tree, UnsupportedError)
        raise self.error("address of a local variable (only buffer and array elements "
                         "can be pointed to)", tree, UnsupportedError)

    def _x_comma(self, tree, discard) -> Value:
        self.operand(tree.children[0], discard=True)
        return self.operand(tree.children[1], discard)

    # ----------------------------------------------------------------- primary values

    def _x_int_lit(self, tree, discard) -> Expr:
        return ct.int_literal(str(tree.children[0]))

    def _x_neg_int_lit(self, tree, discard) -> Expr:
        return ct.unary("-", ct.int_literal(str(tree.children[0])))

    def _x_float_lit(self, tree, discard) -> Expr:
        return ct.float_literal(str(tree.children[0]))

    def _x_true_lit(self, tree, discard) -> Expr:
        return Const(True, BOOL)

    def _x_false_lit(self, tree, discard) -> Expr:
        return Const(False, BOOL)

    def _x_char_lit(self, tree, discard):
        raise self.error("char literals (char types) not supported", tree, UnsupportedError)

    def _x_string_lit(self, tree, discard):
        raise self.error("string literals not supported", tree, UnsupportedError)

    def _x_arrow(self, tree, discard):
        value = self.operand(tree.children[0])
        if isinstance(value, PtrVal) and isinstance(value.view, StructType):
            value = self.struct_in_memory(value.root, value.offset, value.view)
        if isinstance(value, StructVal):  # this->field, or p->field for a struct over a buffer
            return self.struct_member(value, str(tree.children[1]), tree)
        raise self.error(f"struct member access '->{tree.children[1]}' not supported", tree,
                         UnsupportedError)

    def _x_name(self, tree, discard) -> Value:
        ident = str(tree.children[0])
        sym = self.lookup(ident)
        if sym is None and "::" in ident:
            ident = normalize_name(ident)
            sym = next((found for found in map(self.lookup, qualified_suffixes(ident))
                        if found is not None), None)
        if isinstance(sym, RefSym):
            return sym.target
        if isinstance(sym, (StructVal, CgVal, FunctorVal, LambdaVal)):
            return sym
        if isinstance(sym, StructArraySym):
            return StructArrVal(sym)
        if isinstance(sym, TypeSym):
            raise self.error(f"type '{ident}' used as a value", tree)
        if sym is None and ident == "this":
            raise self.error("'this' outside a member function", tree, UnsupportedError)
        if sym is None and ident in ("nullptr", "NULL"):
            return NULL_POINTER
        if sym is None and "numeric_limits" in ident:
            raise self.error(f"'{ident}' must be called: {ident}()", tree)
        if isinstance(sym, VarSym):
            return Var(sym.name, sym.type)
        if isinstance(sym, ConstSym):
            self.null_folds += sym.pointer_test  # (truth_of: a pointer test decided it)
            return sym.value
        if isinstance(sym, PtrSym):
            if sym.root is None:
                raise self.error(f"pointer '{ident}' is used before it points anywhere", tree)
            offset = Var(sym.offset_var, OFFSET_TYPE) if sym.offset_var else sym.offset_expr
            return PtrVal(sym.root, offset, sym.view)
        if isinstance(sym, ArraySym):
            if not sym.dims:
                return MemRef(sym.name, Const(0, I32), sym.elem)
            return ArrVal(sym)
        if ident == "warpSize":
            return Special("warp_size")
        if sym is None and ident in ("true", "false"):  # as a template argument's default
            return Const(ident == "true", BOOL)
        if ident in ct.FLOAT_CONSTANTS:
            return ct.FLOAT_CONSTANTS[ident]
        if ident in SPECIAL_OBJECTS:
            raise self.error(f"'{ident}' must be used as {ident}.x, .y or .z", tree)
        if sym is None and "::" in ident:
            value = self.member_constant(ident)
            if value is not None:
                return value
        if ident in self.functions or isinstance(sym, MethodRef):
            raise self.error(f"function '{ident}' used as a value (function pointers not "
                             "supported)", tree, UnsupportedError)
        raise self.error(f"unknown identifier '{ident}'", tree)

    def _x_member(self, tree, discard) -> Value:
        base, field_tok = tree.children
        field = str(field_tok)
        if (isinstance(base, Tree) and base.data == "name"
                and str(base.children[0]) in SPECIAL_OBJECTS
                and self.lookup(str(base.children[0])) is None):
            if field not in ("x", "y", "z"):
                raise self.error(f"'{base.children[0]}' has no member '{field}'", tree)
            return Special(SPECIAL_OBJECTS[str(base.children[0])], field)
        value = self.operand(base)
        if isinstance(value, StructVal):
            return self.struct_member(value, field, tree)
        if isinstance(value, Dim3Val):
            return self.dim3_member(value, field, tree)
        if isinstance(value, CgVal):
            raise self.error(f"'{field}' of a cooperative group must be called: {field}()",
                             tree, UnsupportedError)
        vtype = value.type if isinstance(value, (Expr, MemRef)) else None
        if not isinstance(vtype, VectorType):
            what = vtype if vtype is not None else "a pointer or array"
            raise self.error(f"struct member access '.{field}' on {what} not supported "
                             "(only vector components .x .y .z .w)", tree, UnsupportedError)
        k = COMPONENTS.get(field, -1)
        if not 0 <= k < vtype.count:
            raise self.error(f"{vtype} has no component '.{field}'", tree)
        if isinstance(value, MemRef):
            return MemRef(value.buffer, add_offsets(value.index, Const(k, I32)), vtype.elem)
        return Component(value, k, vtype.elem)

    def _x_index(self, tree, discard) -> Value:
        base_tree, index_tree = tree.children
        base = self.operand(base_tree)
        if isinstance(base, StructVal):  # s[i]: its operator[]
            return self.call_method(base, base.type, "operator[]", [index_tree], tree, discard)
        if isinstance(base, CgVal) and base.type.kind == "cub_storage":
            self.rvalue(index_tree)  # (one of an array of TempStorage: all are alike)
            return base
        if isinstance(base, ComponentAddr):  # reinterpret_cast<float*>(&v)[k]
            return self.vector_component(base, self.rvalue(index_tree), index_tree)
        if isinstance(base, LocalAddr):  # out[0] for *out
            if self.constant(index_tree, "the index into a pointer to a local") != 0:
                raise self.error("a pointer to a local variable indexed past it", index_tree,
                                 UnsupportedError)
            return base.target
        index = self.rvalue(index_tree)
        if not ct.index_type_ok(index.type):
            raise self.error(f"array index of type {index.type} (must be an integer)",
                             index_tree)
        return self.element(base, index, tree)

    def element(self, base, index: Expr, tree) -> Value:
        """``base[index]`` for an evaluated array, pointer or array of structs."""
        if isinstance(base, ArrVal):
            self.byte_pool_used(base.sym.name, tree)
            sym = base.sym
            flat = index if base.index is None else add_offsets(
                ct.binary("*", base.index, Const(sym.dims[base.used], I32)), index)
            if base.used + 1 < len(sym.dims):
                return ArrVal(sym, flat, base.used + 1)
            return MemRef(sym.name, scale(flat, count_of(sym.elem)), sym.elem)
        if isinstance(base, PtrVal):
            self.byte_pool_used(base.root, tree, base.view)
            step = scale(index, count_of(base.view))
            if isinstance(base.view, StructType):
                return self.struct_in_memory(base.root, add_offsets(base.offset, step),
                                             base.view)
            return MemRef(base.root, add_offsets(base.offset, step), base.view)
        if isinstance(base, StructArrVal):
            return self.struct_element(base, index)
        if isinstance(base, NullVal):
            raise self.error("a null pointer is read or written here (the spec gives it as "
                             "null, or it defaults to null)", tree, UnsupportedError)
        raise self.error("subscript of a value that is not an array or pointer", tree)

    def _x_call(self, tree, discard) -> Value:
        callee, args = tree.children
        arg_trees = list(args.children) if args is not None else []
        if isinstance(callee, Tree) and callee.data == "member":
            obj = self.operand(callee.children[0])
            method = str(callee.children[1])
            if isinstance(obj, CgVal) and obj.type.kind in COLLECTIVE_KINDS:
                return self.cub_method(obj.type, method, arg_trees, tree)
            if isinstance(obj, CgVal):
                return self.cg_method(obj.type, method, arg_trees, tree)
            if isinstance(obj, StructVal):
                return self.call_method(obj, obj.type, method, arg_trees, tree, discard)
            raise self.error(f"method call '.{method}()' not supported (member functions)",
                             tree, UnsupportedError)
        if isinstance(callee, Tree) and callee.data == "arrow":  # this->f(...)
            obj = self.operand(callee.children[0])
            if isinstance(obj, PtrVal) and isinstance(obj.view, StructType):
                obj = self.struct_in_memory(obj.root, obj.offset, obj.view)
            if isinstance(obj, StructVal):
                return self.call_method(obj, obj.type, str(callee.children[1]), arg_trees,
                                        tree, discard)
        if isinstance(callee, Tree) and callee.data == "template_member":  # S<T>::f(...)
            struct, member = self.template_member(callee)
            return self.call_method(None, struct, member, arg_trees, tree, discard)
        if isinstance(callee, Tree) and callee.data == "template_id":
            return self.lower_call(str(callee.children[0]), arg_trees, tree, discard,
                                   callee.children[1])
        if not (isinstance(callee, Tree) and callee.data == "name"):
            made = self.operand(callee) if isinstance(callee, Tree) and callee.data in (
                "func_cast", "brace_cast", "call", "index", "lambda_expr") else None
            if isinstance(made, LambdaVal):  # [&] { ... }(): called where it is written
                return self.call_lambda(made, arg_trees, tree, discard)
            if isinstance(made, FunctorVal):  # MaxOp<T>()(a, b)
                return self.call_functor(made, arg_trees, tree, discard)
            if isinstance(made, CgVal) and made.type.kind in OPERATOR_KINDS:  # cub::Max()(a, b)
                return self.cub_apply(made.type, arg_trees, tree)
            if isinstance(made, StructVal):  # s.scaled()(x): the object's operator()
                return self.call_method(made, made.type, "operator()", arg_trees, tree,
                                        discard)
            raise self.error("call of something that is not a function name (function "
                             "pointers not supported)", tree, UnsupportedError)
        return self.lower_call(str(callee.children[0]), arg_trees, tree, discard)

    def _x_template_member(self, tree, discard):
        name, targs, member = tree.children
        trait = self.type_trait(str(name), targs, tree) if str(member) == "::value" else None
        if trait is not None:  # std::is_same<T, float>::value
            return trait
        struct, member = self.template_member(tree)
        value = struct.static(member)
        if value is None:
            raise self.error(f"{struct} has no static constant '{member}'", tree)
        return value

    def _x_template_id(self, tree, discard):
        trait = self.type_trait(str(tree.children[0]), tree.children[1], tree)
        if trait is not None:  # std::is_same_v<T, float>
            return trait
        raise self.error(f"'{tree.children[0]}<...>' must be called", tree)


def _readable_carrier(t) -> bool:
    """A carrier read as the value it stands for: a scalar, or a vector over integer
    elements (a ``half2`` over bytes); a vector over floats (``int4`` over bf16) travels
    as its elements."""
    if isinstance(t.carries, ScalarType):
        return True
    elem = t.fields[0][1].elem if t.carries is not None else None
    return isinstance(t.carries, VectorType) and isinstance(elem, ScalarType) and elem.is_int


def _component_value(ref: ComponentRef) -> Expr:
    """The component of a local vector chosen as the kernel runs: a select over them."""
    vec = ref.vector
    picked: Expr = Component(vec, vec.type.count - 1, ref.type)
    for j in range(vec.type.count - 2, -1, -1):
        picked = Select(ct.binary("==", ref.index, Const(j, I32)), Component(vec, j, ref.type),
                        picked, ref.type)
    return picked
