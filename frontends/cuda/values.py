"""Symbols and intermediate values of the CUDA lowering (never part of kir IR).

A CUDA pointer variable becomes an integer offset variable into its *root buffer* (a
kernel buffer parameter or an Alloc); the root must be known statically. Offsets are
``i32`` (:data:`OFFSET_TYPE`) and counted in the root buffer's scalar elements, whatever
the pointer's view type (a ``float4*`` view steps 4 elements per index): 32-bit keeps
index arithmetic in the type CUDA kernels themselves use and is what Metal indexes with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kir.ir import Const, Expr
from kir.ir.types import I32, ScalarType, VectorType

ValueType = ScalarType | VectorType
OFFSET_TYPE = I32


def count_of(t) -> int:
    """Scalar elements one value of ``t`` occupies in a buffer (a struct seen over a buffer
    of its one scalar type: all of its members')."""
    if isinstance(t, StructType):
        # members of mixed types are only ever seen over bytes: its size in bytes
        elem, count = t.scalars()
        return count if elem is not None else struct_size(t)
    return t.count if isinstance(t, VectorType) else 1


def struct_size(t: StructType) -> int:
    """``sizeof`` a struct with C's natural layout (each field at a multiple of its own
    alignment, the whole padded to the largest)."""
    offsets = field_offsets(t)
    end = offsets[-1] + _member_size_align(t.fields[-1][1])[0] if offsets else 0
    align = _struct_align(t)
    return -(-end // align) * align


def field_offsets(t: StructType) -> list[int]:
    """Each member's byte offset in C's natural layout (each at a multiple of its own
    alignment)."""
    out, offset = [], 0
    for _name, ft in t.fields:
        n, a = _member_size_align(ft)
        offset = -(-offset // a) * a
        out.append(offset)
        offset += n
    return out


def _member_size_align(ft) -> tuple[int, int]:
    """A member's size and alignment in bytes."""
    if isinstance(ft, StructType):
        return struct_size(ft), _struct_align(ft)
    if isinstance(ft, FieldPointer):
        return ft.nbytes, ft.nbytes
    if isinstance(ft, FieldArray):
        n = ft.elem.nbytes
        for d in ft.dims:
            n *= d
        return n, value_align(ft.elem)
    return ft.nbytes, value_align(ft)


def value_align(t) -> int:
    """CUDA's alignment of a scalar or vector type: a 2- or 4-vector's size (``float4``:
    16), a 3-vector's element's (``float3`` is three floats, aligned to 4)."""
    if isinstance(t, VectorType) and t.count == 3:
        return t.elem.nbytes
    return t.nbytes


def _struct_align(t: StructType) -> int:
    """The struct's alignment: its largest member's, or what it declares (``__align__(16)``,
    ``alignas(16)``) when that is more."""
    out = max(1, t.align)
    for _name, ft in t.fields:
        if isinstance(ft, StructType):
            out = max(out, _struct_align(ft))
        elif isinstance(ft, FieldArray):
            out = max(out, value_align(ft.elem))
        elif isinstance(ft, FieldPointer):
            out = max(out, ft.nbytes)
        else:
            out = max(out, value_align(ft))
    return out


@dataclass
class VarSym:
    """A local scalar/vector variable or scalar kernel parameter."""

    name: str
    type: ValueType


@dataclass
class ConstSym:
    """A compile-time constant: template parameter, const/constexpr with a literal value.
    ``pointer_test``: its value is a null test kir decided (``const bool has_bias = bias !=
    nullptr;``), so a condition reading it decides its branch as the test itself would."""

    value: Const
    pointer_test: bool = False


@dataclass
class ArraySym:
    """A shared/local array (or dynamic shared memory) named ``name`` in the IR. ``elem`` is
    the declared element type (a vector element occupies several scalars); ``dims`` are
    the declared dimensions (empty for a ``__shared__`` scalar)."""

    name: str
    elem: ValueType
    dims: tuple[int, ...]
    space: str


@dataclass
class PtrSym:
    """A pointer variable: root buffer (None until first assigned), its view type, and the
    offset: an IR variable name, or a fixed expression when the pointer never changes."""

    root: str | None
    view: ValueType
    offset_var: str | None = None
    offset_expr: Expr | None = None


class FunctionSym:
    """A ``__device__`` function: the text offset its positions use, and its parse tree,
    parsed on first use (a function no kernel calls is never parsed, so a construct kir
    does not support there refuses no kernel)."""

    def __init__(self, name: str, offset: int, parse: Callable[[], object],
                 template: bool = False, text: str = "") -> None:
        self.name = name
        self.offset = offset
        self.template = template
        self.text = text  # its source text, where a reader of the text needs it
        self._parse = parse
        self._tree: object = None

    @property
    def tree(self) -> object:
        if self._tree is None:
            self._tree = self._parse()
        return self._tree


# --------------------------------------------------------------------- expression values


@dataclass
class PtrVal:
    """A pointer value: ``root`` buffer plus ``offset`` scalar elements, seen as ``view``."""

    root: str
    offset: Expr
    view: ValueType


@dataclass
class ArrVal:
    """An array named in an expression, ``used`` of its dimensions already indexed into a
    flattened partial ``index``."""

    sym: ArraySym
    index: Expr | None = None
    used: int = 0


@dataclass
class MemRef:
    """An element of memory (an lvalue): ``buffer[index]`` of ``type``."""

    buffer: str
    index: Expr
    type: ValueType


@dataclass
class FnContext:
    """State of one inlined ``__device__`` function call."""

    name: str
    result: object  # the result variable's name, a StructVal for a struct, None for void
    result_type: object
    done: str | None
    loop_depth: int = 0
    params_assigned: set[str] = field(default_factory=set)


@dataclass
class BufferInfo:
    """What the lowering knows about a root buffer."""

    elem: ScalarType
    space: str
    const: bool = False


# ------------------------------------------------------------------ C++ types and values


@dataclass(frozen=True)
class FieldArray:
    """A fixed-size array member of a struct (``float v[4]``)."""

    elem: ValueType
    dims: tuple[int, ...]


@dataclass(frozen=True)
class FieldPointer:
    """A pointer member of a struct (``float* elements``, as in the CUDA programming guide's
    ``Matrix``): in a struct value it is a pointer variable (:class:`PtrSym`), whose buffer
    must be known statically like any pointer's."""

    view: ValueType
    const: bool = False
    nbytes = 8

    def __str__(self) -> str:
        return f"{self.view}*"


@dataclass(frozen=True)
class StructType:
    """A POD struct: its fields in declaration order, each a scalar or vector type, a nested
    StructType, a FieldArray or a FieldPointer. Structs never reach kir IR: a struct variable
    is one local per field (a pointer variable for a pointer member), an array of structs one
    array per field."""

    name: str
    fields: tuple[tuple[str, object], ...]
    # What member functions see besides the fields (not part of the type's identity, which
    # the name holds with its template arguments): the struct's name as written in the
    # file, its template parameters' values (a type, or a Const) and its static constants.
    base: str = field(default="", compare=False)
    template: tuple[tuple[str, object], ...] = field(default=(), compare=False)
    statics: tuple[tuple[str, object], ...] = field(default=(), compare=False)
    # user-written constructors (kir runs none): any, and one taking no arguments
    constructors: bool = field(default=False, compare=False)
    default_constructor: bool = field(default=False, compare=False)
    # default member initializers: field -> the constant it takes when nothing gives one
    defaults: tuple[tuple[str, object], ...] = field(default=(), compare=False)
    # member type aliases: name -> type (``using Type = float4;``)
    types: tuple[tuple[str, object], ...] = field(default=(), compare=False)
    # a carrier's: the vector or scalar type it stands for (an int4 read over a bf16
    # buffer is eight bf16 values; kir.frontends.cuda.lower_bits)
    carries: object = field(default=None, compare=False)
    # the alignment the struct declares (``struct alignas(16) Pack``), 0 when it declares none
    align: int = field(default=0, compare=False)

    def member_alignment(self, name: str) -> int:
        """The bytes member ``name`` is aligned to wherever the code reads or writes a whole
        struct over a buffer: for the first member, a carrier's vector's size or what the
        struct declares (``alignas(16)``); 0 when nothing says."""
        if not self.fields or name != self.fields[0][0]:
            return 0
        return self.carries.nbytes if self.carries is not None else self.align

    def field(self, name: str) -> object | None:
        return next((t for n, t in self.fields if n == name), None)

    def static(self, name: str) -> object | None:
        """The value of static constant ``name``, or None."""
        return next((v for n, v in self.statics if n == name), None)

    def member_type(self, name: str) -> object | None:
        """The type member alias ``name`` stands for (``using Type = float4;``), or None."""
        return next((t for n, t in self.types if n == name), None)

    def scalars(self) -> tuple[ScalarType | None, int]:
        """The one scalar type every member is made of (scalars, vectors, one-dimensional
        arrays, nested such structs) and how many, so that the struct can be read over a
        buffer of that type (``*reinterpret_cast<const Packed*>(p)``); (None, 0) when the
        members differ or one is a pointer."""
        kinds, total = set(), 0
        for _name, t in self.fields:
            if isinstance(t, StructType):
                elem, n = t.scalars()
            elif isinstance(t, FieldArray):
                elem, n = (t.elem.elem if isinstance(t.elem, VectorType) else t.elem,
                           count_of(t.elem) * t.dims[0]) if len(t.dims) == 1 else (None, 0)
            elif isinstance(t, (ScalarType, VectorType)):
                elem, n = (t.elem if isinstance(t, VectorType) else t), count_of(t)
            else:
                elem, n = None, 0
            if elem is None:
                return None, 0
            kinds.add(elem)
            total += n
        return (kinds.pop(), total) if len(kinds) == 1 else (None, 0)

    def __str__(self) -> str:
        return f"struct {self.name}"


@dataclass(frozen=True)
class CgType:
    """A cooperative-groups type: ``block`` (thread_block), ``tile`` (thread_block_tile<N>,
    ``size`` N), ``grid``, or a reduction operator ``plus``/``greater``/``less``; or one of
    CUB's collectives (frontends/cuda/lower_cub.py): ``cub_block`` (BlockReduce of ``size``
    threads), ``cub_warp`` (WarpReduce of ``size`` lanes), ``cub_block_scan`` and
    ``cub_warp_scan`` (BlockScan, WarpScan) of ``elem`` values, and their ``cub_storage``
    (TempStorage)."""

    kind: str
    size: int = 0
    elem: object = None  # a ScalarType, or a StructType of scalars (a collective's value)

    def __str__(self) -> str:
        if self.kind.startswith("cub_"):
            name = {"cub_block": "BlockReduce", "cub_warp": "WarpReduce",
                    "cub_block_scan": "BlockScan", "cub_warp_scan": "WarpScan"}.get(
                        self.kind, "TempStorage")
            shape = f"<{self.elem}, {self.size}>" if self.elem is not None else ""
            return f"cub::{name}{shape}"
        return f"cg::{self.kind}" + (f"<{self.size}>" if self.size else "")


#: The type of an ``auto`` declaration: the initializer's.
AUTO = CgType("auto")


@dataclass
class StructVal:
    """A struct-typed value, one part per field: a ``Var`` for a field of a local (so it
    can be assigned), a ``MemRef`` for a struct in an array, an ``Expr`` for a computed
    value, a nested StructVal, or an ``ArrVal`` for an array member."""

    type: StructType
    parts: dict[str, object]
    # where a struct in a buffer or array lives (``&x[i]`` as a pointer), else None
    address: object = field(default=None, compare=False)


class FunctionPointerType:
    """The type a function pointer typedef names (``typedef void (*op_t)(float&);``): a
    template parameter of it is a function, bound as ``T (*F)(...)`` parameters are."""

    def __repr__(self) -> str:
        return "function pointer"


FUNCTION_POINTER = FunctionPointerType()


@dataclass
class LocalAddr:
    """``&x`` for a local scalar or vector ``x`` (``rope(..., &cos_t, &sin_t)``, outputs a
    helper writes): what it points to, read and written through ``*p`` or ``p[0]``."""

    target: object  # a Var


@dataclass(frozen=True)
class ComponentAddr:
    """``reinterpret_cast<float*>(&v)`` for a local vector ``v``: a pointer to its components,
    ``offset`` of them in (llm.c's ``vec_at(float4& v, int k)``)."""

    vector: object  # a Var of a VectorType
    offset: Expr


@dataclass(frozen=True)
class ComponentRef:
    """Component ``index`` (known only as the kernel runs) of the local vector ``vector``:
    read as a select over its components, written by rebuilding it."""

    vector: object  # a Var of a VectorType
    index: Expr

    @property
    def type(self):
        return self.vector.type.elem


def carries(declared, value) -> bool:
    """Whether ``value`` is a carrier (:mod:`.lower_bits`) standing for a value of the
    ``declared`` vector or scalar type."""
    return isinstance(value, StructVal) and value.type.carries is not None \
        and value.type.carries == declared


@dataclass
class StructArraySym:
    """An array of structs (shared or local), stored as one array per field."""

    type: StructType
    dims: tuple[int, ...]
    fields: dict[str, object]  # field -> ArraySym, or StructArraySym for a nested struct


@dataclass
class CgVal:
    """A cooperative group (or a reduction operator object) held in a variable."""

    type: CgType


@dataclass(frozen=True)
class NullVal:
    """A null pointer: ``nullptr``, ``NULL``, or a pointer argument the spec says is null."""


NULL_POINTER = NullVal()


@dataclass
class RefSym:
    """A C++ reference bound to an lvalue (a ``MemRef`` whose index was fixed when the
    reference was bound, a ``Var``, a ``Component``, a ``StructVal``)."""

    target: object


@dataclass
class TypeSym:
    """A type name bound in a scope: a template type parameter or a local alias. ``type``
    is None for a template parameter nothing gave a type; ``missing`` then says why."""

    type: object
    missing: str = ""


@dataclass(frozen=True)
class TemplateName:
    """A struct template's name given to a template template parameter
    (``WarpAllReduce<MaxOp, float>`` binds ``ReductionOp`` to ``MaxOp``)."""

    name: str


@dataclass(frozen=True)
class FunctionName:
    """A ``__device__`` function given to a function template parameter
    (``template <typename T, T (*ACT_FN)(const T&)>``): its name, and the template arguments
    written with it, evaluated where they were written ((value, tree) pairs; none: deduced
    at each call)."""

    name: str
    given: tuple = ()


class FunctorStruct:
    """A data-free struct with ``operator()``: its name, the operator's text span in the
    file, the struct's template parameters and the arguments written (``targs``)."""

    def __init__(self, name: str, start: int, end: int, params: tuple[str, ...],
                 targs=None) -> None:
        self.name, self.start, self.end, self.params, self.targs = name, start, end, params, targs

    def __str__(self) -> str:
        return f"struct {self.name}"


class FunctorVal:
    """A function object: a value of a :class:`FunctorStruct` (it holds no data)."""

    def __init__(self, struct: FunctorStruct) -> None:
        self.struct = struct
        self.type = struct


# what a lowered value that is not a number is, in the words of an error message
_KINDS = {"CgVal": "cooperative group", "StructVal": "struct", "FunctorVal": "function object",
          "LambdaVal": "lambda", "PtrVal": "pointer", "ArrVal": "array", "NullVal": "null pointer",
          "Dim3Val": "dim3"}


def not_a_number(value) -> str:
    """What ``value`` (a lowered value that is no kir expression) is, for an error."""
    return _KINDS.get(type(value).__name__, "value that is not a number")
