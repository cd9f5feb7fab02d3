"""Bits moved between types (a mixin of the Lowerer): a buffer read through a pointer to a
vector of other elements, and ``memcpy`` between locals.

LLM training code moves 16 bytes at a time this way: a loader reads
``*reinterpret_cast<const int4*>(p)`` over a float or bf16 buffer, a packed type's
constructor ``memcpy``s those bits into its ``T payload[16 / sizeof(T)]``, and a store
``memcpy``s them back into an ``int4`` written through ``reinterpret_cast<int4*>(out)``.

kir keeps no raw bytes. A vector read over a buffer of other elements is a *carrier*: a
struct of the buffer's elements that stands for the vector (an ``int4`` over bf16 is eight
bf16 values), so the bits travel as the values they are and nothing is converted. A carrier
may go where the code declares the vector type — a parameter, a local, a function's result —
be copied by ``memcpy`` and be stored back through a pointer of that type. ``memcpy`` copies
element by element: elements of one type directly, of one size and another type through a
``bitcast``. A carrier of integer elements is read as the scalar (or short vector) it stands
for, its elements' bits assembled little-endian (an ``int`` over four int8 values, a block's
``half`` scale over two bytes: :meth:`BitsMixin.carrier_scalar`), and written from one, split
back into them (:meth:`BitsMixin.carrier_of`). What would need bits split across float
elements — reading a carrier of floats as the vector it stands for (``v.x`` of an ``int4``
made of floats), copying between elements of different sizes — is refused where it is
written.
"""

from __future__ import annotations

import numpy as np
from lark import Tree

from kir.errors import UnsupportedError
from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.values import (
    struct_size,
    ArraySym,
    ArrVal,
    FieldArray,
    FieldPointer,
    MemRef,
    PtrVal,
    StructType,
    StructVal,
    VarSym,
)
from kir.ir import Call, Component, Const, Expr, MakeVector, Store, Var
from kir.ir.types import I32, U8, U16, U32, U64, ScalarType, VectorType

_UNSIGNED = {1: U8, 2: U16, 4: U32, 8: U64}  # an element's bits as an unsigned integer

MEMCPY = ("memcpy", "std::memcpy", "__builtin_memcpy")
# A thread's memcpy moves a pack or a small struct; kir writes one statement per element, so
# a copy much larger than a pack is refused rather than unrolled.
MAX_MEMCPY_BYTES = 4096


def carrier_type(nominal, elem: ScalarType) -> StructType:
    """The struct standing for a ``nominal`` value (a vector or scalar type) made of
    ``elem`` values: ``nominal.nbytes / elem.nbytes`` of them in one array member."""
    count = nominal.nbytes // elem.nbytes
    return StructType(f"{nominal} (the bits of {count} {elem})",
                      (("bits", FieldArray(elem, (count,))),),
                      carries=nominal)


def bitcast(value: Expr, target: ScalarType) -> Expr:
    """``value``'s bits read as ``target`` (one width); a constant's folded now."""
    if value.type == target:
        return value
    if not isinstance(value, Const):
        return Call("bitcast", (value,), target)
    bits = np.array(value.value, value.type.numpy).view(target.numpy)
    return Const(bits.item(), target)


class BitsMixin:
    """Reinterpreting pointers and ``memcpy``; relies on the Lowerer (operands, structs,
    scopes, writes)."""

    def reinterpreting_pointer(self, p: PtrVal, view, root_elem: ScalarType,
                               tree) -> PtrVal:
        """``reinterpret_cast<const int4*>(p)`` over a buffer of ``root_elem``: a pointer to
        carriers of ``view`` made of the buffer's elements."""
        if isinstance(view, (ScalarType, VectorType)) and view.nbytes > root_elem.nbytes \
                and view.nbytes % root_elem.nbytes == 0:
            return PtrVal(p.root, p.offset, carrier_type(view, root_elem))
        raise self.error(f"reinterpreting a {root_elem} buffer as {ct.scalar_of(view)} not "
                         f"supported (kir reads a buffer as a wider vector of other elements, "
                         f"such as int4 over {root_elem}, but not element by element as "
                         "another type)", tree, UnsupportedError)

    def carrier_scalar(self, value: StructVal, tree) -> Expr:
        """A carrier standing for a scalar or a short vector read as it: each scalar's
        integer elements' bits assembled little-endian, as every GPU lays them out (the
        ``int`` a quantized kernel reads over four int8 weights for ``__dp4a``, a block's
        ``half`` scale over its two bytes)."""
        nominal = value.type.carries
        scalar = ct.scalar_of(nominal)
        parts = self._elements(value, nominal.nbytes, tree)
        if not all(isinstance(e.type, ScalarType) and e.type.is_int for e in parts):
            raise self.error(f"reading the bits of {len(parts)} {parts[0].type} as a "
                             f"{nominal} not supported (kir assembles a scalar from integer "
                             "elements only)", tree, UnsupportedError)
        per = scalar.nbytes // parts[0].type.nbytes  # elements a scalar
        lanes = [self._assembled(parts[k * per:(k + 1) * per], scalar, tree)
                 for k in range(len(parts) // per)]
        return lanes[0] if isinstance(nominal, ScalarType) else MakeVector(tuple(lanes),
                                                                           nominal)

    def _assembled(self, parts: list, scalar: ScalarType, tree) -> Expr:
        wide = U64 if scalar.nbytes == 8 else U32
        total: Expr | None = None
        for k, e in enumerate(parts):
            bits = ct.convert(ct.convert(self.value_of(e, tree), _UNSIGNED[e.type.nbytes]),
                              wide)
            shift = k * e.type.nbytes * 8
            if shift:
                bits = ct.binary("<<", bits, Const(shift, wide))
            total = bits if total is None else ct.binary("|", total, bits)
        assert total is not None
        if scalar.is_float:
            return bitcast(ct.convert(total, _UNSIGNED[scalar.nbytes]), scalar)
        return ct.convert(total, scalar)

    def carrier_of(self, t: StructType, value: Expr, tree) -> StructVal:
        """The carrier ``t`` holding ``value``'s bits (a scalar or short vector of its
        ``carries`` type), split into its integer elements little-endian: what a write of a
        ``half`` member of a block over bytes stores (the inverse of :meth:`carrier_scalar`)."""
        nominal = t.carries
        elem = t.fields[0][1].elem
        if not (isinstance(elem, ScalarType) and elem.is_int):
            raise self.error(f"writing a {nominal} as the bits of {elem} values not supported "
                             "(kir splits values into integer elements only)", tree,
                             UnsupportedError)
        value = self.coerce(value, nominal, tree)
        scalar = ct.scalar_of(nominal)
        lanes = [value] if isinstance(nominal, ScalarType) else [
            Component(value, k, scalar) for k in range(nominal.count)]
        pieces: list[Expr] = []
        for lane in lanes:
            bits = bitcast(lane, _UNSIGNED[scalar.nbytes]) if scalar.is_float else \
                ct.convert(lane, _UNSIGNED[scalar.nbytes])
            wide = self._temp(ct.convert(bits, U64 if scalar.nbytes == 8 else U32))
            for k in range(scalar.nbytes // elem.nbytes):
                shifted = ct.binary(">>", wide, Const(8 * elem.nbytes * k, wide.type)) \
                    if k else wide
                pieces.append(ct.convert(ct.convert(shifted, _UNSIGNED[elem.nbytes]), elem))
        arr = self._field_array(t.fields[0][1], self.fresh("bits"), "local")
        for k, piece in enumerate(pieces):
            self.emit(Store(arr.name, Const(k, I32), piece, loc=self.cur_loc))
        return StructVal(t, {"bits": ArrVal(arr)})

    def lower_memcpy(self, arg_trees: list, tree) -> Expr:
        """``memcpy(&dst, &src, n)`` between locals, struct members or buffer elements:
        element by element, ``n`` a compile-time constant covering whole elements on both
        sides. A vector local receiving other elements becomes their carrier (Packed128's
        ``int4 bits; memcpy(&bits, &payload, sizeof(bits));``)."""
        self._arity("memcpy", arg_trees, 3, 3, tree)
        nbytes = self.constant(arg_trees[2], "memcpy's size")
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise self.error("memcpy's size must be a positive integer", arg_trees[2])
        if nbytes > MAX_MEMCPY_BYTES:
            raise self.error(f"memcpy of {nbytes} bytes: kir copies element by element, at "
                             f"most {MAX_MEMCPY_BYTES} bytes (a pack or a small struct); "
                             "write the copy as a loop over the elements", arg_trees[2],
                             UnsupportedError)
        src = self._memcpy_elements(arg_trees[1], nbytes, "source")
        src_types = {e.type for e in src}
        vector = self._vector_local(arg_trees[0])
        if vector is not None and len(src_types) == 1 and src_types != {vector[1].type.elem}:
            ident, sym = vector
            if sym.type.nbytes != nbytes:
                raise self.error(f"memcpy of {nbytes} bytes into a {sym.type} (of "
                                 f"{sym.type.nbytes})", tree, UnsupportedError)
            self.rebind(ident, self.struct_local(carrier_type(sym.type, src_types.pop()),
                                                 ident))
        dst = self._memcpy_elements(arg_trees[0], nbytes, "destination")
        if [e.type.nbytes for e in dst] != [e.type.nbytes for e in src]:
            raise self.error(
                "memcpy between elements of different sizes ("
                + ", ".join(sorted({str(e.type) for e in dst}))
                + " from " + ", ".join(sorted({str(e.type) for e in src}))
                + "): kir copies element by element and does not split values into bytes",
                tree, UnsupportedError)
        values = [self.value_of(e, tree) for e in src]
        for target, value in zip(dst, values):
            self.write(target, bitcast(value, target.type), tree)
        return Const(0, I32)

    def return_carrier(self, fn, value: StructVal, tree) -> None:
        """``return bits;`` where the function returns the vector a carrier stands for: its
        result becomes a copy of the carrier. Only from the function's one final return,
        where the copy's locals are in the caller's scope."""
        if fn.done is not None:
            raise self.error(f"'{fn.name}' returns the bits of a {value.type.carries} made of "
                             "other elements: kir inlines that only from the function's one "
                             "final return", tree, UnsupportedError)
        fn.result = self.struct_local(value.type, f"{fn.name}_ret", value, tree)

    def _vector_local(self, tree) -> tuple[str, VarSym] | None:
        """``&v`` for a vector local ``v``: its name and symbol."""
        if isinstance(tree, Tree) and tree.data == "addr":
            inner = tree.children[-1]
            if isinstance(inner, Tree) and inner.data == "name":
                ident = str(inner.children[0])
                sym = self.lookup(ident)
                if isinstance(sym, VarSym) and isinstance(sym.type, VectorType):
                    return ident, sym
        return None

    def rebind(self, ident: str, sym: object) -> None:
        """Give ``ident`` a new meaning in the scope that declared it."""
        for scope in reversed(self.scopes):
            if ident in scope:
                scope[ident] = sym
                return
        self.bind(ident, sym)

    def _memcpy_elements(self, tree, nbytes: int, side: str) -> list:
        """The scalar elements (lvalues) that ``nbytes`` from ``tree``'s address cover."""
        if isinstance(tree, Tree) and tree.data == "addr":
            target = self.operand(tree.children[-1])
            if isinstance(target, MemRef):
                target = PtrVal(target.buffer, target.index, target.type)
        else:
            target = self.operand(tree)
        elements = self._elements(target, nbytes, tree)
        covered = 0
        for k, e in enumerate(elements):
            if covered == nbytes:
                return elements[:k]
            covered += e.type.nbytes
        if covered != nbytes:
            raise self.error(f"memcpy's {side} does not hold {nbytes} bytes of whole elements",
                             tree, UnsupportedError)
        return elements

    def _elements(self, value, nbytes: int, tree) -> list:
        if isinstance(value, StructVal):
            out: list = []
            for field, ft in value.type.fields:
                part = value.parts[field]
                if isinstance(ft, FieldPointer) or part is None:
                    raise self.error(f"memcpy of {value.type}, whose member '{field}' is a "
                                     "pointer or unset", tree, UnsupportedError)
                if isinstance(ft, FieldArray):
                    scalars = _count(ft.elem) * int(np.prod(ft.dims))
                    out += self._elements(part, ct.scalar_of(ft.elem).nbytes * scalars, tree)
                else:
                    size = struct_size(ft) if isinstance(ft, StructType) else ft.nbytes
                    out += self._elements(part, size, tree)
            return out
        if isinstance(value, ArrVal):
            sym: ArraySym = value.sym
            elem = ct.scalar_of(sym.elem)
            base = value.index if value.index is not None else Const(0, I32)
            size = _count(sym.elem) * int(np.prod(sym.dims[value.used:]))  # (the row's)
            return [MemRef(sym.name, _plus(base, k), elem)
                    for k in range(min(size, nbytes // elem.nbytes))]
        if isinstance(value, PtrVal):
            elem = self.buffers[value.root].elem
            return [MemRef(value.root, _plus(value.offset, k), elem)
                    for k in range(nbytes // elem.nbytes)]
        if isinstance(value, Var) and isinstance(value.type, VectorType):
            return [Component(value, k, value.type.elem) for k in range(value.type.count)]
        if isinstance(value, MemRef) and isinstance(value.type, VectorType):
            return self._elements(PtrVal(value.buffer, value.index, value.type), nbytes, tree)
        if isinstance(value, (Expr, MemRef)) and isinstance(value.type, ScalarType):
            return [value]  # (an expression only as a source: writing it is refused)
        raise self.error("memcpy between values kir cannot name element by element (locals, "
                         "arrays, struct members, buffer elements)", tree, UnsupportedError)


def _count(elem) -> int:
    return elem.count if isinstance(elem, VectorType) else 1


def _plus(base: Expr, k: int) -> Expr:
    return base if k == 0 else ct.binary("+", base, Const(k, base.type))


__all__ = ["BitsMixin", "MEMCPY", "bitcast", "carrier_type"]
