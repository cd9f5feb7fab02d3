"""POD structs in the CUDA lowering (a mixin of the Lowerer).

kir IR has no structs, so they are taken apart (scalar replacement, as compilers do): a
struct variable is one local per field (named ``var_field``), an array of structs is one
array per field (structure of arrays), a struct-valued expression is a
:class:`StructVal` holding one value per field. Member access picks a field's value;
assignment, initialization (``= {a, b}``, ``= other``, ``Pair{a, b}``), by-value arguments
and ``return`` copy field by field; a reference binds the caller's fields themselves.
A struct passed to the kernel by value (``RopeParams p``) is one scalar parameter per field,
named ``p_field`` (``p_inner_field`` for a nested struct): the spec gives each, as
``p.field = { value = ... }`` or ``p_field = { ... }``, and the emitted kernel takes them
one by one. A pointer member (``float* elements``) is a pointer variable in a struct local
(its buffer known statically, as any pointer's) and a buffer argument of a struct parameter.
Pointers to structs in buffers are outside the subset: a spec describes buffers of scalars.
"""

from __future__ import annotations

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.values import (
    carries,
    OFFSET_TYPE,
    ArraySym,
    ArrVal,
    BufferInfo,
    FieldArray,
    FieldPointer,
    MemRef,
    PtrSym,
    PtrVal,
    StructArraySym,
    StructType,
    StructVal,
    count_of,
    field_offsets,
)
from kir.frontends.cuda.lower_bits import carrier_type
from lark import Tree

from kir.errors import UnsupportedError
from kir.ir import Alloc, Component, Const, Declare, Expr, Load, MakeVector, Param, Select, Var
from kir.ir.types import I8, I32, U8, PointerType, ScalarType, VectorType


def struct_fields(t: StructType, base: str) -> list[tuple[str, object]]:
    """The scalar parameters a by-value kernel parameter ``base`` of struct type ``t``
    becomes: ``(base_field, type)`` in declaration order, nested structs flattened
    (``base_inner_field``); array members are kept as :class:`FieldArray` (refused)."""
    out: list[tuple[str, object]] = []
    for field, ft in t.fields:
        if isinstance(ft, StructType):
            out.extend(struct_fields(ft, f"{base}_{field}"))
        else:
            out.append((f"{base}_{field}", ft))
    return out


class StructArrVal:
    """An array of structs in an expression, ``used`` of its dimensions indexed so far."""

    def __init__(self, sym: StructArraySym, index: Expr | None = None, used: int = 0) -> None:
        self.sym, self.index, self.used = sym, index, used


class StructMixin:
    """Struct locals, arrays of structs, struct values; relies on the Lowerer."""

    # ---------------------------------------------------------------- declaring

    def struct_local(self, t: StructType, base: str, init: StructVal | None = None,
                     tree=None) -> StructVal:
        """Declare one local per field of ``t`` (initialized from ``init`` when given)."""
        self.structs_taken_apart = True
        parts: dict[str, object] = {}
        for field, ft in t.fields:
            value = init.parts[field] if init is not None else None
            if isinstance(ft, StructType):
                parts[field] = self.struct_local(ft, f"{base}_{field}", value, tree)
            elif isinstance(ft, FieldArray):
                arr = self._field_array(ft, f"{base}_{field}", "local")
                parts[field] = ArrVal(arr)
                if value is not None:
                    self._copy_array(ArrVal(arr), value, ft, tree, t.member_alignment(field))
            elif isinstance(ft, FieldPointer):
                sym = PtrSym(None, ft.view, self.fresh(f"{base}_{field}_off"))
                init_offset = None
                if value is not None:
                    p = self.pointer_part(value, field, tree)
                    sym.root, init_offset = p.root, ct.convert(p.offset, OFFSET_TYPE)
                self.emit(Declare(sym.offset_var, OFFSET_TYPE, init_offset, loc=self.cur_loc))
                parts[field] = sym
            else:
                name = self.fresh(f"{base}_{field}")
                expr = None if value is None else self.coerce(self.value_of(value, tree), ft,
                                                              tree)
                if init is None:  # made without a value: its default member initializer
                    expr = dict(t.defaults).get(field)
                self.emit(Declare(name, ft, expr, loc=self.cur_loc))
                parts[field] = Var(name, ft)
        return StructVal(t, parts)

    def struct_kernel_param(self, ident: str, t: StructType, assigned: bool,
                            tree) -> list[Param]:
        """A kernel parameter of struct type, by value: one parameter per field (see the
        module text), bound as the struct; a kernel that assigns to it gets a local copy."""
        self.structs_taken_apart = True
        params: list[Param] = []
        for name, ft in struct_fields(t, ident):
            if isinstance(ft, FieldArray):
                raise self.error(f"kernel parameter '{ident}' of {t}: its array member "
                                 f"'{name}' cannot be passed as scalars", tree,
                                 UnsupportedError)
            if name in self.used:
                raise self.error(f"kernel parameter '{ident}' of {t}: its field would be the "
                                 f"parameter '{name}', which the kernel already has", tree,
                                 UnsupportedError)
            self.used.add(name)
            if isinstance(ft, FieldPointer):
                elem = ct.scalar_of(ft.view)
                self.buffers[name] = BufferInfo(elem, "global", ft.const)
                params.append(Param(name, PointerType(elem, "global", ft.const, False),
                                    loc=self.loc_of(tree)))
            else:
                params.append(Param(name, ft, loc=self.loc_of(tree)))

        def part(ft, name: str):
            if isinstance(ft, StructType):
                return bound(ft, name)
            if isinstance(ft, FieldPointer):
                return PtrSym(name, ft.view, offset_expr=Const(0, OFFSET_TYPE))
            return Var(name, ft)

        def bound(t: StructType, base: str) -> StructVal:
            return StructVal(t, {field: part(ft, f"{base}_{field}") for field, ft in t.fields})

        self.used.add(ident)
        value = bound(t, ident)
        if assigned:  # C passes by value: the kernel's writes go to its own copy
            self.cur_loc = self.loc_of(tree)
            value = self.struct_local(t, ident, value, tree)
            self.prologue.extend(self.out)
            self.out.clear()
        self.bind(ident, value)
        return params

    def _field_array(self, ft: FieldArray, base: str, space: str) -> ArraySym:
        name = self.fresh(base)
        total = count_of(ft.elem)
        for n in ft.dims:
            total *= n
        sym = ArraySym(name, ft.elem, ft.dims, space)
        alloc = Alloc(name, ct.scalar_of(ft.elem), total, space, False, loc=self.cur_loc)
        (self.prologue if space == "shared" else self.out).append(alloc)
        self.buffers[name] = BufferInfo(ct.scalar_of(ft.elem), space)
        return sym

    def struct_array(self, t: StructType, base: str, dims: tuple[int, ...],
                     space: str) -> StructArraySym:
        """An array of ``t`` as one array per field."""
        fields: dict[str, object] = {}
        for field, ft in t.fields:
            if isinstance(ft, StructType):
                fields[field] = self.struct_array(ft, f"{base}_{field}", dims, space)
            elif isinstance(ft, (FieldArray, FieldPointer)):
                kind = "array" if isinstance(ft, FieldArray) else "pointer"
                raise self.error(f"arrays of struct '{t.name}', which has the {kind} member "
                                 f"'{field}', not supported", None, UnsupportedError)
            else:
                fields[field] = self._field_array(FieldArray(ft, dims), f"{base}_{field}",
                                                  space)
        return StructArraySym(t, dims, fields)

    def declare_struct(self, ident: str, t: StructType, dims: list, quals: set, init,
                       tree) -> None:
        """``Pair p;``, ``Pair p = q;``, ``Pair p = {a, b};``, ``__shared__ Pair s[32];``."""
        if init is None and t.default_constructor and not dims and "__shared__" not in quals:
            self.bind(ident, self.construct(t, [], tree, ident))  # its own default constructor
            return
        if dims or "__shared__" in quals:
            if init is not None:
                raise self.error("arrays of structs with an initializer not supported", tree,
                                 UnsupportedError)
            sizes = self.array_sizes(ident, dims, tree)
            space = "shared" if "__shared__" in quals else "local"
            if not sizes:  # a __shared__ struct scalar: an array of one
                sym = self.struct_array(t, ident, (1,), space)
                self.bind(ident, self.struct_element(StructArrVal(sym), Const(0, I32)))
                return
            self.bind(ident, self.struct_array(t, ident, tuple(sizes), space))
            return
        value = None
        if init is not None:
            value = self.struct_value(t, init, tree)
        self.bind(ident, self.struct_local(t, ident, value, tree))

    def struct_value(self, t: StructType, tree, where=None) -> StructVal:
        """The value of an initializer for a ``t``: a braced list or a struct expression."""
        if isinstance(tree, Tree) and tree.data in ("init_list", "return_init"):
            items = [c for c in tree.children if c is not None]
            return self.struct_from_list(t, items, tree)
        value = self.operand(tree)
        if t.carries is not None and not isinstance(value, StructVal):
            return self.carrier_of(t, self.rvalue_of(value, tree), tree)  # b[i].scale = h
        if not isinstance(value, StructVal) or value.type != t:
            what = value.type if isinstance(value, StructVal) else "a value that is not a struct"
            raise self.error(f"cannot initialize {t} from {what}", where or tree)
        return value

    def struct_from_list(self, t: StructType, items: list, tree) -> StructVal:
        """``{a, b}`` for a struct: fields in order, missing ones their default member
        initializer or zero; for a struct with constructors, the one taking ``items``."""
        if t.constructors:
            return self.construct(t, items, tree)
        if len(items) > len(t.fields):
            raise self.error(f"too many initializers for {t}", tree)
        parts: dict[str, object] = {}
        for k, (field, ft) in enumerate(t.fields):
            item = items[k] if k < len(items) else None
            if isinstance(ft, StructType):
                parts[field] = self.struct_value(ft, item, tree) if item is not None \
                    else self.struct_from_list(ft, [], tree)
            elif isinstance(ft, FieldArray):
                if item is not None:
                    raise self.error(f"initializer for array member '{field}' not supported",
                                     item, UnsupportedError)
                parts[field] = None
            elif isinstance(ft, FieldPointer):
                parts[field] = self.pointer(item) if item is not None else None
            elif item is None:
                parts[field] = dict(t.defaults).get(field, _zero(ft))
            elif isinstance(item, Tree) and item.data == "init_list":
                parts[field] = self._vector_init(ft, item, tree)
            else:
                parts[field] = self.coerce(self.rvalue(item), ft, item)
        return StructVal(t, parts)

    # ------------------------------------------------------------- using values

    def struct_element(self, arr: StructArrVal, index: Expr) -> StructVal | StructArrVal:
        """``arr[index]``: a smaller array, or a struct of memory references."""
        sym = arr.sym
        flat = index if arr.index is None else ct.binary(
            "+", ct.binary("*", arr.index, Const(sym.dims[arr.used], I32)), index)
        if arr.used + 1 < len(sym.dims):
            return StructArrVal(sym, flat, arr.used + 1)
        return self._element_of(sym, flat)

    def _element_of(self, sym: StructArraySym, flat: Expr) -> StructVal:
        parts: dict[str, object] = {}
        for field, ft in sym.type.fields:
            fsym = sym.fields[field]
            if isinstance(fsym, StructArraySym):
                parts[field] = self._element_of(fsym, flat)
            else:
                step = count_of(fsym.elem)
                index = flat if step == 1 else ct.binary("*", flat, Const(step, I32))
                parts[field] = MemRef(fsym.name, index, fsym.elem)
        return StructVal(sym.type, parts)

    def struct_member(self, value: StructVal, field: str, tree):
        static = value.type.static(field)
        if static is not None:
            return static
        if value.type.field(field) is None:
            raise self.error(f"{value.type} has no member '{field}'", tree)
        part = value.parts[field]
        if part is None:
            raise self.error(f"member '{field}' has no value here", tree, UnsupportedError)
        if isinstance(part, PtrSym):
            return self.member_pointer(value, field, tree)
        return part

    def member_pointer(self, value: StructVal, field: str, tree) -> PtrVal:
        """The pointer a pointer member holds now."""
        return self.pointer_part(value.parts[field], field, tree)

    def pointer_part(self, part, field: str, tree) -> PtrVal:
        """A pointer member's part (a pointer variable, or a value being copied) as the
        pointer it holds now."""
        if isinstance(part, PtrVal):
            return part
        if not isinstance(part, PtrSym) or part.root is None:
            raise self.error(f"pointer member '{field}' is used before it points anywhere",
                             tree)
        offset = Var(part.offset_var, OFFSET_TYPE) if part.offset_var else part.offset_expr
        return PtrVal(part.root, offset, part.view)

    def pointer_member(self, tree) -> PtrSym | None:
        """The pointer variable ``tree`` names when it is a struct's pointer member
        (``s.elements``, what an assignment changes), else None."""
        if not (isinstance(tree, Tree) and tree.data == "member"):
            return None
        base_tree, field = tree.children
        if isinstance(base_tree, Tree) and base_tree.data == "name":
            base = self.lookup(str(base_tree.children[0]))
        elif isinstance(base_tree, Tree) and base_tree.data == "member":
            base = self.operand(base_tree)
        else:
            return None
        if isinstance(base, StructVal):
            part = base.parts.get(str(field))
            if isinstance(part, PtrSym):
                return part
        return None

    def assign_struct(self, target: StructVal, value: StructVal, tree) -> None:
        """``target = value`` field by field (``value``'s fields are read first, so
        ``a = swap_fields(a)`` and ``a = a`` are safe)."""
        if target.type != value.type:
            raise self.error(f"cannot assign {value.type} to {target.type}", tree)
        reads = self._read_all(value, tree)
        self._write_all(target, reads, tree)

    def _read_all(self, value: StructVal, tree) -> dict:
        out: dict[str, object] = {}
        for field, ft in value.type.fields:
            part = value.parts[field]
            if isinstance(ft, StructType):
                out[field] = self._read_all(part, tree)
            elif isinstance(ft, FieldArray) or part is None:
                out[field] = part
            elif isinstance(ft, FieldPointer):
                p = self.member_pointer(value, field, tree)
                offset = p.offset
                if not isinstance(offset, (Const, Var)):
                    tmp = self.fresh("field_off")
                    self.emit(Declare(tmp, OFFSET_TYPE, ct.convert(offset, OFFSET_TYPE),
                                      loc=self.cur_loc))
                    offset = Var(tmp, OFFSET_TYPE)
                out[field] = PtrVal(p.root, offset, p.view)
            else:
                expr = self.value_of(part, tree)
                if not isinstance(expr, (Const, Var)):
                    tmp = self.fresh("field")
                    self.emit(Declare(tmp, expr.type, expr, loc=self.cur_loc))
                    expr = Var(tmp, expr.type)
                out[field] = expr
        return out

    def _write_all(self, target: StructVal, reads: dict, tree) -> None:
        for field, ft in target.type.fields:
            part, value = target.parts[field], reads[field]
            if isinstance(ft, StructType):
                self._write_all(part, value, tree)
            elif isinstance(ft, FieldArray):
                if value is not None:
                    self._copy_array(part, value, ft, tree,
                                     target.type.member_alignment(field))
            elif isinstance(ft, FieldPointer):
                if value is not None:
                    self.set_pointer(part, value, tree)
            elif value is not None:
                self.write(part, value, tree)

    def _copy_array(self, target: ArrVal | PtrVal, source, ft: FieldArray, tree,
                    aligned: int = 0) -> None:
        """Array member ``ft`` copied element by element; either side may be a local array
        (``ArrVal``) or, for a struct read over a buffer, a run of the buffer (``PtrVal``).
        ``aligned``: the bytes the run is aligned to, as the code's own access asserts
        (``*reinterpret_cast<const int4*>(floats)``, an ``alignas(16)`` struct): its
        elements then move several at a time as vector loads or stores (four floats in one;
        eight bf16 in two of four: kir's vectors have four lanes at most; two floats of an
        8-byte aligned pair as a float2)."""
        if not isinstance(source, (ArrVal, PtrVal)) or any(
                isinstance(side, ArrVal) and side.sym.dims != ft.dims
                for side in (source, target)):
            raise self.error("array member copied from something else", tree,
                             UnsupportedError)
        elem, total = ft.elem, 1
        for n in ft.dims:
            total *= n
        lanes = _vector_lanes(elem, total, aligned)
        if lanes and isinstance(source, PtrVal) != isinstance(target, PtrVal):
            for first in range(0, total, lanes):
                self._copy_vector(target, source, VectorType(elem, lanes), first, tree)
            return
        step = count_of(elem)
        for k in range(total):
            read = _element(source, k * step, elem)
            self.write(_element(target, k * step, elem), Load(read.buffer, read.index, elem),
                       tree)

    def _copy_vector(self, target, source, vector: VectorType, first: int, tree) -> None:
        """Elements ``first`` on between a local array and a buffer as one vector access."""
        if isinstance(source, PtrVal):
            name = self.fresh(f"{target.sym.name}_v")
            read = _element(source, first, vector)
            self.emit(Declare(name, vector, Load(read.buffer, read.index, vector),
                              loc=self.cur_loc))
            for k in range(vector.count):
                self.write(_element(target, first + k, vector.elem),
                           Component(Var(name, vector), k, vector.elem), tree)
            return
        lanes = tuple(Load(source.sym.name, Const(first + k, I32), vector.elem)
                      for k in range(vector.count))
        self.write(_element(target, first, vector), MakeVector(lanes, vector), tree)

    # ---------------------------------------------------------- structs over buffers

    def struct_pointer(self, p: PtrVal, t: StructType, root_elem, tree) -> PtrVal:
        """``reinterpret_cast<const S*>(p)``: a pointer seeing the buffer as ``S`` values,
        allowed when every member of ``S`` is made of the buffer's element type."""
        elem, _count = t.scalars()
        if elem is None and root_elem in (I8, U8):
            self._check_byte_layout(t, tree)
            return PtrVal(p.root, p.offset, t)  # quantized blocks: members of mixed types
        if elem != root_elem:
            raise self.error(f"reading {t} over a {root_elem} buffer needs all its members "
                             f"made of {root_elem} (scalars, vectors, one-dimensional arrays)",
                             tree, UnsupportedError)
        return PtrVal(p.root, p.offset, t)

    def _check_byte_layout(self, t: StructType, tree) -> None:
        """A struct kir reads over bytes: members of scalars, vectors, one-dimensional arrays
        of them and such structs (no pointers)."""
        for name, ft in t.fields:
            if isinstance(ft, StructType):
                self._check_byte_layout(ft, tree)
            elif isinstance(ft, FieldPointer) or isinstance(ft, FieldArray) and (
                    len(ft.dims) != 1 or isinstance(ft.elem, StructType)):
                raise self.error(f"reading {t} over bytes: member '{name}' is a pointer or an "
                                 "array kir does not read over bytes", tree, UnsupportedError)

    def struct_in_memory(self, root: str, offset: Expr, t: StructType) -> StructVal:
        """The struct ``t`` stored at scalar ``offset`` of buffer or array ``root``: its
        members as memory references (an array member as a pointer to its first
        element)."""
        self.structs_taken_apart = True
        if t.scalars()[0] is None:  # mixed members: over bytes, in C's layout
            made = self._struct_in_bytes(root, offset, t)
            made.address = PtrVal(root, offset, t)
            return made
        parts: dict[str, object] = {}
        at = 0
        for field, ft in t.fields:
            where = offset if at == 0 else ct.binary("+", offset, Const(at, offset.type))
            if isinstance(ft, StructType):
                parts[field] = self.struct_in_memory(root, where, ft)
            elif isinstance(ft, FieldArray):
                parts[field] = PtrVal(root, where, ft.elem)
            else:
                parts[field] = MemRef(root, where, ft)
            at += count_of(ft.elem) * ft.dims[0] if isinstance(ft, FieldArray) else count_of(ft)
        return StructVal(t, parts)

    def _struct_in_bytes(self, root: str, offset: Expr, t: StructType) -> StructVal:
        """``t`` at byte ``offset`` of byte buffer ``root``: one-byte members and arrays of
        them as the bytes they are; wider members as carriers of their bytes, read as the
        value they stand for (a ``half`` scale from its two bytes, little-endian)."""
        byte = self.buffers[root].elem
        parts: dict[str, object] = {}
        for (field, ft), at in zip(t.fields, field_offsets(t)):
            where = offset if at == 0 else ct.binary("+", offset, Const(at, offset.type))
            if isinstance(ft, StructType):
                parts[field] = self._struct_in_bytes(root, where, ft)
            elif isinstance(ft, FieldArray):
                one = ct.scalar_of(ft.elem).nbytes == 1 and isinstance(ft.elem, ScalarType)
                parts[field] = PtrVal(root, where, ft.elem if one else
                                      carrier_type(ft.elem, byte))
            elif ft.nbytes == 1:
                parts[field] = MemRef(root, where, ft)
            else:
                parts[field] = StructVal(carrier_type(ft, byte), {"bits": PtrVal(root, where,
                                                                                 byte)})
        return StructVal(t, parts)

    def struct_select(self, cond: Expr, a: StructVal, b: StructVal, tree) -> StructVal:
        """``cond ? a : b`` on structs: a field-by-field select (an rvalue)."""
        parts: dict[str, object] = {}
        for field, ft in a.type.fields:
            pa, pb = a.parts[field], b.parts[field]
            if isinstance(ft, StructType):
                parts[field] = self.struct_select(cond, pa, pb, tree)
            elif isinstance(ft, FieldArray):
                raise self.error("'?:' on structs with array members not supported", tree,
                                 UnsupportedError)
            elif isinstance(ft, FieldPointer):
                p, q = self.member_pointer(a, field, tree), self.member_pointer(b, field, tree)
                if p.root != q.root:
                    raise self.error(f"'?:' picks pointer member '{field}' from two buffers "
                                     f"('{p.root}' and '{q.root}'); its buffer must be known "
                                     "statically", tree, UnsupportedError)
                parts[field] = PtrVal(p.root, Select(cond, ct.convert(p.offset, OFFSET_TYPE),
                                                     ct.convert(q.offset, OFFSET_TYPE),
                                                     OFFSET_TYPE), p.view)
            else:
                parts[field] = Select(cond, self.value_of(pa, tree), self.value_of(pb, tree),
                                      ft)
        return StructVal(a.type, parts)

    def struct_argument(self, t, arg, is_ref: bool, ident: str, atree) -> StructVal:
        """A struct argument: the caller's struct itself for a reference, else a copy."""
        if not isinstance(arg, StructVal) or (t is not None and arg.type != t
                                              and not carries(t, arg)):
            raise self.error(f"argument for '{ident}' must be a {t}", atree)
        if is_ref:
            return arg
        return self.struct_local(arg.type, ident, arg, atree)


def _vector_lanes(elem, total: int, aligned: int) -> int:
    """Lanes of the vectors that move ``total`` elements aligned to ``aligned`` bytes: four
    (4- and 2-byte scalars), or two (4-byte scalars: float2); 0 when they move one by one."""
    if not isinstance(elem, ScalarType) or elem.nbytes not in (2, 4):
        return 0
    for lanes in (4, 2):
        if total % lanes == 0 and aligned >= lanes * elem.nbytes \
                and (lanes == 4 or elem.nbytes == 4):
            return lanes
    return 0


def _element(value, at: int, elem) -> MemRef:
    if isinstance(value, ArrVal):
        return MemRef(value.sym.name, Const(at, I32), elem)
    index = value.offset if at == 0 else ct.binary("+", value.offset,
                                                   Const(at, value.offset.type))
    return MemRef(value.root, index, elem)


def _zero(t) -> Expr:
    if isinstance(t, VectorType):
        zero = ct.convert(Const(0, I32), t.elem)
        return MakeVector((zero,) * t.count, t)
    return ct.convert(Const(0, I32), t)
