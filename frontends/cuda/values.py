"""Symbols and intermediate values of the CUDA lowering (never part of kir IR).

A CUDA pointer variable becomes an integer offset variable into its *root buffer* (a
kernel buffer parameter or an Alloc); the root must be known statically. Offsets are
``i32`` (:data:`OFFSET_TYPE`) and counted in the root buffer's scalar elements, whatever
the pointer's view type (a ``float4*`` view steps 4 elements per index): 32-bit keeps
index arithmetic in the type CUDA kernels themselves use and is what Metal indexes with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kir.ir import Const, Expr
from kir.ir.types import I32, ScalarType, VectorType

ValueType = ScalarType | VectorType
OFFSET_TYPE = I32


def count_of(t: ValueType) -> int:
    """Scalar elements one value of ``t`` occupies in a buffer."""
    return t.count if isinstance(t, VectorType) else 1


@dataclass
class VarSym:
    """A local scalar/vector variable or scalar kernel parameter."""

    name: str
    type: ValueType


@dataclass
class ConstSym:
    """A compile-time constant: template parameter, const/constexpr with a literal value."""

    value: Const


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


@dataclass
class FunctionSym:
    """A ``__device__`` function: its parse tree and the text offset its positions use."""

    name: str
    tree: object
    offset: int


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
    result: str | None
    result_type: ValueType | None
    done: str | None
    loop_depth: int = 0
    params_assigned: set[str] = field(default_factory=set)


@dataclass
class BufferInfo:
    """What the lowering knows about a root buffer."""

    elem: ScalarType
    space: str
    const: bool = False
