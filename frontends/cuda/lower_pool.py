"""``extern __shared__ char smem[];`` carved by ``reinterpret_cast`` (a Lowerer mixin).

Kernels that size their dynamic shared memory in bytes declare it as ``char`` (or
``unsigned char``) and take typed pointers into it: ``float* s = reinterpret_cast<float*>
(smem);``, ``(float*)(smem + n * sizeof(float))``. kir's dynamic shared array has one element
type, so the byte array takes the type of its first such cast, and byte offsets become
element offsets. Refused, each where it happens: reading or writing the bytes themselves, a
second type, a byte pointer kept before the cast, and an offset not provably a multiple of the
element size.
"""

from __future__ import annotations

import dataclasses

from kir.frontends.cuda import ctypes_ as ct
from kir.frontends.cuda.values import BufferInfo, PtrVal, StructType

from kir.errors import UnsupportedError
from kir.ir import Alloc, Binary, Cast, Const, Expr
from kir.ir.types import I8, U8


class PoolMixin:
    """Typing a dynamic shared byte array at its first cast."""

    def is_byte_pool(self, root: str) -> bool:
        """Whether ``root`` is the dynamic shared array the kernel declared as bytes (its
        symbol keeps the byte view; the IR array takes the type of the first cast)."""
        sym = self.dynamic_shared
        return sym is not None and sym.name == root and sym.elem in (I8, U8)

    def byte_pool_used(self, root: str, tree, view=U8) -> None:
        """A read, write or kept pointer of the byte array as bytes (``view`` is the type it
        is seen as): refused once the array is typed, remembered (and refused at the cast)
        before. Any use of the dynamic shared array is remembered (see :meth:`retype_pool`)."""
        sym = self.dynamic_shared
        if sym is not None and sym.name == root:
            self.__dict__.setdefault("_pool_touched", tree)
        if not self.is_byte_pool(root) or ct.scalar_of(view) not in (I8, U8):
            return
        if self.buffers[root].elem not in (I8, U8):
            raise self.error(f"extern __shared__ byte array '{root}' is used as bytes, but it "
                             f"holds {self.buffers[root].elem} (kir gives it one element type)",
                             tree, UnsupportedError)
        self.__dict__["_pool_used"] = tree

    def _pool_element(self, target, tree):
        """The scalar a pool cast to ``target`` holds: a struct's one member type (``struct
        Pack { float v[4]; }``: f32)."""
        if isinstance(target, StructType):
            elem, _count = target.scalars()
            if elem is None:
                raise self.error(f"dynamic shared memory cast to {target}, whose members are "
                                 "of several types (kir gives the array one element type)",
                                 tree, UnsupportedError)
            return elem
        return ct.scalar_of(target)

    def type_byte_pool(self, p: PtrVal, target, tree) -> PtrVal:
        """``reinterpret_cast<T*>(pool + byte_offset)``: the pool holds T (the first such
        cast decides), and the byte offset becomes an element offset."""
        elem = self._pool_element(target, tree)
        held = self.buffers[p.root].elem
        used = self.__dict__.get("_pool_used")
        if used is not None:
            raise self.error(f"extern __shared__ byte array '{p.root}' is used as bytes before "
                             f"it is cast to {elem} (kir gives it one element type)", used,
                             UnsupportedError)
        if held not in (I8, U8) and held != elem:
            raise self.error(f"extern __shared__ byte array '{p.root}' cast to {elem} after "
                             f"{held} (kir gives it one element type)", tree, UnsupportedError)
        offset = _divided(p.offset, elem.nbytes)
        if offset is None:
            raise self.error(f"byte offset into '{p.root}' is not a multiple of "
                             f"sizeof({elem}) that kir can prove", tree, UnsupportedError)
        if held in (I8, U8):
            self._pool_holds(p.root, elem, self.launch.shared_bytes // elem.nbytes)
        return PtrVal(p.root, ct.convert(offset, p.offset.type), target)

    def _pool_holds(self, root: str, elem, size: int) -> None:
        """The dynamic shared array ``root`` holds ``size`` elements of ``elem`` from now on
        (its allocation and what the lowering knows of it)."""
        self.prologue = [Alloc(a.name, elem, size, "shared", True, loc=a.loc)
                         if isinstance(a, Alloc) and a.name == root else a
                         for a in self.prologue]
        self.buffers[root] = BufferInfo(elem, "shared")


    def retype_pool(self, p: PtrVal, target) -> PtrVal | None:
        """``(float*)pool`` for a dynamic shared array declared with another element type
        (``extern __shared__ int smem[]``, raw memory to the code that casts it; cuda-samples'
        ``SharedMemory<double>`` casts it to ``double*``) and not used before: the array
        holds the cast's type from now on. An element of another size only from the array's
        start. None when that does not apply (the cast is then judged as any other)."""
        sym = self.dynamic_shared
        if sym is None or sym.name != p.root:
            return None
        elem = self._pool_element(target, None)
        held = self.buffers[p.root].elem if p.root in self.buffers else None
        at_start = isinstance(p.offset, Const) and p.offset.value == 0
        if sym is None or sym.name != p.root or self.is_byte_pool(p.root) or held is None \
                or held == elem or (held.nbytes != elem.nbytes and not at_start) \
                or "_pool_touched" in self.__dict__:
            return None
        self._pool_holds(p.root, elem, self.launch.shared_bytes // elem.nbytes)
        self.__dict__.setdefault("_pool_declared", sym.elem)
        self.dynamic_shared = dataclasses.replace(sym, elem=target)
        return PtrVal(p.root, p.offset, target)


def _divided(expr: Expr, k: int) -> Expr | None:
    """``expr / k`` when ``expr`` is provably a multiple of ``k`` (constants, sums, products
    with a multiple, conversions of those), else None."""
    if k == 1:
        return expr
    if isinstance(expr, Const):
        return Const(expr.value // k, expr.type) if expr.value % k == 0 else None
    if isinstance(expr, Cast):
        inner = _divided(expr.value, k)
        return None if inner is None else Cast(inner, expr.type)
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        a, b = _divided(expr.left, k), _divided(expr.right, k)
        return None if a is None or b is None else ct.binary(expr.op, a, b)
    if isinstance(expr, Binary) and expr.op == "*":
        a = _divided(expr.left, k)
        if a is not None:
            return expr.right if _is_one(a) else ct.binary("*", a, expr.right)
        b = _divided(expr.right, k)
        if b is None:
            return None
        return expr.left if _is_one(b) else ct.binary("*", expr.left, b)
    return None


def _is_one(expr: Expr) -> bool:
    return isinstance(expr, Const) and expr.value == 1
